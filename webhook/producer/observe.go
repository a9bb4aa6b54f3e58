package producer

import (
	"context"
	"errors"
	"time"

	"github.com/svcplatform/conventions/webhook/producer/driver"

	"github.com/svcplatform/conventions/webhook"
)

// Hooks are told what the producer does, for metrics and traces (package otelconv fills them with
// OpenTelemetry). Set them in PublisherOptions.Hooks, DispatcherOptions.Hooks and
// RangeHandlerOptions.Hooks. Every field may be nil; the zero value observes nothing, and a nil
// *Hooks observes nothing at no cost. Fields will be added as the producer grows: Hooks written for
// an earlier version keep compiling and keep working, since a new field is nil in them.
//
// The hooks are called synchronously on the publishing and delivering paths, from many goroutines at
// once: they must be safe for concurrent use and must not block. The structs they receive are plain
// values that never hold a secret, a signature, a URL or a payload; they do hold endpoint and event
// IDs, which are of unbounded cardinality, so an implementation records them as metric attributes
// only when its user asks for that. A Hooks value must not be modified once in use.
type Hooks struct {
	// EventTrace returns the trace context of ctx — the request that publishes — in W3C Trace
	// Context form, or the zero TraceContext for none. The Publisher stores it with each event it
	// appends, so that every later delivery attempt can link back to it.
	EventTrace func(ctx context.Context) TraceContext
	// EventsAppended is called after a Publisher appended events: n events of one type, in ctx.
	EventsAppended func(ctx context.Context, a AppendInfo)
	// AttemptStart is called before each delivery attempt, and for each delivery abandoned because
	// its endpoint was deleted; it returns the context the attempt continues in (where an
	// implementation keeps its span), which must be derived from ctx: the request is made in it, and
	// the dispatcher's shutdown cancels it. AttemptEnd follows each AttemptStart exactly once, with
	// the context it returned.
	AttemptStart func(ctx context.Context, a AttemptInfo) context.Context
	// InjectTrace writes the attempt's trace context (traceparent, tracestate) into the delivery
	// request's header, ctx being AttemptStart's context. The carrier never shows the signature.
	InjectTrace func(ctx context.Context, carrier webhook.TraceCarrier)
	// AttemptEnd is called as soon as the attempt's request has ended, with the outcome the Log will
	// record. (One exception, on shutdown only: with PerEndpoint above 1, a request that completed
	// beside one cut short is handed back unrecorded, and will be sent again.)
	AttemptEnd func(ctx context.Context, r AttemptResult)
	// RangeStart is called when a RangeHandler starts serving a request, with its headers, from
	// which an implementation continues the consumer's trace (traceparent); it returns the
	// context the request is served in, which must be derived from ctx. RangeEnd follows, exactly
	// once, with that context.
	RangeStart func(ctx context.Context, r RangeInfo) context.Context
	// RangeEnd is called when the RangeHandler has answered.
	RangeEnd func(ctx context.Context, r RangeResult)
	// EndpointDisabled is called when a Dispatcher has disabled an endpoint because its deliveries
	// kept failing or it answered 410 Gone (DispatcherOptions.DisableAfter) — once, by the
	// Dispatcher whose change took, also among replicas.
	EndpointDisabled func(ctx context.Context, e EndpointDisabledInfo)
}

// The hooks' calls, each a no-op when its field is nil; the caller has checked that h is not nil.

func (h *Hooks) eventsAppended(ctx context.Context, a AppendInfo) {
	if h.EventsAppended != nil {
		h.EventsAppended(ctx, a)
	}
}

func (h *Hooks) attemptStart(ctx context.Context, a AttemptInfo) context.Context {
	if h.AttemptStart == nil {
		return ctx
	}
	return h.AttemptStart(ctx, a)
}

func (h *Hooks) injectTrace(ctx context.Context, carrier webhook.TraceCarrier) {
	if h.InjectTrace != nil {
		h.InjectTrace(ctx, carrier)
	}
}

func (h *Hooks) attemptEnd(ctx context.Context, r AttemptResult) {
	if h.AttemptEnd != nil {
		h.AttemptEnd(ctx, r)
	}
}

func (h *Hooks) rangeStart(ctx context.Context, r RangeInfo) context.Context {
	if h.RangeStart == nil {
		return ctx
	}
	return h.RangeStart(ctx, r)
}

func (h *Hooks) rangeEnd(ctx context.Context, r RangeResult) {
	if h.RangeEnd != nil {
		h.RangeEnd(ctx, r)
	}
}

// RangeInfo describes a range request a RangeHandler is about to serve. It is a plain value; the
// zero value describes no request.
type RangeInfo struct {
	// Endpoint is the endpoint ID the request names, not yet checked: it comes from the client.
	Endpoint string
	// Trace shows the request's headers to read trace context from; it never shows the
	// Authorization header that carries the API key.
	Trace webhook.TraceCarrier
}

// RangeResult is how a RangeHandler answered. It is a plain value; the zero value is no answer.
type RangeResult struct {
	// Status is the response's status code.
	Status int
	// Events is how many events the response holds (0 unless Status is 200).
	Events int
}

// TraceContext is the trace context of the request that published an event, in W3C Trace Context
// form (https://www.w3.org/TR/trace-context/): the traceparent and tracestate header values. Logs keep
// it with the event (memstore.Log, memstore.DeferredLog, pgstore.EventLog) and hand it back in
// Delivery.Trace. It is a plain value; the zero value is "no trace context".
type TraceContext struct {
	TraceParent string
	TraceState  string
}

// Bounds of a stored TraceContext, in bytes. A version-00 traceparent is 55 bytes; W3C asks that at
// least 512 bytes of tracestate be propagated.
const (
	maxTraceParent = 128
	maxTraceState  = 512
)

// IsZero reports whether tc holds no trace context.
func (tc TraceContext) IsZero() bool { return tc.TraceParent == "" }

// Sanitized returns tc fit to store: a traceparent that is empty, too long or not visible ASCII
// drops the whole context; a tracestate that is too long or not printable ASCII is dropped alone.
// Logs store nothing else, whatever Hooks.EventTrace returned.
func (tc TraceContext) Sanitized() TraceContext {
	if len(tc.TraceParent) > maxTraceParent || !printableASCII(tc.TraceParent, '!') {
		return TraceContext{}
	}
	if len(tc.TraceState) > maxTraceState || !printableASCII(tc.TraceState, ' ') {
		tc.TraceState = ""
	}
	if tc.TraceParent == "" {
		return TraceContext{}
	}
	return tc
}

// printableASCII reports whether every byte of s is in [lowest, '~'].
func printableASCII(s string, lowest byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < lowest || s[i] > '~' {
			return false
		}
	}
	return true
}

// AppendInfo describes events a Publisher appended. It is a plain value; the zero value is no event.
type AppendInfo struct {
	// Type is the events' type ("order.created").
	Type string
	// Events is how many were appended: 1 for Publish, one per endpoint for a fan-out.
	Events int
}

// AttemptInfo describes a delivery attempt about to be made. It is a plain value; the zero value
// describes no attempt.
type AttemptInfo struct {
	// Endpoint is the webhook endpoint's ID (unbounded cardinality).
	Endpoint string
	// EventID, EventType and Sequence name the event.
	EventID   string
	EventType string
	Sequence  uint64
	// Attempt counts the event's attempts: 1 for the first.
	Attempt int
	// Trace is the trace context of the request that published the event; zero when the Log keeps
	// none or the publisher had none.
	Trace TraceContext
}

// AttemptResult is what became of a delivery attempt. It is a plain value; the zero value is an
// attempt that was not sent and has no outcome.
type AttemptResult struct {
	// Endpoint and EventType repeat AttemptInfo's, for metrics.
	Endpoint  string
	EventType string
	// Outcome is OutcomeDelivered, OutcomeFailed (another attempt is scheduled) or OutcomeAbandoned
	// (no other will be made), as the delivery history records it; 0 when Released.
	Outcome driver.Outcome
	// Released: the request was cut short by the dispatcher's own shutdown; the delivery is handed
	// back without counting an attempt.
	Released bool
	// Sent: a request was handed to the HTTP client. False when the event could not be rendered or
	// signed, the URL was invalid, or the endpoint was deleted.
	Sent bool
	// StatusCode is the response's status; 0 when there was no response.
	StatusCode int
	// Class is the failure's class (ClassStatus, ClassTimeout, …); empty for a success.
	Class string
	// Duration is how long the request took, until the response head (or the failure), by the
	// Dispatcher's clock.
	Duration time.Duration
}

// EndpointDisabledInfo describes an endpoint a Dispatcher disabled. It is a plain value; the zero
// value describes no endpoint.
type EndpointDisabledInfo struct {
	// Endpoint is the webhook endpoint's ID (unbounded cardinality).
	Endpoint string
	// Reason is DisabledFailing or DisabledGone.
	Reason string
	// StatusCode and Class describe the failed attempt that decided it (StatusCode 0: no answer).
	StatusCode int
	Class      string
}

// EndpointBacklog is one endpoint's undelivered events as Dispatcher.Backlog reports them. It is a
// plain value; the zero value is an empty backlog of no endpoint.
type EndpointBacklog struct {
	Endpoint string
	// Events counts the undelivered events.
	Events int
	// OldestAge is how long ago, by the Dispatcher's clock, the oldest one was created (never
	// negative).
	OldestAge time.Duration
}

// ErrNoBacklog: the Dispatcher's Log is not a Backlogger.
var ErrNoBacklog = errors.New("producer: the log cannot report its backlog")

// Backlog reports, for every endpoint with undelivered events, how many there are and how old the
// oldest is, by the Dispatcher's clock; ErrNoBacklog when the Log is not a Backlogger. Each call
// asks the Log (one aggregate query on pgstore.EventLog), so call it at a metrics collector's pace,
// not per delivery: otelconv's backlog gauges do.
func (d *Dispatcher) Backlog(ctx context.Context) ([]EndpointBacklog, error) {
	if d == nil || d.log == nil {
		return nil, errZeroDispatcher
	}
	b, ok := d.log.(driver.Backlogger)
	if !ok {
		return nil, ErrNoBacklog
	}
	streams, err := b.Backlog(ctx)
	if err != nil {
		return nil, err
	}
	now := d.now()
	out := make([]EndpointBacklog, len(streams))
	for i, s := range streams {
		out[i] = EndpointBacklog{Endpoint: s.Stream, Events: s.Events, OldestAge: max(now.Sub(s.Oldest), 0)}
	}
	return out, nil
}
