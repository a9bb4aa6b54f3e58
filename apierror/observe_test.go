package apierror_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

// problemRecorder keeps every call of its hooks.
type problemRecorder struct {
	mu    sync.Mutex
	calls []apierror.WrittenProblem
	ctxs  []context.Context
}

func (o *problemRecorder) ProblemWritten(ctx context.Context, p apierror.WrittenProblem) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, p)
	o.ctxs = append(o.ctxs, ctx)
}

// hooks returns Hooks that report to o.
func (o *problemRecorder) hooks() *apierror.Hooks {
	return &apierror.Hooks{ProblemWritten: o.ProblemWritten}
}

func (o *problemRecorder) got() []apierror.WrittenProblem {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]apierror.WrittenProblem(nil), o.calls...)
}

type ctxMark struct{}

// TestHooksWrite: every Write reports exactly one problem, with the status and code that went out.
func TestHooksWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want apierror.WrittenProblem
	}{
		{"validation", apierror.Invalid(apierror.Body("/a", "field_missing", "is required"), apierror.Body("/b", "invalid_enum", "must be x")),
			apierror.WrittenProblem{Status: 400, Code: apierror.CodeValidationFailed, Violations: 2}},
		{"rate limited", apierror.RateLimited(0, ""), apierror.WrittenProblem{Status: 429, Code: apierror.CodeRateLimited}},
		{"wrapped", fmt.Errorf("loading: %w", apierror.NotFound("order_not_found", "no order ord_1")),
			apierror.WrittenProblem{Status: 404, Code: "order_not_found"}},
		{"explicit type", &apierror.Error{Status: 409, Code: "conflict_x", Type: "https://example.com/p/conflict_x", Detail: "d"},
			apierror.WrittenProblem{Status: 409, Code: "conflict_x", Type: "https://example.com/p/conflict_x"}},
		{"plain error", errors.New("db down: password=hunter2"),
			apierror.WrittenProblem{Status: 500, Code: apierror.CodeInternal, Opaque: true}},
		{"nil error", nil, apierror.WrittenProblem{Status: 500, Code: apierror.CodeInternal, Opaque: true}},
		{"success status", &apierror.Error{Status: 200, Code: "ok_really"},
			apierror.WrittenProblem{Status: 500, Code: apierror.CodeInternal, Opaque: true}},
		{"unmarshallable extension", apierror.Invalid(apierror.Body("/a", "x_y", "d")).With("bad", func() {}),
			apierror.WrittenProblem{Status: 500, Code: apierror.CodeInternal, Opaque: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &problemRecorder{}
			wr := apierror.Writer{Hooks: obs.hooks()}
			req := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
			req = req.WithContext(context.WithValue(req.Context(), ctxMark{}, "mark"))
			rec := httptest.NewRecorder()
			wr.Write(rec, req, tc.err)
			require.Equal(t, []apierror.WrittenProblem{tc.want}, obs.got())
			require.Equal(t, tc.want.Status, rec.Code, "the status reported is the one written")
			require.Equal(t, "mark", obs.ctxs[0].Value(ctxMark{}), "the request's context is passed")
		})
	}
}

// TestHooksNilRequest: Write without a request reports with a background context.
func TestHooksNilRequest(t *testing.T) {
	obs := &problemRecorder{}
	apierror.Writer{Hooks: obs.hooks()}.Write(httptest.NewRecorder(), nil, apierror.RateLimited(0, ""))
	require.Equal(t, []apierror.WrittenProblem{{Status: 429, Code: apierror.CodeRateLimited}}, obs.got())
	require.NotNil(t, obs.ctxs[0])
}

// TestHooksFromHandler: the Hooks installed with Writer.Handler see every problem written below it,
// by a zero Writer, the package-level Write, Recover and ServeMux, exactly once each; a Writer with
// Hooks of its own reports to those only.
func TestHooksFromHandler(t *testing.T) {
	service := &problemRecorder{}
	own := &problemRecorder{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /zero", func(w http.ResponseWriter, r *http.Request) {
		apierror.Writer{TypeBase: "https://pkg.example/p/"}.Write(w, r, apierror.Conflict("state_conflict", "busy"))
	})
	mux.HandleFunc("GET /package", func(w http.ResponseWriter, r *http.Request) {
		apierror.Write(w, r, apierror.RateLimited(0, ""))
	})
	mux.HandleFunc("GET /own", func(w http.ResponseWriter, r *http.Request) {
		apierror.Writer{Hooks: own.hooks()}.Write(w, r, apierror.RateLimited(0, ""))
	})
	mux.HandleFunc("GET /panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
	problems := apierror.Writer{Hooks: service.hooks()}
	h := apierror.WithRequestID(problems.Handler(apierror.Writer{}.Recover(apierror.Writer{}.ServeMux(mux))))
	for _, tc := range []struct {
		method, path string
		want         apierror.WrittenProblem
		toOwn        bool
	}{
		{"GET", "/zero", apierror.WrittenProblem{Status: 409, Code: "state_conflict"}, false},
		{"GET", "/package", apierror.WrittenProblem{Status: 429, Code: apierror.CodeRateLimited}, false},
		{"GET", "/own", apierror.WrittenProblem{Status: 429, Code: apierror.CodeRateLimited}, true},
		{"GET", "/panic", apierror.WrittenProblem{Status: 500, Code: apierror.CodeInternal, Opaque: true}, false},
		{"GET", "/nowhere", apierror.WrittenProblem{Status: 404, Code: apierror.CodeRouteNotFound, Violations: 1}, false},
		{"POST", "/zero", apierror.WrittenProblem{Status: 405, Code: apierror.CodeMethodNotAllowed, Violations: 1}, false},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			service.calls, own.calls = nil, nil
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			require.Equal(t, tc.want.Status, rec.Code)
			want, other := service, own
			if tc.toOwn {
				want, other = own, service
			}
			require.Equal(t, []apierror.WrittenProblem{tc.want}, want.got())
			require.Empty(t, other.got())
		})
	}
}

// TestHooksMayBeEmpty: Hooks with no field set (as Hooks written before a field was added leave it)
// and a nil *Hooks write the same problem and call nothing, alone or installed with Writer.Handler;
// a Writer's own empty Hooks are its own, so it reports nowhere, not to the Writer in the context.
func TestHooksMayBeEmpty(t *testing.T) {
	service := &problemRecorder{}
	for name, hooks := range map[string]*apierror.Hooks{"nil": nil, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			require.NotPanics(t, func() {
				apierror.Writer{Hooks: hooks}.Write(rec, httptest.NewRequest(http.MethodGet, "/", nil), apierror.RateLimited(0, ""))
			})
			require.Equal(t, http.StatusTooManyRequests, rec.Code)
			require.NotPanics(t, func() { apierror.Writer{Hooks: hooks}.Write(httptest.NewRecorder(), nil, errors.New("boom")) })

			rec = httptest.NewRecorder()
			inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { apierror.Write(w, r, apierror.RateLimited(0, "")) })
			require.NotPanics(t, func() {
				apierror.Writer{Hooks: hooks}.Handler(inner).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			})
			require.Equal(t, http.StatusTooManyRequests, rec.Code)

			service.calls = nil
			own := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				apierror.Writer{Hooks: hooks}.Write(w, r, apierror.RateLimited(0, ""))
			})
			apierror.Writer{Hooks: service.hooks()}.Handler(own).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
			if hooks == nil {
				require.Len(t, service.got(), 1, "a Writer without Hooks takes the context's")
			} else {
				require.Empty(t, service.got(), "a Writer's own Hooks, even empty, win")
			}
		})
	}
}

// nopHooks counts and allocates nothing.
type nopHooks struct{ n int }

func (o *nopHooks) hooks() *apierror.Hooks {
	return &apierror.Hooks{ProblemWritten: func(context.Context, apierror.WrittenProblem) { o.n++ }}
}

// TestHooksAllocs: writing a problem costs the same allocations with no Hooks, with empty Hooks and
// with a hook that allocates nothing: the hook itself is free, and the nil check is all a Writer
// without one pays.
func TestHooksAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under the race detector")
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
	req = req.WithContext(apierror.NewRequestIDContext(req.Context(), "req_allocs"))
	w := &discardWriter{h: make(http.Header, 4)}
	p := apierror.Invalid(apierror.Body("/a", "field_missing", "is required"))
	measure := func(wr apierror.Writer) float64 {
		return testing.AllocsPerRun(200, func() { clear(w.h); wr.Write(w, req, p) })
	}
	none := measure(apierror.Writer{})
	nop := &nopHooks{}
	hooks := nop.hooks()
	with := measure(apierror.Writer{Hooks: hooks})
	require.Equal(t, none, with)
	require.Equal(t, none, measure(apierror.Writer{Hooks: &apierror.Hooks{}}))
	require.Positive(t, nop.n)
	// Through the service's Writer in the context too.
	ctxReq := req.WithContext(context.WithValue(req.Context(), ctxMark{}, 1))
	var inCtx float64
	apierror.Writer{Hooks: hooks}.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		inCtx = testing.AllocsPerRun(200, func() { clear(w.h); apierror.Writer{}.Write(w, r, p) })
	})).ServeHTTP(w, ctxReq)
	require.Equal(t, none, inCtx)
}

// BenchmarkWriteObserved is BenchmarkWrite400TwoViolations with a hook that does nothing.
func BenchmarkWriteObserved(b *testing.B) {
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
	req = req.WithContext(apierror.NewRequestIDContext(req.Context(), "req_bench"))
	w := &discardWriter{h: make(http.Header, 4)}
	wr := apierror.Writer{Hooks: (&nopHooks{}).hooks()}
	b.ReportAllocs()
	for b.Loop() {
		wr.Write(w, req, apierror.Invalid(
			apierror.Body("/account", "field_missing", "is required"),
			apierror.Body("/side", "invalid_enum", "must be one of buy, sell"),
		))
	}
}
