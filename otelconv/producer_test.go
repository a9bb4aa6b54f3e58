package otelconv

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

var prodT0 = time.Unix(1767225600, 0).UTC()

func eq[T comparable](t testing.TB, want, got T, what string) {
	t.Helper()
	if want != got {
		t.Fatalf("%s: want %v, got %v", what, want, got)
	}
}

// received is one delivery request the test endpoint got.
type received struct {
	path        string
	sequence    uint64
	traceparent string
}

// producerRig is a real Publisher, memstore.Log and Dispatcher with the otelconv observer, delivering to
// an httptest server whose /ok answers 200 and /fail 500.
type producerRig struct {
	h   *harness
	clk *clock
	eps *memstore.Endpoints
	log *memstore.Log
	pub *producer.Publisher
	d   *producer.Dispatcher

	mu  sync.Mutex
	got []received
}

func newProducerRig(t *testing.T, opts *Options) *producerRig {
	t.Helper()
	r := &producerRig{h: newHarness(t, opts), clk: &clock{now: prodT0}, log: memstore.NewLog()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var ev webhook.Event
		_ = json.Unmarshal(body, &ev)
		r.mu.Lock()
		r.got = append(r.got, received{path: req.URL.Path, sequence: ev.Sequence, traceparent: req.Header.Get("traceparent")})
		r.mu.Unlock()
		if req.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	var err error
	r.eps, err = memstore.NewEndpoints(
		producer.Endpoint{ID: "we_ok", URL: srv.URL + "/ok", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}},
		producer.Endpoint{ID: "we_fail", URL: srv.URL + "/fail", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}},
		producer.Endpoint{ID: "we_gone", URL: srv.URL + "/gone", Owner: "lic_2", Secrets: []string{webhook.NewSecret()}})
	if err != nil {
		t.Fatal(err)
	}
	obs := r.h.tel.Producer()
	if r.pub, err = producer.NewPublisher(r.log, r.eps, &producer.PublisherOptions{Now: r.clk.Now, Hooks: obs}); err != nil {
		t.Fatal(err)
	}
	guard := &ssrf.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	if r.d, err = producer.NewDispatcher(r.log, r.eps, &producer.DispatcherOptions{Guard: guard, Now: r.clk.Now, Jitter: -1,
		Schedule: []time.Duration{time.Minute}, Hooks: obs}); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *producerRig) deliver(t *testing.T) producer.Stats {
	t.Helper()
	st, err := r.d.DeliverDue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (r *producerRig) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func hasKey(set attribute.Set, key attribute.Key) bool {
	_, ok := set.Value(key)
	return ok
}

// TestProducerObserverEndToEnd: publishes inside a request's span, deliveries that succeed, fail and
// are abandoned, and the exact counts, durations, spans, links and traceparent headers they produce.
func TestProducerObserverEndToEnd(t *testing.T) {
	r := newProducerRig(t, nil)
	h := r.h
	ctx := context.Background()

	// The request that publishes: one span, three events (we_ok twice, we_fail once); we_gone's event
	// is published before its endpoint is deleted, outside any span.
	reqCtx, reqSpan := h.tel.tracer.Start(ctx, "POST /v1/orders")
	for _, ep := range []string{"we_ok", "we_ok", "we_fail"} {
		if _, err := r.pub.Publish(reqCtx, ep, "order.created", map[string]string{"id": "ord_1"}); err != nil {
			t.Fatal(err)
		}
	}
	reqSpan.End()
	if _, err := r.pub.Publish(ctx, "we_gone", "order.cancelled", map[string]string{"id": "ord_2"}); err != nil {
		t.Fatal(err)
	}
	r.eps.Delete("we_gone")
	eq(t, 3, h.sum(t, metricEventsAppended, attrEventType.String("order.created")), "events appended, order.created")
	eq(t, 1, h.sum(t, metricEventsAppended, attrEventType.String("order.cancelled")), "events appended, order.cancelled")

	r.clk.Advance(time.Second)
	eq(t, producer.Stats{Claimed: 4, Delivered: 2, Failed: 1, Abandoned: 1}, r.deliver(t), "first pass")
	r.clk.Advance(time.Minute)
	eq(t, producer.Stats{Claimed: 1, Abandoned: 1}, r.deliver(t), "second pass: the schedule is exhausted")

	for _, c := range []struct {
		want  int64
		attrs []attribute.KeyValue
	}{
		{5, nil},
		{2, []attribute.KeyValue{attrDeliveryResult.String("delivered"), attrStatusClass.String("2xx")}},
		{1, []attribute.KeyValue{attrDeliveryResult.String("failed"), attrStatusClass.String("5xx"), attrErrorType.String("http_status")}},
		{1, []attribute.KeyValue{attrDeliveryResult.String("abandoned"), attrStatusClass.String("5xx"), attrErrorType.String("http_status")}},
		{1, []attribute.KeyValue{attrDeliveryResult.String("abandoned"), attrStatusClass.String("none"), attrErrorType.String("endpoint_deleted")}},
	} {
		set := attribute.NewSet(c.attrs...)
		eq(t, c.want, h.sum(t, metricDeliveryAttempts, c.attrs...), "attempts with "+set.Encoded(attribute.DefaultEncoder()))
	}
	n, _ := h.histCount(t, metricDeliveryDuration)
	eq(t, uint64(4), n, "durations: the four requests sent, not the deleted endpoint's abandonment")
	n, _ = h.histCount(t, metricDeliveryDuration, attrDeliveryResult.String("delivered"), attrStatusClass.String("2xx"))
	eq(t, uint64(2), n, "durations of the delivered")
	assertNoHighCardinality(t, h)

	// Spans: one per attempt, each linked to the span of the request that published its event.
	spans := h.ended(spanDeliver)
	eq(t, 5, len(spans), "webhook.deliver spans")
	byTrace := map[trace.TraceID]sdktrace.ReadOnlySpan{}
	linked := 0
	for _, s := range spans {
		eq(t, trace.SpanKindClient, s.SpanKind(), "span kind")
		eq(t, false, s.Parent().IsValid(), "an attempt starts its own trace (DeliverDue's context has no span)")
		byTrace[s.SpanContext().TraceID()] = s
		attrs := attribute.NewSet(s.Attributes()...)
		typ, _ := attrs.Value(attrEventType)
		if typ.AsString() == "order.created" {
			eq(t, 1, len(s.Links()), "links of an attempt published in a span")
			eq(t, reqSpan.SpanContext().TraceID(), s.Links()[0].SpanContext.TraceID(), "linked trace")
			eq(t, reqSpan.SpanContext().SpanID(), s.Links()[0].SpanContext.SpanID(), "linked span")
			linked++
		} else {
			eq(t, 0, len(s.Links()), "links of an attempt published outside a span")
		}
		if hasKey(attrs, attrEndpointID) || hasKey(attrs, attrEventID) {
			t.Fatalf("span %v carries an ID without the opt-in", s.Attributes())
		}
		result, _ := attrs.Value(attrDeliveryResult)
		if result.AsString() == "delivered" {
			eq(t, codes.Unset, s.Status().Code, "status of a delivered attempt")
			code, _ := attrs.Value(attrHTTPStatus)
			eq(t, int64(200), code.AsInt64(), "status code of a delivered attempt")
		} else {
			eq(t, codes.Error, s.Status().Code, "status of a "+result.AsString()+" attempt")
		}
	}
	eq(t, 4, linked, "attempts linked to the publishing request (we_fail twice)")

	// The endpoint received a traceparent naming the attempt's own span.
	got := r.requests()
	eq(t, 4, len(got), "requests")
	for _, g := range got {
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": g.traceparent}))
		s, ok := byTrace[sc.TraceID()]
		if !ok {
			t.Fatalf("request to %s carried traceparent %q, of no attempt span", g.path, g.traceparent)
		}
		eq(t, s.SpanContext().SpanID(), sc.SpanID(), "the request's parent is its attempt span")
	}
}

// assertNoHighCardinality: without the opt-in no producer metric point carries an endpoint or event ID.
func assertNoHighCardinality(t *testing.T, h *harness) {
	t.Helper()
	for name, m := range h.collect(t) {
		if !strings.HasPrefix(name, "svc.webhook.") {
			continue
		}
		for _, set := range pointSets(m.Data) {
			if hasKey(set, attrEndpointID) || hasKey(set, attrEventID) || hasKey(set, attrEventSequence) {
				t.Fatalf("%s has a high-cardinality attribute: %v", name, set.ToSlice())
			}
		}
	}
}

// TestProducerObserverEndpointAttribute: with the opt-in, attempts carry the endpoint ID.
func TestProducerObserverEndpointAttribute(t *testing.T) {
	r := newProducerRig(t, &Options{EndpointAttribute: true})
	if _, err := r.pub.Publish(context.Background(), "we_ok", "order.created", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.pub.Publish(context.Background(), "we_fail", "order.created", 1); err != nil {
		t.Fatal(err)
	}
	r.deliver(t)
	eq(t, 1, r.h.sum(t, metricDeliveryAttempts, attrEndpointID.String("we_ok"), attrDeliveryResult.String("delivered")), "we_ok delivered")
	eq(t, 1, r.h.sum(t, metricDeliveryAttempts, attrEndpointID.String("we_fail"), attrDeliveryResult.String("failed")), "we_fail failed")
	n, _ := r.h.histCount(t, metricDeliveryDuration, attrEndpointID.String("we_fail"))
	eq(t, uint64(1), n, "we_fail's duration")
	for _, s := range r.h.ended(spanDeliver) {
		if !hasKey(attribute.NewSet(s.Attributes()...), attrEndpointID) {
			t.Fatalf("span without the endpoint ID: %v", s.Attributes())
		}
	}
}

// TestProducerBacklogGauges: the gauges read the dispatcher's backlog at each collection, aged by the
// dispatcher's clock.
func TestProducerBacklogGauges(t *testing.T) {
	for _, perEndpoint := range []bool{false, true} {
		t.Run(map[bool]string{false: "aggregate", true: "per endpoint"}[perEndpoint], func(t *testing.T) {
			r := newProducerRig(t, &Options{EndpointAttribute: perEndpoint})
			reg, err := r.h.tel.ObserveBacklog(r.d)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			eq(t, 0, len(r.h.gaugeFloat(t, metricBacklogAge, attrEndpointID.String("we_ok"))), "no endpoint point before any event")
			if !perEndpoint {
				eq(t, 0.0, r.h.gaugeFloat(t, metricBacklogAge)[0], "age of an empty backlog")
				eq(t, 0, r.h.sum(t, metricBacklogEvents), "events of an empty backlog")
			}
			for _, ep := range []string{"we_ok", "we_fail", "we_fail"} {
				if _, err := r.pub.Publish(ctx, ep, "order.created", 1); err != nil {
					t.Fatal(err)
				}
			}
			r.clk.Advance(30 * time.Second)
			if _, err := r.pub.Publish(ctx, "we_ok", "order.created", 1); err != nil {
				t.Fatal(err)
			}
			r.clk.Advance(60 * time.Second)
			if perEndpoint {
				eq(t, 90.0, r.h.gaugeFloat(t, metricBacklogAge, attrEndpointID.String("we_ok"))[0], "we_ok's oldest")
				eq(t, 2, r.h.sum(t, metricBacklogEvents, attrEndpointID.String("we_ok")), "we_ok's events")
				eq(t, 2, r.h.sum(t, metricBacklogEvents, attrEndpointID.String("we_fail")), "we_fail's events")
			} else {
				eq(t, 90.0, r.h.gaugeFloat(t, metricBacklogAge)[0], "oldest over endpoints")
				eq(t, 4, r.h.sum(t, metricBacklogEvents), "events over endpoints")
			}

			// we_ok is delivered; we_fail's first fails and the second waits behind it.
			r.deliver(t)
			r.clk.Advance(10 * time.Second)
			if perEndpoint {
				eq(t, 0, len(r.h.gaugeFloat(t, metricBacklogAge, attrEndpointID.String("we_ok"))), "we_ok has no backlog")
				eq(t, 100.0, r.h.gaugeFloat(t, metricBacklogAge, attrEndpointID.String("we_fail"))[0], "we_fail's oldest")
			} else {
				eq(t, 100.0, r.h.gaugeFloat(t, metricBacklogAge)[0], "oldest over endpoints")
				eq(t, 2, r.h.sum(t, metricBacklogEvents), "events over endpoints")
			}
			if err := reg.Unregister(); err != nil {
				t.Fatal(err)
			}
			eq(t, 0, len(r.h.gaugeFloat(t, metricBacklogAge)), "points after Unregister")
		})
	}
}

// TestProducerEventTrace: the stored form is W3C whatever the deliveries' propagator, and nothing
// outside a span.
func TestProducerEventTrace(t *testing.T) {
	h := newHarness(t, &Options{Propagator: propagation.Baggage{}})
	obs := h.tel.Producer()
	eq(t, producer.TraceContext{}, obs.EventTrace(context.Background()), "outside a span")
	ctx, span := h.tel.tracer.Start(context.Background(), "publish")
	defer span.End()
	ts, err := trace.ParseTraceState("rojo=00f067aa0ba902b7")
	if err != nil {
		t.Fatal(err)
	}
	ctx = trace.ContextWithSpanContext(ctx, span.SpanContext().WithTraceState(ts))
	tc := obs.EventTrace(ctx)
	sc := span.SpanContext()
	eq(t, "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01", tc.TraceParent, "traceparent")
	eq(t, "rojo=00f067aa0ba902b7", tc.TraceState, "tracestate")
}

// TestProducerEventTypesBounded: event types beyond maxEventTypes are counted as _OTHER.
func TestProducerEventTypesBounded(t *testing.T) {
	h := newHarness(t, nil)
	obs := h.tel.Producer()
	for i := range maxEventTypes + 10 {
		obs.EventsAppended(context.Background(), producer.AppendInfo{Type: "t" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), Events: 1})
	}
	eq(t, 10, h.sum(t, metricEventsAppended, attrEventType.String("_OTHER")), "types past the bound")
	eq(t, maxEventTypes+10, int(h.sum(t, metricEventsAppended)), "every event counted")
}

func TestStatusAndErrorClasses(t *testing.T) {
	for code, want := range map[int]string{0: "none", 100: "1xx", 204: "2xx", 302: "3xx", 404: "4xx", 599: "5xx", 600: "other", 99: "other", -1: "other"} {
		eq(t, want, statusClasses[statusClass(code)], "class of "+string(rune('0'+code%10)))
	}
	eq(t, "_OTHER", errorClasses[errorClass("new_class")], "unknown class")
	eq(t, "timeout", errorClasses[errorClass(producer.ClassTimeout)], "timeout")
}

// answer200 answers every request at once, in memory.
type answer200 struct{}

func (answer200) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

// BenchmarkDeliveryObserved is one publish and one delivery through an in-memory transport, without an
// observer and with the otelconv one (metrics and a recording span per attempt, SDK in-memory).
func BenchmarkDeliveryObserved(b *testing.B) {
	for _, observed := range []bool{false, true} {
		b.Run(map[bool]string{false: "observer=nil", true: "observer=otelconv"}[observed], func(b *testing.B) {
			h := newHarness(b, nil)
			var obs *producer.Hooks
			if observed {
				obs = h.tel.Producer()
			}
			eps, err := memstore.NewEndpoints(producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
			if err != nil {
				b.Fatal(err)
			}
			clk := &clock{now: prodT0}
			l := memstore.NewLog()
			pub, err := producer.NewPublisher(l, eps, &producer.PublisherOptions{Now: clk.Now, Hooks: obs})
			if err != nil {
				b.Fatal(err)
			}
			d, err := producer.NewDispatcher(l, eps, &producer.DispatcherOptions{Client: &http.Client{Transport: answer200{}},
				Now: clk.Now, Hooks: obs})
			if err != nil {
				b.Fatal(err)
			}
			ctx, span := h.tel.tracer.Start(context.Background(), "POST /v1/orders")
			defer span.End()
			data := json.RawMessage(`{"id":"ord_1"}`)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := pub.Publish(ctx, "we_a", "order.created", data); err != nil {
					b.Fatal(err)
				}
				if st, err := d.DeliverDue(context.Background()); err != nil || st.Delivered != 1 {
					b.Fatal(err, st)
				}
			}
		})
	}
}

// BenchmarkProducerAttemptMetrics is the observer's own cost per attempt with spans off (a
// non-recording tracer): the counter and the histogram.
func BenchmarkProducerAttemptMetrics(b *testing.B) {
	h := newHarness(b, nil)
	p := h.tel.producer
	p.tracer = noop.NewTracerProvider().Tracer("")
	ctx := context.Background()
	info := producer.AttemptInfo{Endpoint: "we_a", EventID: "evt_1", EventType: "order.created", Sequence: 7, Attempt: 1}
	res := producer.AttemptResult{Endpoint: "we_a", EventType: "order.created", Outcome: driver.OutcomeDelivered, Sent: true,
		StatusCode: 200, Duration: 30 * time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		actx := p.AttemptStart(ctx, info)
		p.AttemptEnd(actx, res)
	}
}

// TestProducerRangeServeContinuesTrace: the range handler's span continues the consumer's
// traceparent, or the span already in the request's context.
func TestProducerRangeServeContinuesTrace(t *testing.T) {
	r := newProducerRig(t, nil)
	ctx := context.Background()
	for range 3 {
		if _, err := r.pub.Publish(ctx, "we_ok", "order.created", 1); err != nil {
			t.Fatal(err)
		}
	}
	rh, err := producer.NewRangeHandler(r.log, r.eps, func(*http.Request) (string, error) { return "lic_1", nil },
		&producer.RangeHandlerOptions{Hooks: r.h.tel.Producer()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(producer.RangePattern("v1"), rh)

	// The consumer's fetch span, sent as traceparent.
	_, fetch := r.h.tel.tracer.Start(ctx, "webhook.range_fetch")
	fetch.End()
	req := httptest.NewRequest(http.MethodGet, "/v1/webhook_endpoints/we_ok/events?from=1&to=2", nil)
	propagation.TraceContext{}.Inject(trace.ContextWithSpan(ctx, fetch), propagation.HeaderCarrier(req.Header))
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	eq(t, 200, w.Code, "status")

	// A request inside the team's own server span.
	mw, outer := r.h.tel.tracer.Start(ctx, "GET /v1/webhook_endpoints/{id}/events")
	req = httptest.NewRequest(http.MethodGet, "/v1/webhook_endpoints/we_fail/events?from=1", nil).WithContext(mw)
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	outer.End()
	eq(t, 200, w.Code, "status")
	req = httptest.NewRequest(http.MethodGet, "/v1/webhook_endpoints/we_gone/events?from=1", nil)
	mux.ServeHTTP(httptest.NewRecorder(), req)

	spans := r.h.ended(spanRangeServe)
	eq(t, 3, len(spans), "range spans")
	eq(t, trace.SpanKindServer, spans[0].SpanKind(), "kind")
	eq(t, fetch.SpanContext().TraceID(), spans[0].Parent().TraceID(), "continues the consumer's trace")
	eq(t, fetch.SpanContext().SpanID(), spans[0].Parent().SpanID(), "child of the fetch span")
	eq(t, true, spans[0].Parent().IsRemote(), "remote parent")
	attrs := attribute.NewSet(spans[0].Attributes()...)
	n, _ := attrs.Value(attrRangeEvents)
	eq(t, int64(2), n.AsInt64(), "events served")
	eq(t, outer.SpanContext().SpanID(), spans[1].Parent().SpanID(), "child of the middleware's span")
	eq(t, false, spans[2].Parent().IsValid(), "no incoming trace: a root")
	attrs = attribute.NewSet(spans[2].Attributes()...)
	code, _ := attrs.Value(attrHTTPStatus)
	eq(t, int64(404), code.AsInt64(), "status of an unknown endpoint")
	eq(t, codes.Unset, spans[2].Status().Code, "a 4xx is not the server's error")
}

// TestProducerEndpointDisabled: each endpoint a Dispatcher disables is counted once by its reason,
// an unknown reason as _OTHER, the endpoint only with the opt-in.
func TestProducerEndpointDisabled(t *testing.T) {
	h := newHarness(t, nil)
	hooks := h.tel.Producer()
	ctx := context.Background()
	hooks.EndpointDisabled(ctx, producer.EndpointDisabledInfo{Endpoint: "we_a", Reason: producer.DisabledGone, StatusCode: 410})
	hooks.EndpointDisabled(ctx, producer.EndpointDisabledInfo{Endpoint: "we_b", Reason: producer.DisabledFailing})
	hooks.EndpointDisabled(ctx, producer.EndpointDisabledInfo{Endpoint: "we_c", Reason: producer.DisabledFailing})
	hooks.EndpointDisabled(ctx, producer.EndpointDisabledInfo{Endpoint: "we_d", Reason: "made-up"})
	for reason, want := range map[string]int64{"gone": 1, "failing": 2, "_OTHER": 1} {
		if n := h.sum(t, metricDisabled, attrDisabledReason.String(reason)); n != want {
			t.Errorf("%s: %d endpoints counted, want %d", reason, n, want)
		}
	}

	h = newHarness(t, &Options{EndpointAttribute: true})
	h.tel.Producer().EndpointDisabled(ctx, producer.EndpointDisabledInfo{Endpoint: "we_a", Reason: producer.DisabledGone})
	if n := h.sum(t, metricDisabled, attrDisabledReason.String("gone"), attrEndpointID.String("we_a")); n != 1 {
		t.Errorf("with the endpoint attribute: %d, want 1", n)
	}
}
