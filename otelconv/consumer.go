package otelconv

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcplatform/conventions/webhook"
)

// Attribute keys of the webhook consumer side.
const (
	attrVerificationResult = attribute.Key("svc.webhook.verification.result")
	attrVerificationSource = attribute.Key("svc.webhook.verification.source")
	attrSequenceOutcome    = attribute.Key("svc.webhook.sequence.outcome")
	attrSequence           = attribute.Key("svc.webhook.event.sequence")
	attrGapSize            = attribute.Key("svc.webhook.gap.size")
	attrReceiveOutcome     = attribute.Key("svc.webhook.outcome")
	attrRecovered          = attribute.Key("svc.webhook.recovered")
	attrRangeFrom          = attribute.Key("svc.webhook.range.from")
	attrRangeTo            = attribute.Key("svc.webhook.range.to")
	attrRangeEvents        = attribute.Key("svc.webhook.range.events")
	attrRangePages         = attribute.Key("svc.webhook.range.pages")
	attrEndpointID         = attribute.Key("svc.webhook.endpoint.id")
	attrErrorType          = attribute.Key("error.type")
	attrHTTPStatus         = attribute.Key("http.response.status_code")
)

// Span names of the webhook consumer side.
const (
	spanReceive    = "webhook.receive"
	spanRangeFetch = "webhook.range_fetch"
)

// gapBuckets are the boundaries of svc.webhook.gap.size, in events: one lost delivery is the usual
// gap, a consumer that was down for hours has thousands.
var gapBuckets = []float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}

// verifySources are the values of svc.webhook.verification.source, indexed by sourceOf.
var verifySources = [2]string{"delivery", "range_response"}

// sourceOf is the index in verifySources of a verification: 1 for a range response, 0 for a delivery.
func sourceOf(info webhook.VerifyInfo) int {
	if info.RangeResponse {
		return 1
	}
	return 0
}

// The sizes of the tables indexed by webhook's enums: one more than the largest value this version
// knows. TestWebhookEnumTables fails when webhook grows a value; until the table grows with it, a
// value past it is counted as unknown (the zero value's set), never out of range.
const (
	numVerifyResults = int(webhook.VerifyTooNew) + 1
	numFetchResults  = int(webhook.RangeFetchCanceled) + 1
	numOutcomes      = int(webhook.Gap) + 1
)

// maxDynamicSets bounds the attribute sets built after New (those naming an HTTP status, a problem
// code or, when opted in, an endpoint). Past it, a measurement is counted without its endpoint and
// with the code _OTHER (collapsed), so that the series stay bounded.
const maxDynamicSets = 1024

// measure holds one attribute set as the options of both kinds of instrument, built once.
type measure struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newMeasure(kvs ...attribute.KeyValue) measure {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return measure{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

// dynKey names an attribute set that is not known when New runs.
type dynKey struct {
	kind   uint8 // one of the dyn… constants
	n      int   // the enum, or the HTTP status
	code   string
	stream string // "" unless Options.EndpointAttribute
}

const (
	dynDecision = iota
	dynGap
	dynFetch
	dynEvents
	dynReceive
)

// consumerObserver fills the webhook.Hooks of the consumer side: a Verifier's, a Receiver's, a
// Tracker's and a RangeClient's. It is safe for concurrent use.
type consumerObserver struct {
	tracer      trace.Tracer
	prop        propagation.TextMapPropagator
	endpointIDs bool

	verifications   metric.Int64Counter
	decisions       metric.Int64Counter
	gapSize         metric.Int64Histogram
	fetches         metric.Int64Counter
	fetchDuration   metric.Float64Histogram
	fetchEvents     metric.Int64Counter
	receiveDuration metric.Float64Histogram

	// Attribute sets known in advance, indexed by the core's enums.
	verify    [numVerifyResults][len(verifySources)]measure
	decision  [numOutcomes]measure
	fetch     [numFetchResults]measure
	empty     measure
	receiveOK measure

	// Span attributes known in advance.
	verifySpan   [numVerifyResults][]attribute.KeyValue
	decisionSpan [numOutcomes][]attribute.KeyValue
	serverKind   []trace.SpanStartOption
	internalKind []trace.SpanStartOption

	dynamic   *boundedSets[dynKey, measure]
	collapsed *boundedSets[dynKey, measure] // past maxDynamicSets: no endpoint, code _OTHER
}

// Webhook returns the hooks of the webhook consumer side. Pass them to the Verifier, the Receiver,
// the Tracker and the RangeClient (the Hooks of VerifierOptions, ReceiverOptions, TrackerOptions
// and RangeClientOptions).
//
// On a nil or zero Telemetry it returns nil: no hooks.
func (t *Telemetry) Webhook() *webhook.Hooks {
	if t == nil {
		return nil
	}
	return t.consumerHooks
}

func (t *Telemetry) buildConsumer() error {
	m := t.meter
	o := &consumerObserver{tracer: t.tracer, prop: t.propagator, endpointIDs: t.opts.EndpointAttribute,
		dynamic: newBoundedSets(maxDynamicSets, dynKey{}, dynKey.measure),
		// Every collapsed key fits: five kinds, a status below 600 or none, a code or none.
		collapsed: newBoundedSets(5*600*2, dynKey{}, dynKey.measure)}
	var err error
	if o.verifications, err = m.Int64Counter("svc.webhook.verifications", metric.WithUnit("{verification}"),
		metric.WithDescription("Signatures of deliveries and range responses checked, by result.")); err != nil {
		return err
	}
	if o.decisions, err = m.Int64Counter("svc.webhook.sequence.decisions", metric.WithUnit("{decision}"),
		metric.WithDescription("Verdicts of the sequence rule on delivered events: processed, duplicate or gap.")); err != nil {
		return err
	}
	if o.gapSize, err = m.Int64Histogram("svc.webhook.gap.size", metric.WithUnit("{event}"),
		metric.WithDescription("Events missing before a delivered event that was ahead of the cursor."),
		metric.WithExplicitBucketBoundaries(gapBuckets...)); err != nil {
		return err
	}
	if o.fetches, err = m.Int64Counter("svc.webhook.range.fetches", metric.WithUnit("{fetch}"),
		metric.WithDescription("Range fetches of missed events (FetchRange calls), by error type.")); err != nil {
		return err
	}
	if o.fetchDuration, err = m.Float64Histogram("svc.webhook.range.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of range fetches, every page included."),
		metric.WithExplicitBucketBoundaries(slowBuckets...)); err != nil {
		return err
	}
	if o.fetchEvents, err = m.Int64Counter("svc.webhook.range.events", metric.WithUnit("{event}"),
		metric.WithDescription("Events received by successful range fetches.")); err != nil {
		return err
	}
	if o.receiveDuration, err = m.Float64Histogram("svc.webhook.receive.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of deliveries handled by a Receiver, by the status answered."),
		metric.WithExplicitBucketBoundaries(slowBuckets...)); err != nil {
		return err
	}

	for r := range webhook.VerifyResult(numVerifyResults) {
		for s, src := range verifySources {
			o.verify[r][s] = newMeasure(attrVerificationResult.String(r.String()), attrVerificationSource.String(src))
		}
		o.verifySpan[r] = []attribute.KeyValue{attrVerificationResult.String(r.String())}
	}
	for d := range webhook.Outcome(numOutcomes) {
		o.decision[d] = newMeasure(attrSequenceOutcome.String(d.String()))
		o.decisionSpan[d] = []attribute.KeyValue{attrSequenceOutcome.String(d.String())}
	}
	for r := range webhook.RangeFetchResult(numFetchResults) {
		o.fetch[r] = newMeasure(fetchAttrs(r)...)
	}
	o.empty = newMeasure()
	o.receiveOK = newMeasure(attrHTTPStatus.Int(200))
	o.serverKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	o.internalKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	t.consumer = o
	t.consumerHooks = &webhook.Hooks{Verified: o.Verified, ReceiveStart: o.ReceiveStart, ReceiveEnd: o.ReceiveEnd,
		Sequenced: o.Sequenced, RangeFetchStart: o.RangeFetchStart, InjectTrace: o.InjectTrace, RangeFetchEnd: o.RangeFetchEnd}
	return nil
}

// fetchAttrs are the metric attributes of a range fetch's result: error.type unless it succeeded.
func fetchAttrs(r webhook.RangeFetchResult) []attribute.KeyValue {
	if r == webhook.RangeFetchOK {
		return nil
	}
	return []attribute.KeyValue{attrErrorType.String(r.String())}
}

// measure builds the attribute set a dynKey names.
func (k dynKey) measure() measure {
	var kvs []attribute.KeyValue
	switch k.kind {
	case dynDecision:
		kvs = append(kvs, attrSequenceOutcome.String(webhook.Outcome(k.n).String()))
	case dynFetch:
		kvs = fetchAttrs(webhook.RangeFetchResult(k.n))
	case dynReceive:
		kvs = append(kvs, attrHTTPStatus.Int(k.n))
		if k.code != "" {
			kvs = append(kvs, attrErrorType.String(k.code))
		}
	}
	if k.stream != "" {
		kvs = append(kvs, attrEndpointID.String(k.stream))
	}
	return newMeasure(kvs...)
}

// dyn returns the attribute set of k, built on first use; past maxDynamicSets, that of k without its
// endpoint and with the code _OTHER.
func (o *consumerObserver) dyn(k dynKey) measure {
	if m, ok := o.dynamic.get(k); ok {
		return m
	}
	k.stream = ""
	if k.code != "" {
		k.code = "_OTHER"
	}
	m, _ := o.collapsed.get(k)
	return m
}

// Verified counts a verification and notes its result on the span in ctx.
func (o *consumerObserver) Verified(ctx context.Context, info webhook.VerifyInfo) {
	r := info.Result
	if int(r) >= numVerifyResults {
		r = webhook.VerifyUnknown // a result this version does not know
	}
	o.verifications.Add(ctx, 1, o.verify[r][sourceOf(info)].add...)
	if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
		sp.SetAttributes(o.verifySpan[r]...)
	}
}

// ReceiveStart starts the span of a delivery. It continues the trace already in ctx (an HTTP
// server's instrumentation may have started one); without one, it continues the producer's, from the
// delivery's trace headers, as a server span.
func (o *consumerObserver) ReceiveStart(ctx context.Context, info webhook.ReceiveStartInfo) context.Context {
	kind := o.internalKind
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = o.prop.Extract(ctx, info.Trace)
		kind = o.serverKind
	}
	ctx, sp := o.tracer.Start(ctx, spanReceive, kind...)
	if o.endpointIDs && sp.IsRecording() {
		sp.SetAttributes(attrEndpointID.String(info.Stream))
	}
	return ctx
}

// ReceiveEnd records the delivery's duration and ends its span.
func (o *consumerObserver) ReceiveEnd(ctx context.Context, info webhook.ReceiveEndInfo) {
	m := o.receiveOK
	if info.Status != 200 || o.endpointIDs {
		k := dynKey{kind: dynReceive, n: info.Status, code: info.Code}
		if o.endpointIDs {
			k.stream = info.Stream
		}
		m = o.dyn(k)
	}
	o.receiveDuration.Record(ctx, info.Duration.Seconds(), m.rec...)
	sp := trace.SpanFromContext(ctx)
	if !sp.IsRecording() {
		sp.End()
		return
	}
	sp.SetAttributes(attrHTTPStatus.Int(info.Status))
	if info.Status == 200 {
		sp.SetAttributes(attrSequence.Int64(int64(info.Sequence)), attrReceiveOutcome.String(info.Outcome.String()),
			attrRecovered.Int(info.Recovered))
	} else if info.Code != "" {
		sp.SetAttributes(attrErrorType.String(info.Code))
	}
	if info.Status >= 500 {
		// A server span's 4xx is the client's error (a forged or stale signature), not this one's.
		sp.SetStatus(codes.Error, info.Code)
	}
	sp.End()
}

// Sequenced counts the sequence rule's verdict and records the size of a gap.
func (o *consumerObserver) Sequenced(ctx context.Context, info webhook.SequenceInfo) {
	oc := info.Outcome
	if oc < 0 || int(oc) >= numOutcomes {
		oc = 0 // a verdict this version does not know: counted as unknown
	}
	m := o.decision[oc]
	if o.endpointIDs {
		m = o.dyn(dynKey{kind: dynDecision, n: int(oc), stream: info.Stream})
	}
	o.decisions.Add(ctx, 1, m.add...)
	if oc == webhook.Gap {
		g := o.empty
		if o.endpointIDs {
			g = o.dyn(dynKey{kind: dynGap, stream: info.Stream})
		}
		o.gapSize.Record(ctx, int64(info.Missing), g.rec...)
	}
	if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
		sp.SetAttributes(o.decisionSpan[oc]...)
		if oc == webhook.Gap {
			sp.SetAttributes(attrGapSize.Int64(int64(info.Missing)))
		}
	}
}

// RangeFetchStart starts the span of a range fetch, a client span in the delivery's trace.
func (o *consumerObserver) RangeFetchStart(ctx context.Context, info webhook.RangeFetchStartInfo) context.Context {
	ctx, sp := o.tracer.Start(ctx, spanRangeFetch, trace.WithSpanKind(trace.SpanKindClient))
	if sp.IsRecording() {
		sp.SetAttributes(attrRangeFrom.Int64(int64(info.From)), attrRangeTo.Int64(int64(info.To)))
		if o.endpointIDs {
			sp.SetAttributes(attrEndpointID.String(info.Stream))
		}
	}
	return ctx
}

// InjectTrace writes the fetch span's context into a range request.
func (o *consumerObserver) InjectTrace(ctx context.Context, carrier webhook.TraceCarrier) {
	o.prop.Inject(ctx, carrier)
}

// RangeFetchEnd counts the fetch, records its duration and ends its span.
func (o *consumerObserver) RangeFetchEnd(ctx context.Context, info webhook.RangeFetchEndInfo) {
	r := info.Result
	if int(r) >= numFetchResults {
		r = webhook.RangeFetchUnknown // a result this version does not know
	}
	m, ev := o.fetch[r], o.empty
	if o.endpointIDs {
		m = o.dyn(dynKey{kind: dynFetch, n: int(r), stream: info.Stream})
		ev = o.dyn(dynKey{kind: dynEvents, stream: info.Stream})
	}
	o.fetches.Add(ctx, 1, m.add...)
	o.fetchDuration.Record(ctx, info.Duration.Seconds(), m.rec...)
	if r == webhook.RangeFetchOK {
		o.fetchEvents.Add(ctx, int64(info.Events), ev.add...)
	}
	sp := trace.SpanFromContext(ctx)
	if sp.IsRecording() {
		sp.SetAttributes(attrRangeEvents.Int(info.Events), attrRangePages.Int(info.Pages))
		if info.Status != 0 {
			sp.SetAttributes(attrHTTPStatus.Int(info.Status))
		}
		if r != webhook.RangeFetchOK {
			sp.SetAttributes(attrErrorType.String(r.String()))
			sp.SetStatus(codes.Error, r.String())
		}
	}
	sp.End()
}
