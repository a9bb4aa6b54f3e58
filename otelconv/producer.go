package otelconv

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// Names of the webhook producer's instruments, span and attributes (see METRICS-producer.md).
const (
	metricDeliveryAttempts = "svc.webhook.delivery.attempts"
	metricDeliveryDuration = "svc.webhook.delivery.duration"
	metricEventsAppended   = "svc.webhook.events.appended"
	metricBacklogAge       = "svc.webhook.backlog.age"
	metricBacklogEvents    = "svc.webhook.backlog.events"
	metricDisabled         = "svc.webhook.endpoints.disabled"

	spanDeliver    = "webhook.deliver"
	spanRangeServe = "webhook.range_serve"

	attrDeliveryResult  = attribute.Key("svc.webhook.delivery.result")
	attrStatusClass     = attribute.Key("svc.webhook.delivery.status_class")
	attrDeliveryAttempt = attribute.Key("svc.webhook.delivery.attempt")
	attrEventType       = attribute.Key("svc.webhook.event.type")
	attrEventSequence   = attribute.Key("svc.webhook.event.sequence")
	attrEventID         = attribute.Key("svc.webhook.event.id")
	attrHTTPMethod      = attribute.Key("http.request.method")
	attrDisabledReason  = attribute.Key("svc.webhook.endpoint.disabled_reason")
)

// Values of svc.webhook.endpoint.disabled_reason: the Dispatcher's reasons, and _OTHER.
var disabledReasons = [...]string{producer.DisabledFailing, producer.DisabledGone, "_OTHER"}

// Values of svc.webhook.delivery.result: the delivery history's outcomes, and released for a request
// cut short by the dispatcher's shutdown.
var deliveryResults = [...]string{resultDelivered: "delivered", resultFailed: "failed", resultAbandoned: "abandoned",
	resultReleased: "released"}

const (
	resultDelivered = iota
	resultFailed
	resultAbandoned
	resultReleased
	nResults
)

// Values of svc.webhook.delivery.status_class.
var statusClasses = [...]string{"none", "1xx", "2xx", "3xx", "4xx", "5xx", "other"}

const nStatusClasses = len(statusClasses)

// statusClass indexes statusClasses: none for no response, other outside 100–599.
func statusClass(code int) int {
	switch {
	case code == 0:
		return 0
	case code >= 100 && code <= 599:
		return code / 100
	}
	return nStatusClasses - 1
}

// Values of error.type: the producer's failure classes, "" (no error.type) for a success and
// _OTHER for a class this version does not know.
var errorClasses = [...]string{"", producer.ClassStatus, producer.ClassTimeout, producer.ClassConnection,
	producer.ClassBlockedAddress, producer.ClassInvalidURL, producer.ClassRender, producer.ClassNoSecret,
	producer.ClassEndpointDeleted, producer.ClassEndpointDisabled, "_OTHER"}

const nErrorClasses = len(errorClasses)

func errorClass(class string) int {
	for i, c := range errorClasses[:nErrorClasses-1] {
		if c == class {
			return i
		}
	}
	return nErrorClasses - 1
}

// maxEventTypes bounds the event types svc.webhook.events.appended learns per licensee class when
// Options.EventTypes declares no catalogue; any beyond the bound are counted as _OTHER.
const maxEventTypes = 256

// eventTypes holds the attribute options of svc.webhook.events.appended per licensee class (the
// environment index: none, sandbox, live). With a catalogue, catalogued types are named and every
// other type is its class's _OTHER; without one, each class learns its own types within
// maxEventTypes, so that one class (a sandbox key triggering any type it likes) never pushes
// another's types into _OTHER.
type eventTypes struct {
	catalogue map[string]*[numEnvironments]metric.AddOption // nil: no catalogue
	other     [numEnvironments]metric.AddOption
	learned   [numEnvironments]*boundedSets[string, metric.AddOption]
}

func eventTypeOption(typ string, env int) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(append(environmentAttrs(env), attrEventType.String(typ))...))
}

func newEventTypes(catalogue []string) *eventTypes {
	e := &eventTypes{}
	for env := range numEnvironments {
		e.other[env] = eventTypeOption(otherValue, env)
	}
	if catalogue != nil {
		e.catalogue = make(map[string]*[numEnvironments]metric.AddOption, len(catalogue))
		for _, typ := range catalogue {
			var opts [numEnvironments]metric.AddOption
			for env := range numEnvironments {
				opts[env] = eventTypeOption(typ, env)
			}
			e.catalogue[typ] = &opts
		}
		return e
	}
	for env := range numEnvironments {
		e.learned[env] = newBoundedSets(maxEventTypes, otherValue, func(typ string) metric.AddOption {
			return eventTypeOption(typ, env)
		})
	}
	return e
}

// option returns the attribute option of typ appended under ctx: the class is the environment of the
// principal in ctx (apikey.FromContext; none without one).
func (e *eventTypes) option(ctx context.Context, typ string) metric.AddOption {
	env := 0
	if p, ok := apikey.FromContext(ctx); ok {
		env = environmentIndex(p.Environment)
	}
	if e.catalogue != nil {
		if opts, ok := e.catalogue[typ]; ok {
			return opts[env]
		}
		return e.other[env]
	}
	opt, _ := e.learned[env].get(typ) // past maxEventTypes, the class's _OTHER
	return opt
}

// producerObserver fills producer.Hooks. Its instruments and the attribute sets of every
// bounded combination are made once, by buildProducer; it is safe for concurrent use.
type producerObserver struct {
	tracer       trace.Tracer
	propagator   propagation.TextMapPropagator
	endpointAttr bool

	attempts      metric.Int64Counter
	duration      metric.Float64Histogram
	appended      metric.Int64Counter
	backlogAge    metric.Float64ObservableGauge
	backlogEvents metric.Int64ObservableGauge
	disabled      metric.Int64Counter
	disabledOpts  [len(disabledReasons)]metric.MeasurementOption
	meter         metric.Meter
	startOpts     []trace.SpanStartOption // of every webhook.deliver span
	rangeOpts     []trace.SpanStartOption // of every webhook.range_serve span

	// attemptSets[result][status class][error class] is the attribute set of an attempt.
	attemptSets [nResults][nStatusClasses][nErrorClasses]attribute.Set
	attemptOpts [nResults][nStatusClasses][nErrorClasses]metric.MeasurementOption

	types *eventTypes
}

func (t *Telemetry) buildProducer() error {
	p := &producerObserver{tracer: t.tracer, propagator: t.propagator, endpointAttr: t.opts.EndpointAttribute,
		meter: t.meter}
	var err error
	if p.attempts, err = t.meter.Int64Counter(metricDeliveryAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("Webhook delivery attempts, by result (delivered, failed with a retry scheduled, abandoned, released on shutdown) and status class.")); err != nil {
		return err
	}
	if p.duration, err = t.meter.Float64Histogram(metricDeliveryDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of webhook delivery requests, until the response head or the failure."),
		metric.WithExplicitBucketBoundaries(slowBuckets...)); err != nil {
		return err
	}
	if p.appended, err = t.meter.Int64Counter(metricEventsAppended, metric.WithUnit("{event}"),
		metric.WithDescription("Webhook events appended to the event log by a Publisher, by event type.")); err != nil {
		return err
	}
	if p.backlogAge, err = t.meter.Float64ObservableGauge(metricBacklogAge, metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest undelivered webhook event (the maximum over endpoints unless endpoint attributes are on).")); err != nil {
		return err
	}
	if p.backlogEvents, err = t.meter.Int64ObservableGauge(metricBacklogEvents, metric.WithUnit("{event}"),
		metric.WithDescription("Undelivered webhook events (the total over endpoints unless endpoint attributes are on).")); err != nil {
		return err
	}
	if p.disabled, err = t.meter.Int64Counter(metricDisabled, metric.WithUnit("{endpoint}"),
		metric.WithDescription("Webhook endpoints a Dispatcher disabled, by reason (failing, gone).")); err != nil {
		return err
	}
	for i, r := range disabledReasons {
		p.disabledOpts[i] = metric.WithAttributeSet(attribute.NewSet(attrDisabledReason.String(r)))
	}
	for r := range nResults {
		for s := range nStatusClasses {
			for c := range nErrorClasses {
				kv := []attribute.KeyValue{attrDeliveryResult.String(deliveryResults[r]), attrStatusClass.String(statusClasses[s])}
				if errorClasses[c] != "" {
					kv = append(kv, attrErrorType.String(errorClasses[c]))
				}
				p.attemptSets[r][s][c] = attribute.NewSet(kv...)
				p.attemptOpts[r][s][c] = metric.WithAttributeSet(p.attemptSets[r][s][c])
			}
		}
	}
	p.types = newEventTypes(t.opts.EventTypes)
	p.startOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
	p.rangeOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	t.producer = p
	t.producerHooks = &producer.Hooks{EventTrace: p.EventTrace, EventsAppended: p.EventsAppended,
		AttemptStart: p.AttemptStart, InjectTrace: p.InjectTrace, AttemptEnd: p.AttemptEnd,
		RangeStart: p.RangeStart, RangeEnd: p.RangeEnd, EndpointDisabled: p.EndpointDisabled}
	return nil
}

// Producer returns the hooks of package webhook/producer, for the Hooks of PublisherOptions,
// DispatcherOptions and RangeHandlerOptions. They record svc.webhook.delivery.*, svc.webhook.events.appended and a
// webhook.deliver span per attempt, linked to the span that published the event.
//
// On a nil or zero Telemetry it returns nil: no hooks.
func (t *Telemetry) Producer() *producer.Hooks {
	if t == nil {
		return nil
	}
	return t.producerHooks
}

// EndpointDisabled is producer.Hooks.EndpointDisabled: it counts the endpoint by reason.
func (p *producerObserver) EndpointDisabled(ctx context.Context, e producer.EndpointDisabledInfo) {
	i := len(disabledReasons) - 1
	for k, r := range disabledReasons[:i] {
		if r == e.Reason {
			i = k
		}
	}
	opt := p.disabledOpts[i]
	if p.endpointAttr {
		opt = metric.WithAttributes(attrDisabledReason.String(disabledReasons[i]), attrEndpointID.String(e.Endpoint))
	}
	p.disabled.Add(ctx, 1, opt)
}

// traceCarrier holds one trace context as W3C text while it is injected or extracted.
type traceCarrier struct{ parent, state string }

func (c *traceCarrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.parent
	case "tracestate":
		return c.state
	}
	return ""
}

func (c *traceCarrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.parent = value
	case "tracestate":
		c.state = value
	}
}

func (c *traceCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// EventTrace is producer.Hooks.EventTrace: the span context of ctx in W3C form, whatever the
// propagator of the deliveries, since it is stored, not sent.
func (p *producerObserver) EventTrace(ctx context.Context) producer.TraceContext {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return producer.TraceContext{}
	}
	var c traceCarrier
	propagation.TraceContext{}.Inject(ctx, &c)
	return producer.TraceContext{TraceParent: c.parent, TraceState: c.state}
}

// EventsAppended is producer.Hooks.EventsAppended.
func (p *producerObserver) EventsAppended(ctx context.Context, a producer.AppendInfo) {
	if a.Events <= 0 {
		return
	}
	p.appended.Add(ctx, int64(a.Events), p.types.option(ctx, a.Type))
}

// AttemptStart is producer.Hooks.AttemptStart: a client span, webhook.deliver, linked to the span that
// published the event. Its parent is whatever span ctx carries; the Dispatcher's Run normally runs in
// a context without one, so each attempt starts a trace of its own.
func (p *producerObserver) AttemptStart(ctx context.Context, a producer.AttemptInfo) context.Context {
	opts := p.startOpts
	if !a.Trace.IsZero() {
		// The link goes in at the start, where a sampler can see it.
		c := traceCarrier{parent: a.Trace.TraceParent, state: a.Trace.TraceState}
		if sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), &c)); sc.IsValid() {
			opts = append(opts[:len(opts):len(opts)], trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	ctx, span := p.tracer.Start(ctx, spanDeliver, opts...)
	if span.IsRecording() {
		// Attributes only for a span that keeps them: with tracing off, an attempt costs no allocation
		// for them.
		span.SetAttributes(
			attrHTTPMethod.String(http.MethodPost),
			attrEventType.String(a.EventType),
			attrEventSequence.Int64(int64(min(a.Sequence, 1<<63-1))),
			attrDeliveryAttempt.Int(a.Attempt),
		)
		if p.endpointAttr {
			span.SetAttributes(attrEndpointID.String(a.Endpoint), attrEventID.String(a.EventID))
		}
	}
	return ctx
}

// InjectTrace is producer.Hooks.InjectTrace with the Telemetry's propagator.
func (p *producerObserver) InjectTrace(ctx context.Context, carrier webhook.TraceCarrier) {
	p.propagator.Inject(ctx, carrier)
}

// AttemptEnd is producer.Hooks.AttemptEnd: it counts the attempt, records its duration when a
// request went out, and ends the span.
func (p *producerObserver) AttemptEnd(ctx context.Context, r producer.AttemptResult) {
	res := resultReleased
	switch {
	case r.Released:
	case r.Outcome == driver.OutcomeDelivered:
		res = resultDelivered
	case r.Outcome == driver.OutcomeFailed:
		res = resultFailed
	default:
		res = resultAbandoned
	}
	sc, ec := statusClass(r.StatusCode), errorClass(r.Class)
	var opt metric.MeasurementOption
	if p.endpointAttr {
		kv := append(p.attemptSets[res][sc][ec].ToSlice(), attrEndpointID.String(r.Endpoint))
		opt = metric.WithAttributeSet(attribute.NewSet(kv...))
	} else {
		opt = p.attemptOpts[res][sc][ec]
	}
	p.attempts.Add(ctx, 1, opt)
	if r.Sent {
		p.duration.Record(ctx, r.Duration.Seconds(), opt)
	}

	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(attrDeliveryResult.String(deliveryResults[res]))
	if r.StatusCode != 0 {
		span.SetAttributes(attrHTTPStatus.Int(r.StatusCode))
	}
	if r.Class != "" {
		span.SetAttributes(attrErrorType.String(errorClasses[ec]))
	}
	if res != resultDelivered {
		span.SetStatus(codes.Error, deliveryResults[res])
	}
	span.End()
}

// RangeStart is producer.Hooks.RangeStart: a server span, webhook.range_serve, that continues the
// trace the request's header carries (the consumer's range fetch) — unless ctx already carries a span,
// such as the team's HTTP middleware's, which then is its parent.
func (p *producerObserver) RangeStart(ctx context.Context, r producer.RangeInfo) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = p.propagator.Extract(ctx, r.Trace)
	}
	ctx, span := p.tracer.Start(ctx, spanRangeServe, p.rangeOpts...)
	if span.IsRecording() {
		span.SetAttributes(attrHTTPMethod.String(http.MethodGet))
		if p.endpointAttr {
			span.SetAttributes(attrEndpointID.String(r.Endpoint))
		}
	}
	return ctx
}

// RangeEnd is producer.Hooks.RangeEnd: it ends the span with the status and the number of events.
func (p *producerObserver) RangeEnd(ctx context.Context, r producer.RangeResult) {
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.SetAttributes(attrHTTPStatus.Int(r.Status), attrRangeEvents.Int(r.Events))
		if r.Status >= 500 {
			// A 4xx is the client's mistake; the server span is in error only for its own (semconv).
			span.SetStatus(codes.Error, "")
		}
	}
	span.End()
}

// BacklogSource reports each webhook endpoint's undelivered events: *producer.Dispatcher is one.
// Backlog is called at each collection, possibly by several readers at once, so it must be safe for
// concurrent use.
type BacklogSource interface {
	Backlog(ctx context.Context) ([]producer.EndpointBacklog, error)
}

// ObserveBacklog reports src's backlog on the gauges svc.webhook.backlog.age (seconds) and
// svc.webhook.backlog.events, read at each collection: the oldest age and the total over endpoints,
// or one point per endpoint with svc.webhook.endpoint.id when Options.EndpointAttribute is set. A
// collection asks src once (one query on pgstore.EventLog); a failure is returned to the SDK, which
// reports it, and leaves the gauges without points. Call it once per event log (replicas sharing a
// database would otherwise report the same backlog again), and Unregister the registration when
// src goes away.
func (t *Telemetry) ObserveBacklog(src BacklogSource) (metric.Registration, error) {
	if t == nil || t.producer == nil {
		return nil, errNotBuilt
	}
	if src == nil {
		return nil, errors.New("otelconv: ObserveBacklog: nil source")
	}
	p := t.producer
	return p.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		bs, err := src.Backlog(ctx)
		if err != nil {
			return err
		}
		if !p.endpointAttr {
			var (
				oldest time.Duration
				total  int64
			)
			for _, b := range bs {
				oldest, total = max(oldest, b.OldestAge), total+int64(b.Events)
			}
			o.ObserveFloat64(p.backlogAge, oldest.Seconds())
			o.ObserveInt64(p.backlogEvents, total)
			return nil
		}
		for _, b := range bs {
			opt := metric.WithAttributeSet(attribute.NewSet(attrEndpointID.String(b.Endpoint)))
			o.ObserveFloat64(p.backlogAge, b.OldestAge.Seconds(), opt)
			o.ObserveInt64(p.backlogEvents, int64(b.Events), opt)
		}
		return nil
	}, p.backlogAge, p.backlogEvents)
}
