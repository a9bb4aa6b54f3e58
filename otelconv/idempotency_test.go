package otelconv

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

// flakyStore fails its claims while down.
type flakyStore struct {
	driver.Store
	down atomic.Bool
}

func (s *flakyStore) Claim(ctx context.Context, key driver.Key, fp driver.Fingerprint, now, leaseUntil, expiresAt time.Time) (driver.Claim, error) {
	if s.down.Load() {
		return driver.Claim{}, errors.New("connection refused")
	}
	return s.Store.Claim(ctx, key, fp, now, leaseUntil, expiresAt)
}

// Backend keeps the memory store's name through the wrapper.
func (s *flakyStore) Backend() string { return "memory" }

func idemRequest(key, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
	if key != "" {
		r.Header.Set(idempotency.HeaderKey, key)
	}
	r.Header.Set("Authorization", "Bearer sk_sandbox_aaaaaaaaaaaaaaaa")
	return r
}

func TestIdempotencyMetricsCountEveryOutcome(t *testing.T) {
	h := newHarness(t, nil)
	store := &flakyStore{Store: memstore.New(nil)}
	m, err := idempotency.New(&idempotency.Options{Store: store, Hooks: h.tel.Idempotency()})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	handler := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	do := func(r *http.Request) int {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		return w.Code
	}
	for i := range 3 {
		if code := do(idemRequest("k"+strconv.Itoa(i), `{"n":1}`)); code != http.StatusCreated {
			t.Fatalf("first request: %d", code)
		}
	}
	for range 2 {
		do(idemRequest("k0", `{"n":1}`)) // replayed
	}
	do(idemRequest("k0", `{"n":2}`)) // reused
	do(idemRequest("", `{"n":1}`))   // rejected: no key
	do(idemRequest("bad key", "{}")) // rejected: malformed
	store.down.Store(true)
	if code := do(idemRequest("k9", `{"n":1}`)); code != http.StatusServiceUnavailable {
		t.Fatalf("store down: %d", code)
	}

	want := map[string]int64{"executed": 3, "replayed": 2, "reused": 1, "rejected": 2, "store_error": 1, "in_use": 0}
	for outcome, n := range want {
		if got := h.sum(t, "svc.idempotency.requests", keyIdemOutcome.String(outcome)); got != n {
			t.Errorf("requests{outcome=%s} = %d, want %d", outcome, got, n)
		}
	}
	if got := h.sum(t, "svc.idempotency.requests"); got != 9 {
		t.Errorf("requests = %d, want 9 (one per request)", got)
	}
	if runs.Load() != 3 {
		t.Fatalf("handler ran %d times", runs.Load())
	}
	claims, _ := h.histCount(t, "svc.idempotency.store.duration", keyIdemOperation.String("claim"), keyIdemBackend.String("memory"))
	failed, _ := h.histCount(t, "svc.idempotency.store.duration", keyIdemOperation.String("claim"), attribute.String("error.type", "store_error"))
	completes, _ := h.histCount(t, "svc.idempotency.store.duration", keyIdemOperation.String("complete"))
	if claims != 7 || failed != 1 || completes != 3 {
		t.Errorf("store calls: claims %d (want 7), failed claims %d (want 1), completes %d (want 3)", claims, failed, completes)
	}
	if n, _ := h.histCount(t, "svc.idempotency.handler.duration", attribute.Int("http.response.status_code", 201)); n != 3 {
		t.Errorf("handler runs with 201 = %d, want 3", n)
	}
}

// TestIdempotencyEnumTables: the tables of precomputed attribute sets cover every value of
// idempotency's enums, and fail here when idempotency grows one.
func TestIdempotencyEnumTables(t *testing.T) {
	checkEnumTable(t, "idempotency.StoreOp", 1, numStoreOps, func(v int) string { return idempotency.StoreOp(v).String() }, "unknown")
	checkEnumTable(t, "idempotency.Outcome", 1, numIdemOutcomes, func(v int) string { return idempotency.Outcome(v).String() }, "unknown")
	if len(storeSpanNames) != numStoreOps {
		t.Errorf("%d span names for %d store operations", len(storeSpanNames), numStoreOps)
	}
}

// TestIdempotencyUnknownValues: an outcome or a store operation past otelconv's tables (idempotency
// grew one this version does not know) is counted as _OTHER, makes no span and ends none, and
// nothing panics; the zero values, which the Hooks are never told, are not counted.
func TestIdempotencyUnknownValues(t *testing.T) {
	h := newHarness(t, nil)
	hooks := h.tel.Idempotency()
	ctx, span := h.tel.tracer.Start(context.Background(), "POST /v1/orders")
	for _, oc := range []idempotency.Outcome{idempotency.Outcome(numIdemOutcomes), 255, 0} {
		hooks.Outcome(ctx, oc)
	}
	for _, op := range []idempotency.StoreOp{idempotency.StoreOp(numStoreOps), 255, 0} {
		call := idempotency.StoreCall{Op: op, Backend: "memory"}
		sctx := hooks.StoreStart(ctx, call)
		if sctx != ctx {
			t.Errorf("StoreStart made a span for operation %d", op)
		}
		hooks.StoreEnd(sctx, call, time.Millisecond, nil)
	}
	if !span.IsRecording() {
		t.Fatal("StoreEnd ended the request's span")
	}
	span.End()
	requireCount(t, "requests", h.sum(t, "svc.idempotency.requests"), 2)
	requireCount(t, "requests{_OTHER}", h.sum(t, "svc.idempotency.requests", keyIdemOutcome.String(otherValue)), 2)
	if n, _ := h.histCount(t, "svc.idempotency.store.duration"); n != 2 {
		t.Errorf("store.duration count = %d, want 2", n)
	}
	if n, _ := h.histCount(t, "svc.idempotency.store.duration", keyIdemOperation.String(otherValue), keyIdemBackend.String("memory")); n != 2 {
		t.Errorf("store.duration{_OTHER} count = %d, want 2", n)
	}
	if n := len(h.spans.Ended()); n != 1 {
		t.Errorf("%d spans ended, want the request's alone", n)
	}
}

// The idempotency spans are children of the request's span, and the request's span gets the outcome.
func TestIdempotencySpansUnderTheRequestSpan(t *testing.T) {
	h := newHarness(t, nil)
	m, err := idempotency.New(&idempotency.Options{Hooks: h.tel.Idempotency()})
	if err != nil {
		t.Fatal(err)
	}
	tracer := h.tel.tracer
	handler := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, span := tracer.Start(r.Context(), "insert order")
		span.End()
		w.WriteHeader(http.StatusCreated)
	}))
	for _, body := range []string{`{"n":1}`, `{"n":1}`} {
		ctx, span := tracer.Start(context.Background(), "POST /v1/orders")
		handler.ServeHTTP(httptest.NewRecorder(), idemRequest("k1", body).WithContext(ctx))
		span.End()
	}
	roots := h.ended("POST /v1/orders")
	if len(roots) != 2 {
		t.Fatalf("%d request spans", len(roots))
	}
	outcome := func(i int) string {
		for _, kv := range roots[i].Attributes() {
			if kv.Key == keyIdemOutcome {
				return kv.Value.AsString()
			}
		}
		return ""
	}
	if outcome(0) != "executed" || outcome(1) != "replayed" {
		t.Errorf("outcomes on the request spans: %q, %q", outcome(0), outcome(1))
	}
	for _, name := range []string{"idempotency.claim", "idempotency.handler", "idempotency.complete"} {
		spans := h.ended(name)
		want := 1
		if name == "idempotency.claim" {
			want = 2
		}
		if len(spans) != want {
			t.Fatalf("%d %s spans, want %d", len(spans), name, want)
		}
		for _, s := range spans {
			if s.Parent().SpanID() != roots[0].SpanContext().SpanID() && s.Parent().SpanID() != roots[1].SpanContext().SpanID() {
				t.Errorf("%s is not a child of a request span", name)
			}
		}
	}
	inner := h.ended("insert order")
	if len(inner) != 1 || inner[0].Parent().SpanID() != h.ended("idempotency.handler")[0].SpanContext().SpanID() {
		t.Errorf("the handler's own span is not a child of idempotency.handler")
	}

	// Without a recording request span, no span is made.
	idemSpans := func() (n int) {
		for _, s := range h.spans.Ended() {
			if strings.HasPrefix(s.Name(), "idempotency.") {
				n++
			}
		}
		return n
	}
	before := idemSpans()
	handler.ServeHTTP(httptest.NewRecorder(), idemRequest("k2", `{}`))
	if after := idemSpans(); after != before {
		t.Errorf("%d idempotency spans made for an untraced request", after-before)
	}
}

// benchIdempotency serves distinct keys through the middleware with hooks (nil: none).
func benchIdempotency(b *testing.B, hooks *idempotency.Hooks) {
	m, err := idempotency.New(&idempotency.Options{Hooks: hooks, Store: memstore.New(&memstore.Options{MaxRecords: 1 << 22, MaxRecordsPerScope: 1 << 22})})
	if err != nil {
		b.Fatal(err)
	}
	handler := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	r := idemRequest("k", "")
	r.Body = http.NoBody
	w := &nopWriter{h: http.Header{}}
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r.Header.Set(idempotency.HeaderKey, keys[i%len(keys)]+strconv.Itoa(i/len(keys)))
		handler.ServeHTTP(w, r)
	}
}

type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkIdempotency: an executed request (claim, handler, complete) on the memory store, without
// hooks and with otelconv's hooks reporting metrics to the SDK (traces off: no span is recording).
func BenchmarkIdempotency(b *testing.B) {
	b.Run("hooks=none", func(b *testing.B) { benchIdempotency(b, nil) })
	b.Run("hooks=otel-metrics", func(b *testing.B) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		defer func() { _ = mp.Shutdown(context.Background()) }()
		tel, err := New(&Options{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider()})
		if err != nil {
			b.Fatal(err)
		}
		benchIdempotency(b, tel.Idempotency())
	})
}
