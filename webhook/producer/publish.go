package producer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/webhook"
)

// DefaultAPIVersion is the api_version Publisher stamps on events when Options leave it empty.
const DefaultAPIVersion = "v1"

// PublisherOptions configures a Publisher. The zero value (or nil) means the defaults.
type PublisherOptions struct {
	// APIVersion is the version events are produced at (normally the newest); the Render hook of the
	// Dispatcher and RangeHandler turns them into each endpoint's pinned version. Empty means
	// DefaultAPIVersion.
	APIVersion string
	// Now is the clock that stamps Created; nil means time.Now.
	Now func() time.Time
}

// Publisher turns a business event into a webhook event on an endpoint's stream: it checks that the
// endpoint exists, stamps the ID, creation time and API version, and appends to the Log. The Dispatcher
// then delivers it. A Publisher is safe for concurrent use when its Log and Endpoints are; the zero
// value is not usable: build one with NewPublisher.
type Publisher struct {
	log        Log
	endpoints  Endpoints
	apiVersion string
	now        func() time.Time
}

// NewPublisher returns a Publisher appending to log for the endpoints in endpoints.
func NewPublisher(log Log, endpoints Endpoints, opts *PublisherOptions) *Publisher {
	p := &Publisher{log: log, endpoints: endpoints, apiVersion: DefaultAPIVersion, now: time.Now}
	if opts != nil {
		if opts.APIVersion != "" {
			p.apiVersion = opts.APIVersion
		}
		if opts.Now != nil {
			p.now = opts.Now
		}
	}
	return p
}

// WithLog returns a copy of the Publisher that appends to log instead: the transactional outbox, where
// log is a pgstore.EventLog on the caller's pgx.Tx so that the event commits (or rolls back) with the
// business change that caused it.
func (p *Publisher) WithLog(log Log) *Publisher {
	cp := *p
	cp.log = log
	return &cp
}

// Publish appends an event of the given type to the endpoint's stream and returns it with its ID and
// sequence — Sequence 0 on a Sequencing log (pgstore.EventLog), which numbers the event after it
// commits. data is marshalled with encoding/json, except json.RawMessage and []byte, which must
// already be JSON and are stored as they are.
func (p *Publisher) Publish(ctx context.Context, endpointID, eventType string, data any) (webhook.Event, error) {
	if _, err := p.endpoints.Lookup(ctx, endpointID); err != nil {
		return webhook.Event{}, fmt.Errorf("producer: publish to %s: %w", endpointID, err)
	}
	return p.publish(ctx, endpointID, eventType, data)
}

// PublishTo is Publish for a caller that already holds the endpoint — typically one it has just read
// from the registry in the same transaction as the append, as the transactional outbox does — so the
// endpoint is not looked up again: one round trip less per event.
func (p *Publisher) PublishTo(ctx context.Context, ep Endpoint, eventType string, data any) (webhook.Event, error) {
	if ep.ID == "" {
		return webhook.Event{}, fmt.Errorf("producer: publish: %w", ErrUnknownEndpoint)
	}
	return p.publish(ctx, ep.ID, eventType, data)
}

// PublishToEach publishes one business event to each of the endpoints the caller holds — a
// licensee's endpoints, read in the same transaction as the append — marshalling data once. Each
// endpoint gets an event of its own (its own ID, and its own place in that endpoint's stream). On a
// BatchAppender log (pgstore.EventLog, MemoryLog) all the events go in one call, all or none; on
// another, one Append each, in order, stopping at the first failure. The events come back in the order
// of eps. No endpoints publishes nothing.
func (p *Publisher) PublishToEach(ctx context.Context, eps []Endpoint, eventType string, data any) ([]webhook.Event, error) {
	if len(eps) == 0 {
		return nil, nil
	}
	raw, err := marshalData(data)
	if err != nil {
		return nil, err
	}
	batch := make([]StreamEvent, len(eps))
	created := p.now().Unix()
	for i, ep := range eps {
		if ep.ID == "" {
			return nil, fmt.Errorf("producer: publish to endpoint %d: %w", i, ErrUnknownEndpoint)
		}
		batch[i] = StreamEvent{Stream: ep.ID, Event: webhook.Event{ID: randid.New("evt_"), Type: eventType,
			Created: created, APIVersion: p.apiVersion, Data: raw}}
	}
	if ba, ok := p.log.(BatchAppender); ok {
		return ba.AppendBatch(ctx, batch)
	}
	out := make([]webhook.Event, len(batch))
	for i, se := range batch {
		if out[i], err = p.log.Append(ctx, se.Stream, se.Event); err != nil {
			return out[:i], err
		}
	}
	return out, nil
}

// marshalData returns an event's data as JSON: json.RawMessage and []byte as they are, anything else
// through encoding/json.
func marshalData(data any) ([]byte, error) {
	switch d := data.(type) {
	case json.RawMessage:
		return d, nil
	case []byte:
		return d, nil
	}
	b, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("%w: marshal data: %w", ErrInvalidEvent, err)
	}
	return b, nil
}

func (p *Publisher) publish(ctx context.Context, endpointID, eventType string, data any) (webhook.Event, error) {
	raw, err := marshalData(data)
	if err != nil {
		return webhook.Event{}, err
	}
	ev := webhook.Event{
		ID:         randid.New("evt_"),
		Type:       eventType,
		Created:    p.now().Unix(),
		APIVersion: p.apiVersion,
		Data:       raw,
	}
	return p.log.Append(ctx, endpointID, ev)
}
