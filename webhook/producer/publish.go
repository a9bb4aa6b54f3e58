package producer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/svcplatform/conventions/webhook/producer/driver"

	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/webhook"
)

// Defaults of PublisherOptions.
const (
	// DefaultAPIVersion is the api_version Publisher stamps on events when the options leave it
	// empty.
	DefaultAPIVersion = "v1"

	// DefaultMaxFanOut is the most endpoints PublishToOwner publishes one event to when the options
	// leave MaxFanOut at 0: four times the 16 endpoints per licensee that registration normally
	// allows (Stripe's limit, and the reference server's), so that it never refuses a normal
	// licensee, and small enough that a registry gone wrong cannot turn one order into hundreds of
	// events and requests.
	DefaultMaxFanOut = 64

	// DefaultMaxEventBytes is the largest event a Publisher appends when the options leave
	// MaxEventBytes at 0: 256 KiB of envelope as a delivery carries it (data, ID, type, endpoint, and
	// room for the sequence), a quarter of the 1 MiB a consumer accepts by default
	// (webhook.ReceiverOptions.MaxBodyBytes), which leaves room for rendering at another version, and
	// a sixteenth of a range page (DefaultMaxPageBytes).
	DefaultMaxEventBytes = 256 << 10
)

// Errors of the Publisher.
var (
	// ErrNoListing: PublishToOwner was called on a Publisher whose Endpoints cannot list an owner's
	// endpoints (it is not an EndpointLister).
	ErrNoListing = errors.New("producer: the endpoints registry cannot list an owner's endpoints")
	// ErrFanOutLimit: the owner has more endpoints than PublisherOptions.MaxFanOut; PublishToOwner
	// published nothing.
	ErrFanOutLimit = errors.New("producer: owner has more webhook endpoints than the publisher fans out to")
	// ErrEventTooLarge: the event's envelope would be larger than PublisherOptions.MaxEventBytes;
	// nothing was published. The error names the size and the maximum.
	ErrEventTooLarge = errors.New("producer: event too large")
	// ErrNotSubscribed: Publish or PublishTo named an endpoint that does not receive events of the
	// type (Endpoint.EnabledEvents); nothing was published.
	ErrNotSubscribed = errors.New("producer: the webhook endpoint is not subscribed to the event type")
)

// PublisherOptions configures a Publisher. The zero value (or nil) means the defaults.
type PublisherOptions struct {
	// APIVersion is the version events are produced at (normally the newest); the Render hook of the
	// Dispatcher and RangeHandler turns them into each endpoint's pinned version. Empty means
	// DefaultAPIVersion.
	APIVersion string
	// Now is the clock that stamps Created; nil means time.Now.
	Now func() time.Time
	// MaxFanOut bounds PublishToOwner: an owner with more endpoints than this is refused with
	// ErrFanOutLimit, and the listing reads no more than this many. It is a backstop; bound the
	// endpoints per licensee at registration, where the licensee can be told. 0 means
	// DefaultMaxFanOut; negative is an error.
	MaxFanOut int
	// Hooks are asked for the publishing request's trace context, which is stored with each event
	// (see Hooks.EventTrace), and told of the events appended; nil observes nothing, at no cost.
	Hooks *Hooks
	// MaxEventBytes bounds an event: one whose envelope, as a delivery carries it, would be larger is
	// refused with ErrEventTooLarge before anything is appended, so that no consumer is sent a body
	// it must refuse and no range page has to carry it. 0 means DefaultMaxEventBytes; negative is an
	// error.
	MaxEventBytes int
}

// Publisher turns a business event into a webhook event on an endpoint's stream: it checks that the
// endpoint exists, stamps the ID, creation time and API version, and appends to the Log. The Dispatcher
// then delivers it. A Publisher is safe for concurrent use when its Log and Endpoints are. Build one
// with NewPublisher: the zero value has no Log, and every publish on it returns an error that wraps
// ErrNotBuilt.
type Publisher struct {
	log        driver.Log
	endpoints  driver.Endpoints
	apiVersion string
	now        func() time.Time
	maxFanOut  int
	maxEvent   int
	hooks      *Hooks
}

// NewPublisher returns a Publisher appending to log for the endpoints in endpoints. It fails when log
// or endpoints is nil, or an option is out of range.
func NewPublisher(log driver.Log, endpoints driver.Endpoints, opts *PublisherOptions) (*Publisher, error) {
	var o PublisherOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case log == nil || endpoints == nil:
		return nil, errors.New("producer: NewPublisher needs a Log and Endpoints")
	case o.MaxFanOut < 0:
		return nil, errors.New("producer: negative MaxFanOut")
	case o.MaxEventBytes < 0:
		return nil, errors.New("producer: negative MaxEventBytes")
	}
	p := &Publisher{log: log, endpoints: endpoints, apiVersion: cmp.Or(o.APIVersion, DefaultAPIVersion),
		now: o.Now, maxFanOut: cmp.Or(o.MaxFanOut, DefaultMaxFanOut), maxEvent: cmp.Or(o.MaxEventBytes, DefaultMaxEventBytes),
		hooks: o.Hooks}
	if p.now == nil {
		p.now = time.Now
	}
	return p, nil
}

// WithLog returns a copy of the Publisher that appends to log instead: the transactional outbox, where
// log is a pgstore.EventLog on the caller's pgx.Tx so that the event commits (or rolls back) with the
// business change that caused it. A nil log makes every publish of the copy fail.
func (p *Publisher) WithLog(log driver.Log) *Publisher {
	cp := *p
	cp.log = log
	return &cp
}

// WithEndpoints returns a copy of the Publisher that looks up and lists endpoints in endpoints instead:
// with WithLog, the outbox whose endpoint read shares the transaction of the append, where endpoints
// is a pgstore.EndpointStore on the caller's pgx.Tx. A nil endpoints makes Publish and
// PublishToOwner of the copy fail.
func (p *Publisher) WithEndpoints(endpoints driver.Endpoints) *Publisher {
	cp := *p
	cp.endpoints = endpoints
	return &cp
}

// usable reports a Publisher that cannot publish: the zero value, or a copy given a nil Log or (when
// lookups are needed) nil Endpoints.
func (p *Publisher) usable(needEndpoints bool) error {
	switch {
	case p == nil || p.log == nil || p.now == nil:
		return errZeroPublisher
	case needEndpoints && p.endpoints == nil:
		return errors.New("producer: Publisher has no Endpoints")
	}
	return nil
}

// Publish appends an event of the given type to the endpoint's stream and returns it with its ID and
// sequence — Sequence 0 on a Sequencing log (pgstore.EventLog), which numbers the event after it
// commits. data is marshalled with encoding/json, except json.RawMessage and []byte, which must
// already be JSON and are stored as they are.
func (p *Publisher) Publish(ctx context.Context, endpointID, eventType string, data any) (webhook.Event, error) {
	if err := p.usable(true); err != nil {
		return webhook.Event{}, err
	}
	ep, err := p.endpoints.Lookup(ctx, endpointID)
	if err != nil {
		return webhook.Event{}, fmt.Errorf("producer: publish to %s: %w", endpointID, err)
	}
	if err := receives(ep, eventType); err != nil {
		return webhook.Event{}, err
	}
	return p.publish(ctx, endpointID, eventType, data)
}

// receives reports why ep cannot receive an event of eventType, if it cannot: it is deleted
// (ErrUnknownEndpoint) or not subscribed to the type (ErrNotSubscribed). A disabled endpoint receives
// its events; only their delivery waits.
func receives(ep Endpoint, eventType string) error {
	switch {
	case !ep.DeletedAt.IsZero():
		return fmt.Errorf("producer: publish to %s: %w (deleted)", ep.ID, ErrUnknownEndpoint)
	case !ep.Subscribed(eventType):
		return fmt.Errorf("producer: publish %s to %s: %w", eventType, ep.ID, ErrNotSubscribed)
	}
	return nil
}

// subscribed returns the endpoints of eps that receive events of eventType: not deleted, and
// subscribed to the type. It returns eps itself when all do.
func subscribed(eps []Endpoint, eventType string) []Endpoint {
	for i, ep := range eps {
		if receives(ep, eventType) == nil {
			continue
		}
		out := slices.Clone(eps[:i])
		for _, ep := range eps[i+1:] {
			if receives(ep, eventType) == nil {
				out = append(out, ep)
			}
		}
		return out
	}
	return eps
}

// PublishTo is Publish for a caller that already holds the endpoint — typically one it has just read
// from the registry in the same transaction as the append, as the transactional outbox does — so the
// endpoint is not looked up again: one round trip less per event. Its subscription and deletion are
// read from ep as the caller holds it.
func (p *Publisher) PublishTo(ctx context.Context, ep Endpoint, eventType string, data any) (webhook.Event, error) {
	if err := p.usable(false); err != nil {
		return webhook.Event{}, err
	}
	if ep.ID == "" {
		return webhook.Event{}, fmt.Errorf("producer: publish: %w", ErrUnknownEndpoint)
	}
	if err := receives(ep, eventType); err != nil {
		return webhook.Event{}, err
	}
	return p.publish(ctx, ep.ID, eventType, data)
}

// PublishToEach publishes one business event to each of the endpoints the caller holds — a
// licensee's endpoints, read in the same transaction as the append — marshalling data once. Each
// endpoint subscribed to the type (Endpoint.Subscribed, as ep holds it) and not deleted gets an event
// of its own (its own ID, and its own place in that endpoint's stream); the others get nothing and
// take no place. On a BatchAppender log (pgstore.EventLog, memstore.Log) all the events go in one
// call, all or none; on another, one Append each, in order, stopping at the first failure. The events
// come back in the order of eps, each with Endpoint set to its endpoint's ID. No endpoints, or none
// subscribed, publishes nothing.
func (p *Publisher) PublishToEach(ctx context.Context, eps []Endpoint, eventType string, data any) ([]webhook.Event, error) {
	if err := p.usable(false); err != nil {
		return nil, err
	}
	raw, err := marshalData(data)
	if err != nil {
		return nil, err
	}
	if err := checkPayload(eventType, raw); err != nil {
		return nil, err
	}
	if eps = subscribed(eps, eventType); len(eps) == 0 {
		return nil, nil
	}
	evs, err := p.appendEach(ctx, eps, eventType, raw)
	for i := range evs {
		evs[i].Endpoint = eps[i].ID
	}
	return evs, err
}

// PublishToOwner publishes one business event to every endpoint of owner (a licensee) subscribed to
// its type, listed through the Publisher's Endpoints, which must be an EndpointLister (else
// ErrNoListing): each such endpoint gets an event of its own — the same type, data and creation time, its own ID, and the next place in its own
// stream, so every endpoint keeps its gap-free sequence. The events go in as PublishToEach's do: in
// one call on a BatchAppender log (one statement on pgstore.EventLog), all or none; on another Log,
// one Append each, stopping at the first failure. They come back in ascending order of endpoint ID,
// each with Endpoint set to its endpoint's ID (and Sequence 0 on a Sequencing log, which numbers
// them after the commit).
//
// An owner without endpoints is not an error: nothing is published and the result is an empty slice.
// The event is checked first all the same (an empty type or data that is not JSON is ErrInvalidEvent),
// so a broken publication fails before the first endpoint is registered, not after. An empty owner is
// ErrInvalidEvent too. An owner with more than MaxFanOut endpoints is ErrFanOutLimit, and nothing is
// published.
//
// For the transactional outbox on PostgreSQL, give the Publisher the caller's transaction twice —
// pub.WithLog(pgstore.NewEventLog(tx, nil)).WithEndpoints(endpointsOnTx) — so that the listing and
// the append see one snapshot and commit or roll back with the business change.
func (p *Publisher) PublishToOwner(ctx context.Context, owner, eventType string, data any) ([]webhook.Event, error) {
	if err := p.usable(true); err != nil {
		return nil, err
	}
	if owner == "" {
		return nil, fmt.Errorf("%w: empty owner", ErrInvalidEvent)
	}
	raw, err := marshalData(data)
	if err != nil {
		return nil, err
	}
	// The event's own checks, before anything is read.
	if err := checkPayload(eventType, raw); err != nil {
		return nil, err
	}
	lister, ok := p.endpoints.(driver.EndpointLister)
	if !ok {
		return nil, fmt.Errorf("%w (%T)", ErrNoListing, p.endpoints)
	}
	eps, more, err := lister.ListEndpoints(ctx, driver.EndpointQuery{Owner: owner, Limit: p.maxFanOut})
	if err != nil {
		return nil, fmt.Errorf("producer: publish to the endpoints of %s: %w", owner, err)
	}
	if more {
		return nil, fmt.Errorf("%w: %s has more than %d", ErrFanOutLimit, owner, p.maxFanOut)
	}
	if eps = subscribed(eps, eventType); len(eps) == 0 {
		return []webhook.Event{}, nil
	}
	evs, err := p.appendEach(ctx, eps, eventType, raw)
	for i := range evs {
		evs[i].Endpoint = eps[i].ID
	}
	return evs, err
}

// appendEach appends one event with raw as its data to each endpoint's stream, in one AppendBatch when
// the Log has it.
func (p *Publisher) appendEach(ctx context.Context, eps []Endpoint, eventType string, raw []byte) ([]webhook.Event, error) {
	if err := checkPayload(eventType, raw); err != nil {
		return nil, err
	}
	batch := make([]driver.StreamEvent, len(eps))
	created := p.now().Unix()
	var parent, state string
	o := p.hooks
	if o != nil {
		parent, state = traceOf(ctx, o)
	}
	for i, ep := range eps {
		if ep.ID == "" {
			return nil, fmt.Errorf("producer: publish to endpoint %d: %w", i, ErrUnknownEndpoint)
		}
		batch[i] = driver.StreamEvent{Stream: ep.ID, Event: webhook.Event{ID: randid.New("evt_"), Type: eventType,
			Created: created, APIVersion: p.apiVersion, Data: raw}, TraceParent: parent, TraceState: state}
		if err := p.checkSize(ep.ID, &batch[i].Event); err != nil {
			return nil, err
		}
	}
	if ba, ok := p.log.(driver.BatchAppender); ok {
		out, err := ba.AppendBatch(ctx, batch)
		if err == nil && o != nil {
			o.eventsAppended(ctx, AppendInfo{Type: eventType, Events: len(out)})
		}
		return out, err
	}
	out := make([]webhook.Event, len(batch))
	for i, se := range batch {
		var err error
		if out[i], err = p.log.Append(ctx, se); err != nil {
			if o != nil && i > 0 {
				o.eventsAppended(ctx, AppendInfo{Type: eventType, Events: i})
			}
			return out[:i], err
		}
	}
	if o != nil {
		o.eventsAppended(ctx, AppendInfo{Type: eventType, Events: len(out)})
	}
	return out, nil
}

// traceOf returns the trace context the hooks read from ctx, sanitized, for the Log to store
// with the events.
func traceOf(ctx context.Context, o *Hooks) (parent, state string) {
	if o.EventTrace == nil {
		return "", ""
	}
	tc := o.EventTrace(ctx).Sanitized()
	return tc.TraceParent, tc.TraceState
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
	if err := checkEvent(endpointID, ev); err != nil {
		return webhook.Event{}, err
	}
	if err := p.checkSize(endpointID, &ev); err != nil {
		return webhook.Event{}, err
	}
	se := driver.StreamEvent{Stream: endpointID, Event: ev}
	o := p.hooks
	if o == nil {
		return p.log.Append(ctx, se)
	}
	se.TraceParent, se.TraceState = traceOf(ctx, o)
	out, err := p.log.Append(ctx, se)
	if err == nil {
		o.eventsAppended(ctx, AppendInfo{Type: eventType, Events: 1})
	}
	return out, err
}

// sequenceRoom is what the envelope's sequence member takes at most: `,"sequence":` and 20 digits.
const sequenceRoom = len(`,"sequence":`) + 20

// checkSize refuses an event whose envelope for the endpoint — as appendEvent writes it for a
// delivery, with the largest sequence — would exceed the Publisher's maximum. Only the envelope's
// small members are encoded (on the stack); the data counts at its length.
func (p *Publisher) checkSize(endpointID string, ev *webhook.Event) error {
	head := *ev
	head.Data, head.Endpoint, head.Sequence = nil, endpointID, 0
	var buf [512]byte
	n := len(appendEvent(buf[:0], &head)) - len("null") + len(ev.Data) + sequenceRoom
	if n > p.maxEvent {
		return fmt.Errorf("%w: its envelope would be %d bytes, more than the %d allowed (PublisherOptions.MaxEventBytes)",
			ErrEventTooLarge, n, p.maxEvent)
	}
	return nil
}
