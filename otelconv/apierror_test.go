package otelconv

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/svcplatform/conventions/apierror"
)

// TestProblemMetrics: the hooks on the service's Writer counts every problem written below it, by
// status and code, whichever Writer wrote it; explicit types and opaque 500s are marked.
func TestProblemMetrics(t *testing.T) {
	h := newHarness(t, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /conflict", func(w http.ResponseWriter, r *http.Request) {
		apierror.Write(w, r, apierror.Conflict("order_locked", "the order is being changed"))
	})
	mux.HandleFunc("GET /typed", func(w http.ResponseWriter, r *http.Request) {
		apierror.Writer{TypeBase: "https://pkg.example/p/"}.Write(w, r, &apierror.Error{
			Status: 402, Code: "payment_required", Type: "https://example.com/problems/payment", Detail: "pay first"})
	})
	mux.HandleFunc("GET /bug", func(w http.ResponseWriter, r *http.Request) {
		apierror.Write(w, r, errors.New("nil pointer somewhere"))
	})
	problems := apierror.Writer{Hooks: h.tel.APIError()}
	svc := apierror.WithRequestID(problems.Handler(problems.ServeMux(mux)))
	for _, path := range []string{"/conflict", "/conflict", "/typed", "/bug", "/nowhere", "/nowhere", "/nowhere"} {
		svc.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
	}
	svc.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/conflict", nil))
	const name = "svc.apierror.problems"
	for _, c := range []struct {
		want  int64
		attrs []attribute.KeyValue
	}{
		{2, []attribute.KeyValue{attrStatus.Int(409), attrCode.String("order_locked")}},
		{1, []attribute.KeyValue{attrStatus.Int(402), attrCode.String("payment_required"), attrType.String("https://example.com/problems/payment")}},
		{1, []attribute.KeyValue{attrStatus.Int(500), attrCode.String(apierror.CodeInternal), attrOpaque.Bool(true)}},
		{3, []attribute.KeyValue{attrStatus.Int(404), attrCode.String(apierror.CodeRouteNotFound)}},
		{1, []attribute.KeyValue{attrStatus.Int(405), attrCode.String(apierror.CodeMethodNotAllowed)}},
		{8, nil},
	} {
		if got := h.sum(t, name, c.attrs...); got != c.want {
			t.Errorf("%s%v = %d, want %d", name, c.attrs, got, c.want)
		}
	}
	for _, set := range h.attributeSets(t, name) {
		if v, _ := set.Value(attrCode); v.AsString() == "order_locked" && (set.HasValue(attrType) || set.HasValue(attrOpaque)) {
			t.Errorf("a plain problem carries %v", set)
		}
	}
}

// TestProblemKindsBounded: past maxProblemKinds distinct kinds, problems are counted as _OTHER with
// their status, and nothing is lost; concurrent first sightings are safe.
func TestProblemKindsBounded(t *testing.T) {
	h := newHarness(t, nil)
	o := h.tel.APIError()
	const extra = 40
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < maxProblemKinds+extra; i += 4 {
				o.ProblemWritten(context.Background(), apierror.WrittenProblem{Status: 400, Code: "code_" + strconv.Itoa(i)})
			}
		})
	}
	wg.Wait()
	const name = "svc.apierror.problems"
	if got := h.sum(t, name); got != maxProblemKinds+extra {
		t.Errorf("total %d", got)
	}
	if got := h.sum(t, name, attrStatus.Int(400), attrCode.String(otherValue)); got != extra {
		t.Errorf("_OTHER = %d, want %d", got, extra)
	}
	if got := len(h.attributeSets(t, name)); got != maxProblemKinds+1 {
		t.Errorf("%d series, want %d", got, maxProblemKinds+1)
	}
}

// TestAccessorsOfNilTelemetry: a nil or zero *Telemetry hands out nil hooks, which the core packages
// treat as none.
func TestAccessorsOfNilTelemetry(t *testing.T) {
	for name, tel := range map[string]*Telemetry{"nil": nil, "zero": {}} {
		if tel.APIError() != nil || tel.Versioning() != nil || tel.APIKey() != nil || tel.RateLimit() != nil || tel.Idempotency() != nil ||
			tel.Webhook() != nil || tel.Producer() != nil {
			t.Errorf("a %s Telemetry returned non-nil hooks", name)
		}
	}
	if _, err := (&Telemetry{}).ObserveBacklog(nil); err == nil {
		t.Error("a zero Telemetry registered a backlog callback")
	}
	if _, err := newHarness(t, nil).tel.ObserveBacklog(nil); err == nil {
		t.Error("ObserveBacklog took a nil source")
	}
	var tel *Telemetry
	if tel.MeterProvider() != nil || tel.TracerProvider() != nil || tel.Propagator() != nil {
		t.Error("a nil Telemetry returned a provider")
	}
}

// BenchmarkProblemObserved is writing a 429 problem with no hooks and with the otelconv hooks on
// the service's Writer, found through the request context as every package's Writer finds it.
func BenchmarkProblemObserved(b *testing.B) {
	for _, observed := range []bool{false, true} {
		name := "nil"
		var service apierror.Writer
		if observed {
			name = "otel"
			service.Hooks = newHarness(b, nil).tel.APIError()
		}
		b.Run(name, func(b *testing.B) {
			var inner http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b.ReportAllocs()
				for b.Loop() {
					clear(w.Header())
					apierror.Writer{}.Write(w, r, apierror.RateLimited(0, ""))
				}
			})
			r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
			r = r.WithContext(apierror.NewRequestIDContext(r.Context(), "req_bench"))
			service.Handler(inner).ServeHTTP(&discard{h: make(http.Header, 8)}, r)
		})
	}
}

// BenchmarkProblemWritten is the hook's own cost per problem.
func BenchmarkProblemWritten(b *testing.B) {
	o := newHarness(b, nil).tel.APIError()
	ctx := context.Background()
	p := apierror.WrittenProblem{Status: 429, Code: apierror.CodeRateLimited}
	b.ReportAllocs()
	for b.Loop() {
		o.ProblemWritten(ctx, p)
	}
}
