package otelconv

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/webhooktest"
)

const (
	testStream = "we_otel"
	testAPIKey = "sk_sandbox_otel"
)

var testEpoch = time.Unix(1767225600, 0)

// clock is a test clock that moves only when told to.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// consumer is a real webhook consumer — Verifier, RangeClient against a range server, Tracker,
// Receiver — all reporting to one otelconv observer, fed by an in-memory producer.
type consumer struct {
	h      *harness
	secret string
	src    *webhooktest.Source
	rc     *webhook.Receiver
	clock  *clock

	mu          sync.Mutex
	traceparent []string // of each range request
}

// newConsumer builds the consumer with events already emitted on testStream. Each range request takes
// 100 ms on the consumer's clock.
func newConsumer(t *testing.T, opts *Options, events int) *consumer {
	t.Helper()
	c := &consumer{h: newHarness(t, opts), secret: webhook.NewSecret(), clock: &clock{now: testEpoch}}
	c.src = webhooktest.NewSource(c.secret, testAPIKey, &webhooktest.SourceOptions{Now: func() time.Time { return testEpoch }})
	for i := range events {
		c.src.Emit(testStream, "order.created", map[string]int{"n": i + 1})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.clock.Advance(100 * time.Millisecond)
		c.mu.Lock()
		c.traceparent = append(c.traceparent, r.Header.Get("traceparent"))
		c.mu.Unlock()
		c.src.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	obs := c.h.tel.Webhook()
	v, err := webhook.NewVerifier([]string{c.secret}, &webhook.VerifierOptions{Now: c.clock.Now, Hooks: obs})
	if err != nil {
		t.Fatal(err)
	}
	fetch, err := webhook.NewRangeClient(srv.URL, testAPIKey, v, &webhook.RangeClientOptions{HTTPClient: srv.Client(), Hooks: obs})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := webhook.NewTracker(&webhook.MemoryCursorStore{}, fetch, func(context.Context, webhook.Step) error { return nil },
		&webhook.TrackerOptions{Hooks: obs})
	if err != nil {
		t.Fatal(err)
	}
	c.rc, err = webhook.NewReceiver(testStream, v, tr, &webhook.ReceiverOptions{Hooks: obs})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// deliver delivers the stream's event seq, signed at `at` with secret, and returns the status.
func (c *consumer) deliver(t *testing.T, seq uint64, at time.Time, secret string, edit func(*http.Request)) int {
	t.Helper()
	r := webhooktest.NewRequest("/webhooks", c.src.Event(testStream, seq), at, secret)
	if edit != nil {
		edit(r)
	}
	w := httptest.NewRecorder()
	c.rc.ServeHTTP(w, r)
	return w.Code
}

func requireCount(t *testing.T, what string, got, want int64) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %d, want %d", what, got, want)
	}
}

// TestWebhookVerificationsExact: every delivery to a real Receiver is one verification, counted
// under its result — N forgeries are exactly N mismatches — and one receive duration under the status
// answered.
func TestWebhookVerificationsExact(t *testing.T) {
	const forged = 7
	c := newConsumer(t, nil, 5)
	other := webhook.NewSecret()
	for seq := uint64(1); seq <= 5; seq++ {
		if got := c.deliver(t, seq, testEpoch, c.secret, nil); got != 200 {
			t.Fatalf("delivery %d: status %d", seq, got)
		}
	}
	for range forged {
		if got := c.deliver(t, 5, testEpoch, other, nil); got != 401 {
			t.Fatalf("forged delivery: status %d", got)
		}
	}
	c.deliver(t, 5, testEpoch.Add(-10*time.Minute), c.secret, nil)
	c.deliver(t, 5, testEpoch.Add(-10*time.Minute), c.secret, nil)
	c.deliver(t, 5, testEpoch.Add(10*time.Minute), c.secret, nil)
	c.deliver(t, 5, testEpoch, c.secret, func(r *http.Request) { r.Header.Set(webhook.HeaderSignature, "t=1,v1=zz") })
	c.deliver(t, 5, testEpoch, c.secret, func(r *http.Request) { r.Header.Del(webhook.HeaderSignature) })

	h := c.h
	delivery := attrVerificationSource.String("delivery")
	for _, want := range []struct {
		result string
		n      int64
	}{{"ok", 5}, {"mismatch", forged}, {"too_old", 2}, {"too_new", 1}, {"malformed", 1}, {"missing", 1}} {
		requireCount(t, "verifications{"+want.result+"}", h.sum(t, "svc.webhook.verifications", attrVerificationResult.String(want.result), delivery), want.n)
	}
	requireCount(t, "verifications", h.sum(t, "svc.webhook.verifications"), 5+forged+5)

	for _, want := range []struct {
		status int
		code   string
		n      uint64
	}{{200, "", 5}, {401, "signature_mismatch", forged}, {401, "signature_too_old", 2}, {401, "signature_too_new", 1},
		{400, "signature_invalid", 1}, {400, "header_missing", 1}} {
		attrs := []attribute.KeyValue{attrHTTPStatus.Int(want.status)}
		if want.code != "" {
			attrs = append(attrs, attrErrorType.String(want.code))
		}
		if n, _ := h.histCount(t, "svc.webhook.receive.duration", attrs...); n != want.n {
			t.Errorf("receive.duration{%d %s} count = %d, want %d", want.status, want.code, n, want.n)
		}
	}
	if n := len(h.ended(spanReceive)); n != 5+forged+5 {
		t.Errorf("%d receive spans, want %d", n, 5+forged+5)
	}
	// A forgery is the producer's (or an attacker's) error, not the receiver's: the span is not an error.
	for _, s := range h.ended(spanReceive) {
		if s.Status().Code == codes.Error {
			t.Errorf("a span of a %v delivery has status Error", s.Attributes())
		}
	}
}

// TestWebhookGapFetchMetrics: gaps are fetched by a real RangeClient from a range server; the
// sequence verdicts, the gap sizes and the fetches' counts, events and durations match exactly.
func TestWebhookGapFetchMetrics(t *testing.T) {
	c := newConsumer(t, nil, 12)
	h := c.h
	for _, d := range []struct {
		seq    uint64
		status int
	}{{1, 200}, {6, 200}, {6, 200}, {3, 200}, {10, 200}, {11, 200}} {
		if got := c.deliver(t, d.seq, c.clock.Now(), c.secret, nil); got != d.status {
			t.Fatalf("delivery %d: status %d, want %d", d.seq, got, d.status)
		}
	}
	c.src.FailFetches(1)
	if got := c.deliver(t, 12+0, c.clock.Now(), c.secret, func(r *http.Request) {}); got != 200 {
		// 12 follows 11: no fetch, so the injected failure waits for the next gap.
		t.Fatalf("delivery 12: status %d", got)
	}
	c.src.Emit(testStream, "order.created", nil) // 13
	c.src.Emit(testStream, "order.created", nil) // 14
	if got := c.deliver(t, 14, c.clock.Now(), c.secret, nil); got != 503 {
		t.Fatalf("delivery 14 with the range endpoint failing: status %d, want 503", got)
	}

	outcome := func(o string) int64 { return h.sum(t, "svc.webhook.sequence.decisions", attrSequenceOutcome.String(o)) }
	requireCount(t, "decisions{processed}", outcome("processed"), 3) // 1, 11, 12
	requireCount(t, "decisions{duplicate}", outcome("duplicate"), 2) // 6 again, 3
	requireCount(t, "decisions{gap}", outcome("gap"), 3)             // 6 (4 missing), 10 (3), 14 (1)
	if n, sum := h.histCount(t, "svc.webhook.gap.size"); n != 3 || sum != 8 {
		t.Errorf("gap.size: %d gaps of %v events in all, want 3 of 8", n, sum)
	}

	requireCount(t, "range.fetches", h.sum(t, "svc.webhook.range.fetches"), 3)
	requireCount(t, "range.fetches{problem}", h.sum(t, "svc.webhook.range.fetches", attrErrorType.String("problem")), 1)
	requireCount(t, "range.events", h.sum(t, "svc.webhook.range.events"), 7)
	if n, sum := h.histCount(t, "svc.webhook.range.duration"); n != 3 || sum < 0.2999 || sum > 0.3001 {
		t.Errorf("range.duration: %d fetches taking %vs, want 3 taking 0.3s (100 ms each on the test clock)", n, sum)
	}
	if n, _ := h.histCount(t, "svc.webhook.range.duration", attrErrorType.String("problem")); n != 1 {
		t.Errorf("range.duration{problem} count = %d, want 1", n)
	}
	requireCount(t, "verifications{range_response}", h.sum(t, "svc.webhook.verifications", attrVerificationSource.String("range_response")), 2)
	if n, _ := h.histCount(t, "svc.webhook.receive.duration", attrHTTPStatus.Int(503), attrErrorType.String("delivery_not_stored")); n != 1 {
		t.Errorf("receive.duration{503} count = %d, want 1", n)
	}

	// The failed fetch's span is an error; the 503's receive span is one too.
	fetches := h.ended(spanRangeFetch)
	if len(fetches) != 3 || fetches[2].Status().Code != codes.Error {
		t.Fatalf("range fetch spans: %d, the last with status %v", len(fetches), fetches[len(fetches)-1].Status())
	}
	receives := h.ended(spanReceive)
	if last := receives[len(receives)-1]; last.Status().Code != codes.Error {
		t.Errorf("the 503's receive span has status %v", last.Status())
	}
	// No metric point names an endpoint unless asked to.
	for name, m := range h.collect(t) {
		for _, set := range pointSets(m.Data) {
			if set.HasValue(attrEndpointID) {
				t.Errorf("%s has %s without Options.EndpointAttribute", name, attrEndpointID)
			}
		}
	}
}

// TestWebhookReceiveContinuesProducerTrace: the receive span's parent is the producer's span whose
// context the delivery carried in traceparent; the gap's range fetch is a child of the receive span,
// and its request carried the fetch span's traceparent.
func TestWebhookReceiveContinuesProducerTrace(t *testing.T) {
	c := newConsumer(t, nil, 3)
	producerTP := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = producerTP.Shutdown(context.Background()) })
	ctx, producerSpan := producerTP.Tracer("producer").Start(context.Background(), "webhook.deliver")
	producerSpan.End()

	status := c.deliver(t, 3, testEpoch, c.secret, func(r *http.Request) {
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(r.Header))
	})
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	receives := c.h.ended(spanReceive)
	if len(receives) != 1 {
		t.Fatalf("%d receive spans", len(receives))
	}
	rs := receives[0]
	want := producerSpan.SpanContext()
	if p := rs.Parent(); p.TraceID() != want.TraceID() || p.SpanID() != want.SpanID() || !p.IsRemote() {
		t.Fatalf("receive span's parent = %v, want the producer's span %v (remote)", p, want)
	}
	if rs.SpanKind() != trace.SpanKindServer {
		t.Errorf("receive span kind %v, want server", rs.SpanKind())
	}
	wantAttrs := map[attribute.Key]attribute.Value{
		attrSequence:           attribute.Int64Value(3),
		attrReceiveOutcome:     attribute.StringValue("processed"),
		attrRecovered:          attribute.IntValue(2),
		attrHTTPStatus:         attribute.IntValue(200),
		attrVerificationResult: attribute.StringValue("ok"),
		attrSequenceOutcome:    attribute.StringValue("gap"),
		attrGapSize:            attribute.Int64Value(2),
	}
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range rs.Attributes() {
		got[kv.Key] = kv.Value
	}
	for k, v := range wantAttrs {
		if got[k] != v {
			t.Errorf("receive span %s = %v, want %v", k, got[k].String(), v.String())
		}
	}
	if _, ok := got[attrEndpointID]; ok {
		t.Errorf("receive span names the endpoint without Options.EndpointAttribute")
	}

	fetches := c.h.ended(spanRangeFetch)
	if len(fetches) != 1 {
		t.Fatalf("%d range fetch spans", len(fetches))
	}
	fs := fetches[0]
	if fs.Parent().SpanID() != rs.SpanContext().SpanID() || fs.SpanContext().TraceID() != want.TraceID() {
		t.Errorf("range fetch span's parent = %v, want the receive span %v", fs.Parent(), rs.SpanContext())
	}
	if fs.SpanKind() != trace.SpanKindClient {
		t.Errorf("range fetch span kind %v, want client", fs.SpanKind())
	}
	c.mu.Lock()
	sent := c.traceparent
	c.mu.Unlock()
	if len(sent) != 1 {
		t.Fatalf("%d range requests", len(sent))
	}
	carried := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier{"traceparent": sent[0]}))
	if carried.TraceID() != fs.SpanContext().TraceID() || carried.SpanID() != fs.SpanContext().SpanID() {
		t.Errorf("range request carried traceparent %q, want the fetch span %v", sent[0], fs.SpanContext())
	}
}

// TestWebhookReceiveUnderServerSpan: behind an HTTP server's instrumentation, which already continued
// the producer's trace, the receive span is an internal child of the server's span.
func TestWebhookReceiveUnderServerSpan(t *testing.T) {
	c := newConsumer(t, nil, 1)
	var serverSpan trace.SpanContext
	tracer := c.h.tel.tracer
	middleware := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, sp := tracer.Start(ctx, "POST /webhooks", trace.WithSpanKind(trace.SpanKindServer))
		defer sp.End()
		serverSpan = sp.SpanContext()
		c.rc.ServeHTTP(w, r.WithContext(ctx))
	})
	r := webhooktest.NewRequest("/webhooks", c.src.Event(testStream, 1), testEpoch, c.secret)
	r.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	w := httptest.NewRecorder()
	middleware.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	rs := c.h.ended(spanReceive)[0]
	if rs.Parent().SpanID() != serverSpan.SpanID() || rs.SpanKind() != trace.SpanKindInternal {
		t.Errorf("receive span: parent %v kind %v, want the server span %v, internal", rs.Parent(), rs.SpanKind(), serverSpan)
	}
	if rs.SpanContext().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("receive span in trace %v", rs.SpanContext().TraceID())
	}
}

// TestWebhookEndpointAttribute: with Options.EndpointAttribute the endpoint ID is on the sequence,
// gap, range and receive metrics and on the spans.
func TestWebhookEndpointAttribute(t *testing.T) {
	c := newConsumer(t, &Options{EndpointAttribute: true}, 4)
	if got := c.deliver(t, 4, testEpoch, c.secret, nil); got != 200 {
		t.Fatalf("status %d", got)
	}
	c.deliver(t, 4, testEpoch, webhook.NewSecret(), nil)
	h := c.h
	ep := attrEndpointID.String(testStream)
	requireCount(t, "decisions{gap, endpoint}", h.sum(t, "svc.webhook.sequence.decisions", attrSequenceOutcome.String("gap"), ep), 1)
	requireCount(t, "range.fetches{endpoint}", h.sum(t, "svc.webhook.range.fetches", ep), 1)
	requireCount(t, "range.events{endpoint}", h.sum(t, "svc.webhook.range.events", ep), 3)
	if n, sum := h.histCount(t, "svc.webhook.gap.size", ep); n != 1 || sum != 3 {
		t.Errorf("gap.size{endpoint} = %d, %v", n, sum)
	}
	if n, _ := h.histCount(t, "svc.webhook.receive.duration", ep, attrHTTPStatus.Int(401)); n != 1 {
		t.Errorf("receive.duration{endpoint, 401} count = %d", n)
	}
	for _, name := range []string{spanReceive, spanRangeFetch} {
		for _, s := range h.ended(name) {
			found := false
			for _, kv := range s.Attributes() {
				found = found || kv == ep
			}
			if !found {
				t.Errorf("%s span lacks %s", name, attrEndpointID)
			}
		}
	}
}

// TestWebhookEnumTables: the tables of precomputed attribute sets cover every value of webhook's
// enums, and fail here when webhook grows one.
func TestWebhookEnumTables(t *testing.T) {
	checkEnumTable(t, "webhook.VerifyResult", 1, numVerifyResults, func(v int) string { return webhook.VerifyResult(v).String() }, "unknown")
	checkEnumTable(t, "webhook.RangeFetchResult", 1, numFetchResults, func(v int) string { return webhook.RangeFetchResult(v).String() }, "unknown")
	checkEnumTable(t, "webhook.Outcome", 1, numOutcomes, func(v int) string { return webhook.Outcome(v).String() }, "unknown")
}

// TestWebhookUnknownValues: a value past otelconv's tables (webhook grew one this version does not
// know) is counted as unknown, with or without endpoint IDs, and nothing panics.
func TestWebhookUnknownValues(t *testing.T) {
	for _, opts := range []*Options{nil, {EndpointAttribute: true}} {
		h := newHarness(t, opts)
		hooks := h.tel.Webhook()
		ctx, sp := h.tel.tracer.Start(context.Background(), "test")
		for _, oc := range []webhook.Outcome{webhook.Outcome(numOutcomes), 200, -1} {
			hooks.Sequenced(ctx, webhook.SequenceInfo{Stream: testStream, Sequence: 1, Outcome: oc})
		}
		for _, r := range []webhook.VerifyResult{webhook.VerifyResult(numVerifyResults), 255} {
			hooks.Verified(ctx, webhook.VerifyInfo{Result: r})
			hooks.Verified(ctx, webhook.VerifyInfo{Result: r, RangeResponse: true})
		}
		for _, r := range []webhook.RangeFetchResult{webhook.RangeFetchResult(numFetchResults), 255} {
			fctx := hooks.RangeFetchStart(ctx, webhook.RangeFetchStartInfo{Stream: testStream, From: 1, To: 2})
			hooks.RangeFetchEnd(fctx, webhook.RangeFetchEndInfo{Stream: testStream, Result: r, Events: 2})
		}
		sp.End()
		requireCount(t, "decisions{unknown}", h.sum(t, "svc.webhook.sequence.decisions", attrSequenceOutcome.String("unknown")), 3)
		if n, _ := h.histCount(t, "svc.webhook.gap.size"); n != 0 {
			t.Errorf("gap.size recorded %d times for outcomes that are not a gap", n)
		}
		unknown := attrVerificationResult.String("unknown")
		requireCount(t, "verifications{unknown, delivery}", h.sum(t, "svc.webhook.verifications", unknown, attrVerificationSource.String("delivery")), 2)
		requireCount(t, "verifications{unknown, range_response}", h.sum(t, "svc.webhook.verifications", unknown, attrVerificationSource.String("range_response")), 2)
		requireCount(t, "range.fetches{unknown}", h.sum(t, "svc.webhook.range.fetches", attrErrorType.String("unknown")), 2)
		requireCount(t, "range.events", h.sum(t, "svc.webhook.range.events"), 0)
	}
}

// TestWebhookObserverWithoutSDK: with the global (no-op) providers, the observer works and records
// nothing, and a Receive without HTTP headers starts no trace of its own making.
func TestWebhookObserverWithoutSDK(t *testing.T) {
	tel, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := webhook.NewSecret()
	obs := tel.Webhook()
	v, _ := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return testEpoch }, Hooks: obs})
	tr, _ := webhook.NewTracker(&webhook.MemoryCursorStore{}, webhook.RangeFetcherFunc(func(context.Context, string, uint64, uint64) ([]webhook.Event, error) {
		return nil, nil
	}), func(context.Context, webhook.Step) error { return nil }, &webhook.TrackerOptions{Hooks: obs})
	rc, _ := webhook.NewReceiver(testStream, v, tr, &webhook.ReceiverOptions{Hooks: obs})
	ev := webhooktest.NewEvent(1, "order.created", nil, testEpoch)
	body := webhooktest.Body(ev)
	if _, err := rc.Receive(context.Background(), webhooktest.Header(body, testEpoch, secret), "1", body); err != nil {
		t.Fatal(err)
	}
}

// benchDeliveries returns n signed deliveries 1…n of a 1 KiB event.
func benchDeliveries(b *testing.B, secret string, n int) (bodies [][]byte, sigs, seqs []string) {
	pad := make([]byte, 900)
	for i := range pad {
		pad[i] = 'a' + byte(i%26)
	}
	for i := 1; i <= n; i++ {
		ev := webhooktest.NewEvent(uint64(i), "order.created", map[string]string{"pad": string(pad)}, testEpoch)
		body := webhooktest.Body(ev)
		bodies = append(bodies, body)
		sigs = append(sigs, webhooktest.Header(body, testEpoch, secret))
		seqs = append(seqs, strconv.Itoa(i))
	}
	return bodies, sigs, seqs
}

// benchObservers are the observers the benchmarks compare: none, metrics only (the global no-op
// tracer), and metrics with traces on the SDK.
func benchObservers(b *testing.B) []struct {
	name string
	obs  *webhook.Hooks
} {
	// The SDK's MeterProvider with the global (no-op) TracerProvider measures metrics alone.
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	mo, err := New(&Options{MeterProvider: mp})
	if err != nil {
		b.Fatal(err)
	}
	return []struct {
		name string
		obs  *webhook.Hooks
	}{
		{"nil", nil},
		{"metrics", mo.Webhook()},
		{"metrics+traces", newHarness(b, nil).tel.Webhook()},
	}
}

// BenchmarkVerifyObserved: Verify of a 1 KiB delivery with no observer and with otelconv's.
func BenchmarkVerifyObserved(b *testing.B) {
	secret := webhook.NewSecret()
	bodies, sigs, _ := benchDeliveries(b, secret, 1)
	for _, o := range benchObservers(b) {
		b.Run(o.name, func(b *testing.B) {
			v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return testEpoch }, Hooks: o.obs})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := v.Verify(sigs[0], bodies[0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReceiveObserved: one in-order delivery of a 1 KiB event through Receiver.Receive (verify,
// decode, sequence rule, in-memory cursor), with no observer and with otelconv's. Deliveries are
// signed in advance, in rounds on fresh streams' receivers.
func BenchmarkReceiveObserved(b *testing.B) {
	secret := webhook.NewSecret()
	const round = 4096
	bodies, sigs, seqs := benchDeliveries(b, secret, round)
	for _, o := range benchObservers(b) {
		b.Run(o.name, func(b *testing.B) {
			v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return testEpoch }, Hooks: o.obs})
			if err != nil {
				b.Fatal(err)
			}
			newReceiver := func() *webhook.Receiver {
				tr, err := webhook.NewTracker(&webhook.MemoryCursorStore{}, webhook.RangeFetcherFunc(func(context.Context, string, uint64, uint64) ([]webhook.Event, error) {
					b.Fatal("no gap expected")
					return nil, nil
				}), func(context.Context, webhook.Step) error { return nil }, &webhook.TrackerOptions{Hooks: o.obs})
				if err != nil {
					b.Fatal(err)
				}
				rc, err := webhook.NewReceiver(testStream, v, tr, &webhook.ReceiverOptions{Hooks: o.obs})
				if err != nil {
					b.Fatal(err)
				}
				return rc
			}
			rc := newReceiver()
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i == round {
					b.StopTimer()
					rc, i = newReceiver(), 0
					b.StartTimer()
				}
				if _, err := rc.Receive(ctx, sigs[i], seqs[i], bodies[i]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// With endpoint IDs opted in, a flood of endpoints cannot grow the series without bound: past
// maxDynamicSets, decisions are counted without their endpoint, and none is lost.
func TestWebhookEndpointSeriesBounded(t *testing.T) {
	h := newHarness(t, &Options{EndpointAttribute: true})
	obs := h.tel.Webhook()
	const streams = maxDynamicSets + 100
	for i := range streams {
		obs.Sequenced(context.Background(), webhook.SequenceInfo{Stream: fmt.Sprintf("we_%d", i), Sequence: 1, Outcome: webhook.Processed})
	}
	if got := h.sum(t, "svc.webhook.sequence.decisions", attrSequenceOutcome.String("processed")); got != streams {
		t.Fatalf("decisions = %d, want %d", got, streams)
	}
	sets := pointSets(h.collect(t)["svc.webhook.sequence.decisions"].Data)
	if len(sets) != maxDynamicSets+1 {
		t.Fatalf("%d series, want %d (one per endpoint kept, and one without an endpoint)", len(sets), maxDynamicSets+1)
	}
}
