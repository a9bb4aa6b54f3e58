package versioning_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/versioning"
)

// decisionRecorder keeps every call of its hook.
type decisionRecorder struct {
	mu    sync.Mutex
	calls []versioning.Observation
	ctxs  []context.Context
}

func (o *decisionRecorder) Decided(ctx context.Context, ob versioning.Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, ob)
	o.ctxs = append(o.ctxs, ctx)
}

// hooks returns Hooks that report to o.
func (o *decisionRecorder) hooks() *versioning.Hooks { return &versioning.Hooks{Decided: o.Decided} }

func (o *decisionRecorder) got() []versioning.Observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]versioning.Observation(nil), o.calls...)
}

type obsCtxKey struct{}

// TestHooksOutcomes: every request the router decides is reported exactly once, with its instant,
// version, lifecycle state and outcome; a path that names no answering version never reaches the
// hook as what the client wrote.
func TestHooksOutcomes(t *testing.T) {
	longLicensee := strings.Repeat("l", versioning.MaxLicenseeLen+1)
	cases := []struct {
		name  string
		setup func(e *pinEnv)
		req   request
		want  versioning.Observation
	}{
		{name: "current", req: request{path: "/v3/orders"},
			want: versioning.Observation{Version: "v3", Outcome: versioning.OutcomeServed}},
		{name: "deprecation scheduled, not in force", req: request{path: "/v2/orders"},
			want: versioning.Observation{Version: "v2", Outcome: versioning.OutcomeServed}},
		{name: "deprecated", req: request{path: "/v1/orders"},
			want: versioning.Observation{Version: "v1", Lifecycle: versioning.LifecycleDeprecated, Outcome: versioning.OutcomeServed}},
		{name: "first use pins", req: request{path: "/v3/orders", licensee: "lic_new"},
			want: versioning.Observation{Version: "v3", Outcome: versioning.OutcomeServed, Licensee: "lic_new", Pinned: "v3", PinChanged: true}},
		{name: "pinned deprecated", setup: func(e *pinEnv) { e.pin(t, "lic_a", "v1") }, req: request{path: "/v1/orders", licensee: "lic_a"},
			want: versioning.Observation{Version: "v1", Lifecycle: versioning.LifecycleDeprecated, Outcome: versioning.OutcomeServed, Licensee: "lic_a", Pinned: "v1"}},
		{name: "not enabled", setup: func(e *pinEnv) { e.pin(t, "lic_a", "v1") }, req: request{path: "/v3/orders", licensee: "lic_a"},
			want: versioning.Observation{Version: "v3", Outcome: versioning.OutcomeNotEnabled, Licensee: "lic_a", Pinned: "v1"}},
		{name: "override", setup: func(e *pinEnv) { e.pin(t, "lic_try", "v1") }, req: request{path: "/v2/orders", licensee: "lic_try"},
			want: versioning.Observation{Version: "v2", Outcome: versioning.OutcomeOverride, Licensee: "lic_try", Pinned: "v1"}},
		{name: "sunset", setup: func(e *pinEnv) { e.clk.Set(v1Sunset) }, req: request{path: "/v1/orders", licensee: "lic_a"},
			want: versioning.Observation{At: v1Sunset, Version: "v1", Lifecycle: versioning.LifecycleSunset, Outcome: versioning.OutcomeSunset, Licensee: "lic_a"}},
		{name: "pin store down", setup: func(e *pinEnv) { e.pins.setFail(errStoreDown) }, req: request{path: "/v3/orders", licensee: "lic_b"},
			want: versioning.Observation{Version: "v3", Outcome: versioning.OutcomePinUnavailable, Licensee: "lic_b"}},
		{name: "licensee no store accepts", req: request{path: "/v3/orders", licensee: longLicensee},
			want: versioning.Observation{Version: "v3", Outcome: versioning.OutcomeError, Licensee: longLicensee}},
	}
	unknown := versioning.Observation{Lifecycle: versioning.LifecycleUnknown, Outcome: versioning.OutcomeUnknown}
	// Hostile and mistaken version segments: none of them may reach the hook as written.
	for _, path := range []string{"/v9/orders", "/v0/orders", "/V1/orders", "/v01/orders", "/v1x/orders",
		"/orders", "/", "/v999999999/orders", "/v99999999999999999999/orders", "/sk_live_abc/orders", "/v1%20/orders"} {
		cases = append(cases, struct {
			name  string
			setup func(e *pinEnv)
			req   request
			want  versioning.Observation
		}{name: "unknown " + path, req: request{path: path, licensee: "lic_a"}, want: unknown})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := &decisionRecorder{}
			e := newPinEnv(t, func(o *versioning.Options) {
				o.Hooks = obs.hooks()
				o.AllowOverride = func(_ *http.Request, lic, _, _ string) bool { return lic == "lic_try" }
			})
			if tc.setup != nil {
				tc.setup(e)
			}
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.URL.Path = tc.req.path // set after parsing, so that hostile paths arrive as they are
			if tc.req.licensee != "" {
				r.Header.Set(licenseeHeader, tc.req.licensee)
			}
			r = r.WithContext(context.WithValue(r.Context(), obsCtxKey{}, "mark"))
			w := httptest.NewRecorder()
			e.h.ServeHTTP(w, r)
			if tc.want.At.IsZero() {
				tc.want.At = testNow
			}
			require.Equal(t, []versioning.Observation{tc.want}, obs.got())
			require.Equal(t, "mark", obs.ctxs[0].Value(obsCtxKey{}), "the request's context is passed")
			wantStatus := map[versioning.Outcome]int{
				versioning.OutcomeServed: 200, versioning.OutcomeOverride: 200, versioning.OutcomeUnknown: 404,
				versioning.OutcomeSunset: 410, versioning.OutcomeNotEnabled: 403, versioning.OutcomePinUnavailable: 503,
				versioning.OutcomeError: 500,
			}[tc.want.Outcome]
			require.Equal(t, wantStatus, w.Code)
		})
	}
}

// TestHooksAndUsageCounter: Decide reports like the middleware, and a UsageCounter given the same
// observations counts the registered versions only.
func TestHooksAndUsageCounter(t *testing.T) {
	obs := &decisionRecorder{}
	var usage versioning.UsageCounter
	e := newPinEnv(t, func(o *versioning.Options) {
		o.Hooks = &versioning.Hooks{Decided: func(ctx context.Context, ob versioning.Observation) {
			obs.Decided(ctx, ob)
			usage.Observe(ctx, ob)
		}}
	})
	do(t, e.h, request{path: "/v1/orders"})
	do(t, e.h, request{path: "/v7/orders"})
	_, err := e.rt.Decide(httptest.NewRequest(http.MethodGet, "/v3/orders", nil))
	require.NoError(t, err)
	require.Equal(t, []versioning.Observation{
		{At: testNow, Version: "v1", Lifecycle: versioning.LifecycleDeprecated, Outcome: versioning.OutcomeServed},
		{At: testNow, Lifecycle: versioning.LifecycleUnknown, Outcome: versioning.OutcomeUnknown},
		{At: testNow, Version: "v3", Outcome: versioning.OutcomeServed},
	}, obs.got())
	require.Equal(t, []versioning.UsageRecord{
		{Version: "v1", Requests: 1, Deprecated: 1, FirstSeen: testNow, LastSeen: testNow},
		{Version: "v3", Requests: 1, FirstSeen: testNow, LastSeen: testNow},
	}, usage.Snapshot())
}

// TestHooksMayBeEmpty: Hooks with no field set (as Hooks written before a field was added leave it)
// and a nil *Hooks decide and serve exactly as no Hooks do, on every path of the router: served,
// pinned, refused and unknown, through the middleware and Decide.
func TestHooksMayBeEmpty(t *testing.T) {
	for name, hooks := range map[string]*versioning.Hooks{"nil": nil, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			e := newPinEnv(t, func(o *versioning.Options) { o.Hooks = hooks })
			e.pin(t, "lic_a", "v1")
			for _, tc := range []struct {
				req    request
				status int
			}{
				{request{path: "/v3/orders"}, 200},
				{request{path: "/v1/orders", licensee: "lic_a"}, 200},
				{request{path: "/v3/orders", licensee: "lic_a"}, 403},
				{request{path: "/v9/orders", licensee: "lic_a"}, 404},
			} {
				require.NotPanics(t, func() { require.Equal(t, tc.status, do(t, e.h, tc.req).Code, tc.req.path) })
			}
			require.NotPanics(t, func() {
				_, err := e.rt.Decide(httptest.NewRequest(http.MethodGet, "/v9/orders", nil))
				require.ErrorIs(t, err, versioning.ErrUnknownVersion)
			})
		})
	}
}

// slowPins advances the test clock on every read, as a store round trip would take time.
type slowPins struct {
	versioning.PinStore
	clk *clock
}

func (s slowPins) Get(ctx context.Context, lic string) (versioning.Pin, error) {
	s.clk.Advance(7 * time.Millisecond)
	return s.PinStore.Get(ctx, lic)
}

// TestHooksDuration: the decision's duration is measured with Options.Now and covers the pin store.
func TestHooksDuration(t *testing.T) {
	obs := &decisionRecorder{}
	clk := newClock(testNow)
	rt := must(versioning.New(fixtureRegistry(t), &versioning.Options{Now: clk.Now, Licensee: headerLicensee,
		Pins: slowPins{PinStore: versioning.NewMemoryPinStore(), clk: clk}, Hooks: obs.hooks()}))
	r := httptest.NewRequest(http.MethodGet, "/v3/orders", nil)
	r.Header.Set(licenseeHeader, "lic_slow")
	_, err := rt.Decide(r)
	require.NoError(t, err)
	_, err = rt.Decide(r)
	require.NoError(t, err)
	got := obs.got()
	require.Len(t, got, 2)
	require.Equal(t, 7*time.Millisecond, got[0].Duration, "first use: one read, then the pin is set")
	require.Equal(t, 7*time.Millisecond, got[1].Duration)
	require.True(t, got[0].PinChanged)
	require.False(t, got[1].PinChanged)
}

func TestEnumStrings(t *testing.T) {
	var ls, os []string
	for l := range versioning.LifecycleUnknown + 2 {
		ls = append(ls, l.String())
	}
	for o := range versioning.OutcomeError + 2 {
		os = append(os, o.String())
	}
	require.Equal(t, []string{"current", "deprecated", "sunset", "unknown", "invalid"}, ls, "LifecycleUnknown is the last")
	require.Equal(t, []string{"none", "served", "override", "unknown", "sunset", "not_enabled", "pin_unavailable", "error", "invalid"}, os, "OutcomeError is the last")
	require.Equal(t, "invalid", versioning.Lifecycle(200).String())
	require.Equal(t, "invalid", versioning.Outcome(200).String())
	require.Equal(t, []string{"newest", "requested", "invalid"},
		[]string{versioning.PinNewest.String(), versioning.PinRequested.String(), versioning.FirstUse(7).String()})
	var zero versioning.Observation
	require.Equal(t, versioning.LifecycleCurrent, zero.Lifecycle, "documented zero values")
	require.Equal(t, "none", zero.Outcome.String())
	require.Equal(t, versioning.PinNewest, versioning.Options{}.FirstUse)
}

// nopDecisions counts and allocates nothing.
type nopDecisions struct{ n int }

func (o *nopDecisions) hooks() *versioning.Hooks {
	return &versioning.Hooks{Decided: func(context.Context, versioning.Observation) { o.n++ }}
}

// TestHooksAllocs: the router costs the same allocations with no Hooks, with empty Hooks and with a
// hook that allocates nothing, on served, deprecated, pinned and refused requests.
func TestHooksAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under the race detector")
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	reg := fixtureRegistry(t)
	now := newClock(testNow).Now
	build := func(hooks *versioning.Hooks) http.Handler {
		rt := must(versioning.New(reg, &versioning.Options{Now: now, Licensee: headerLicensee, Hooks: hooks}))
		return rt.Handler(ok)
	}
	nop := &nopDecisions{}
	for _, path := range []string{"/v3/orders", "/v1/orders", "/v9/orders"} {
		for _, lic := range []string{"", "lic_allocs"} {
			r := httptest.NewRequest(http.MethodGet, path, nil)
			r = r.WithContext(apierror.NewRequestIDContext(r.Context(), "req_allocs")) // no random ID per problem
			if lic != "" {
				r.Header.Set(licenseeHeader, lic)
			}
			w := &benchWriter{h: make(http.Header, 8)}
			measure := func(h http.Handler) float64 {
				h.ServeHTTP(w, r) // pins first
				return testing.AllocsPerRun(100, func() { clear(w.h); h.ServeHTTP(w, r) })
			}
			none, empty, with := measure(build(nil)), measure(build(&versioning.Hooks{})), measure(build(nop.hooks()))
			require.Equal(t, none, empty, "%s licensee %q", path, lic)
			require.Equal(t, none, with, "%s licensee %q", path, lic)
		}
	}
	require.Positive(t, nop.n)
}

// BenchmarkRoutingObserved is BenchmarkRouting's newest and pinned cases with a hook that does
// nothing, to compare with nil Hooks.
func BenchmarkRoutingObserved(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	reg := fixtureRegistry(b)
	now := newClock(testNow).Now
	for _, obs := range []*versioning.Hooks{nil, (&nopDecisions{}).hooks()} {
		name := "nil"
		if obs != nil {
			name = "nop"
		}
		b.Run("newest/"+name, func(b *testing.B) {
			rt := must(versioning.New(reg, &versioning.Options{Now: now, Hooks: obs}))
			serveBench(b, rt.Handler(ok), httptest.NewRequest("GET", "/v3/orders", nil))
		})
		b.Run("pinned/"+name, func(b *testing.B) {
			rt := must(versioning.New(reg, &versioning.Options{Now: now, Licensee: headerLicensee, Hooks: obs}))
			r := httptest.NewRequest("GET", "/v3/orders", nil)
			r.Header.Set(licenseeHeader, "lic_bench")
			serveBench(b, rt.Handler(ok), r)
		})
	}
}
