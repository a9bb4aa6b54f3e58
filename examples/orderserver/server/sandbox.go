package server

import (
	"context"
	"errors"

	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/webhook/producer"
)

// ownEndpoint returns the endpoint if it belongs to p, and sandbox.ErrUnknownEndpoint otherwise: a
// control never tells an evaluator that someone else's endpoint exists.
func (s *Server) ownEndpoint(ctx context.Context, p sandbox.Principal, id string) (producer.Endpoint, error) {
	ep, err := s.store.Lookup(ctx, id)
	if errors.Is(err, producer.ErrUnknownEndpoint) || (err == nil && ep.Owner != p.Scope()) {
		return producer.Endpoint{}, sandbox.ErrUnknownEndpoint
	}
	return ep, err
}

// setFaults is the sandbox control behind POST /v1/sandbox/webhook_endpoints/{id}/faults. The fault
// table lives in this process: with several replicas, each applies the faults set through it.
func (s *Server) setFaults(ctx context.Context, p sandbox.Principal, id string, f sandbox.Faults) error {
	if _, err := s.ownEndpoint(ctx, p, id); err != nil {
		return err
	}
	return s.faults.Set(id, f)
}

// trigger is the sandbox control behind POST /v1/sandbox/events: a test event through the normal
// delivery path, so an evaluator can exercise a consumer without creating orders.
func (s *Server) trigger(ctx context.Context, p sandbox.Principal, req sandbox.TriggerRequest) ([]sandbox.Triggered, error) {
	ids := []string{req.Endpoint}
	if req.Endpoint == "" {
		var err error
		if ids, err = s.store.EndpointIDs(ctx, p.Scope()); err != nil {
			return nil, err
		}
	} else if _, err := s.ownEndpoint(ctx, p, req.Endpoint); err != nil {
		return nil, err
	}
	pub := s.publisher.WithLog(s.store.RequestLog(ctx))
	out := make([]sandbox.Triggered, 0, len(ids))
	for _, id := range ids {
		ev, err := pub.Publish(ctx, id, req.Type, req.Data)
		if err != nil {
			if refused := eventRefusal(err, "/data"); refused != nil {
				return out, refused
			}
			return out, err
		}
		s.stats.eventsEmitted.Add(1)
		noteAppended(ctx)
		out = append(out, sandbox.Triggered{Endpoint: id, Event: ev})
	}
	return out, nil
}

// reset is the sandbox control behind POST /v1/sandbox/reset: the evaluation's orders go, its
// endpoints' faults are cleared and its version pin is dropped (the next request pins afresh).
// Endpoints and their event streams stay, so a consumer's cursor stays valid; credentials stay, so the
// evaluation goes on.
func (s *Server) reset(ctx context.Context, p sandbox.Principal) error {
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
