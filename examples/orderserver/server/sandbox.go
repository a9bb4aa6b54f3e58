package server

import (
	"context"
	"errors"

	"github.com/svcplatform/conventions/apierror"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/webhook/producer"
)

// ownEndpoint returns the endpoint if it belongs to p, and sandbox.ErrUnknownEndpoint otherwise: a
// control never tells an evaluator that someone else's endpoint exists.
func (s *Server) ownEndpoint(ctx context.Context, p apikey.Principal, id string) (producer.Endpoint, error) {
	ep, err := s.store.Lookup(ctx, id)
	if errors.Is(err, producer.ErrUnknownEndpoint) || (err == nil && (ep.Owner != p.Scope() || !ep.DeletedAt.IsZero())) {
		return producer.Endpoint{}, sandbox.ErrUnknownEndpoint
	}
	return ep, err
}

// setFaults is the sandbox control behind POST /v1/sandbox/webhook_endpoints/{id}/faults. The fault
// table lives in this process: with several replicas, each applies the faults set through it.
func (s *Server) setFaults(ctx context.Context, p apikey.Principal, id string, f sandbox.Faults) error {
	if _, err := s.ownEndpoint(ctx, p, id); err != nil {
		return err
	}
	return s.faults.Set(id, f)
}

// trigger is the sandbox control behind POST /v1/sandbox/events: a test event through the normal
// delivery path, so an evaluator can exercise a consumer without creating orders. The events go to
// the endpoints all or none (one AppendBatch: the store's logs are BatchAppenders), so a trigger
// refused because one endpoint's stream is full, or its event too large, has published nothing: the
// controls answer the refusal without storing it as the key's response (see sandbox.Hooks), and the
// same key, retried once retention has freed room, publishes each event once.
func (s *Server) trigger(ctx context.Context, p apikey.Principal, req sandbox.TriggerRequest) ([]sandbox.Triggered, error) {
	var eps []producer.Endpoint
	if req.Endpoint != "" {
		ep, err := s.ownEndpoint(ctx, p, req.Endpoint)
		if err != nil {
			return nil, err
		}
		if !ep.Subscribed(req.Type) {
			return nil, apierror.Invalid(apierror.Body("/type", CodeNotSubscribed,
				"the webhook endpoint is not subscribed to this event type (its enabled_events)"))
		}
		eps = []producer.Endpoint{ep}
	} else {
		ids, err := s.store.EndpointIDs(ctx, p.Scope())
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			ep, err := s.store.Lookup(ctx, id)
			if err != nil {
				return nil, err
			}
			eps = append(eps, ep)
		}
	}
	// Only the endpoints subscribed to the type get an event.
	evs, err := s.publisher.WithLog(s.store.RequestLog(ctx)).PublishToEach(ctx, eps, req.Type, req.Data)
	if err != nil {
		if refused := eventRefusal(err, "/data"); refused != nil {
			return nil, refused
		}
		return nil, err
	}
	out := make([]sandbox.Triggered, len(evs))
	for i, ev := range evs {
		out[i] = sandbox.Triggered{Endpoint: ev.Endpoint, Event: ev}
	}
	if len(evs) > 0 {
		s.stats.eventsEmitted.Add(int64(len(evs)))
		noteAppended(ctx)
	}
	return out, nil
}

// reset is the sandbox control behind POST /v1/sandbox/reset: the evaluation's orders go, its
// endpoints' faults are cleared and its version pin is dropped (the next request pins afresh).
// Endpoints and their event streams stay, so a consumer's cursor stays valid; credentials stay, so the
// evaluation goes on.
func (s *Server) reset(ctx context.Context, p apikey.Principal) error {
	if _, err := s.store.DeleteOrders(ctx, p.Scope()); err != nil {
		return err
	}
	if err := s.versions.Unpin(ctx, p.Scope()); err != nil {
		return err
	}
	ids, err := s.store.EndpointIDs(ctx, p.Scope())
	if err != nil {
		return err
	}
	s.faults.Clear(ids...)
	return nil
}
