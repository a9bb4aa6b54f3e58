package ratelimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions"
	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
)

// recorder keeps every observation it is given.
type recorder struct {
	mu     sync.Mutex
	limits []Observation
}

func (o *recorder) Checked(_ context.Context, l Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.limits = append(o.limits, l)
}

// hooks returns Hooks that report to o.
func (o *recorder) hooks() *Hooks { return &Hooks{Checked: o.Checked} }

// limitCase is one path through the Middleware: the requests sent, what the Hooks are told of each
// and the statuses answered.
type limitCase struct {
	name       string
	limiter    Limiter                // nil means a bucket of 3 refilling once a second
	key        conventions.CallerFunc // nil means apikey.RateLimitKey
	failClosed bool
	principal  *apikey.Principal
	requests   int
	want       []Observation
	statuses   []int
}

// limitCases returns a path for every Outcome.
func limitCases() []limitCase {
	livePrincipal := apikey.Principal{Licensee: "lic_live", Environment: apikey.Live}
	sandboxPrincipal := apikey.Principal{Licensee: "lic_box", Environment: apikey.Sandbox}
	allowed, exempt := Observation{Outcome: OutcomeAllowed}, Observation{Outcome: OutcomeExempt}
	return []limitCase{
		{name: "burst over the limit", principal: &livePrincipal, requests: 5,
			want: []Observation{allowed, allowed, allowed,
				{Outcome: OutcomeRefused, RetryAfter: time.Second}, {Outcome: OutcomeRefused, RetryAfter: time.Second}},
			statuses: []int{200, 200, 200, 429, 429}},
		{name: "sandbox has no ceiling", principal: &sandboxPrincipal, requests: 5,
			want:     []Observation{exempt, exempt, exempt, exempt, exempt},
			statuses: []int{200, 200, 200, 200, 200}},
		{name: "no principal", requests: 1, want: []Observation{{Outcome: OutcomeNoKey}}, statuses: []int{500}},
		{name: "key hook refuses", requests: 1, principal: &livePrincipal,
			key:  func(*http.Request) (string, error) { return "", apierror.Unauthenticated("who_are_you", "no account") },
			want: []Observation{{Outcome: OutcomeNoKey}}, statuses: []int{401}},
		{name: "limiter down, open", limiter: failingLimiter{}, principal: &livePrincipal, requests: 1,
			want: []Observation{{Outcome: OutcomeFailedOpen}}, statuses: []int{200}},
		{name: "limiter down, closed", limiter: failingLimiter{}, failClosed: true, principal: &livePrincipal, requests: 1,
			want: []Observation{{Outcome: OutcomeFailedClosed}}, statuses: []int{503}},
		{name: "own key without principal", requests: 2,
			key:  func(*http.Request) (string, error) { return "user_7", nil },
			want: []Observation{allowed, allowed}, statuses: []int{200, 200}},
	}
}

// serve sends tc's requests through the Handler of a Middleware built with hooks, on a clock that
// does not move; it checks the statuses and returns the responses.
func (tc limitCase) serve(t *testing.T, hooks *Hooks) []*httptest.ResponseRecorder {
	t.Helper()
	clk := newClock()
	l := tc.limiter
	if l == nil {
		l = must(NewTokenBucket(1, 3, nil))
	}
	key := tc.key
	if key == nil {
		key = apikey.RateLimitKey
	}
	rl := must(New(l, key, &Options{Now: clk.Now, FailClosed: tc.failClosed, Hooks: hooks}))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	var statuses []int
	var recs []*httptest.ResponseRecorder
	for range tc.requests {
		r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
		if tc.principal != nil {
			r = r.WithContext(apikey.NewContext(r.Context(), *tc.principal))
		}
		rec := httptest.NewRecorder()
		rl.Handler(ok).ServeHTTP(rec, r)
		statuses = append(statuses, rec.Code)
		recs = append(recs, rec)
	}
	require.Equal(t, tc.statuses, statuses)
	return recs
}

// TestHooksRateLimit: every check is reported once, with its outcome and never the key; a burst of 5
// over a bucket of 3 is 3 allowed and 2 refused.
func TestHooksRateLimit(t *testing.T) {
	for _, tc := range limitCases() {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recorder{}
			tc.serve(t, obs.hooks())
			require.Equal(t, tc.want, obs.limits)
		})
	}
}

// TestHooksNilAndEmpty: a Middleware with a nil *Hooks or with Hooks that set no field (as Hooks
// written before a field was added leave it) answers every path as one with a hook does, without
// calling anything, and Hooks whose one field is set see each path's outcomes.
func TestHooksNilAndEmpty(t *testing.T) {
	for _, tc := range limitCases() {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recorder{}
			with := tc.serve(t, &Hooks{Checked: obs.Checked})
			require.Len(t, obs.limits, len(tc.want))
			var outcomes, want []Outcome
			for i := range tc.want {
				outcomes, want = append(outcomes, obs.limits[i].Outcome), append(want, tc.want[i].Outcome)
			}
			require.Equal(t, want, outcomes)
			for name, hooks := range map[string]*Hooks{"nil": nil, "empty": {}} {
				for i, rec := range tc.serve(t, hooks) {
					require.Equal(t, with[i].Header().Get("Retry-After"), rec.Header().Get("Retry-After"), name)
					require.Equal(t, with[i].Body.Len() > 0, rec.Body.Len() > 0, name)
				}
			}
			require.Len(t, obs.limits, len(tc.want), "only the Middleware given the hook reports")
		})
	}
}

func TestOutcomeStrings(t *testing.T) {
	var ls []string
	for o := Outcome(1); o <= OutcomeFailedClosed; o++ {
		ls = append(ls, o.String())
	}
	require.Equal(t, []string{"allowed", "exempt", "refused", "no_key", "failed_open", "failed_closed"}, ls)
	require.Equal(t, "", Outcome(0).String(), "the zero Outcome is no outcome")
	require.Equal(t, "invalid", (OutcomeFailedClosed + 1).String())
	require.Equal(t, "invalid", Outcome(99).String())
}

// nopHooks counts and allocates nothing.
type nopHooks struct{ n int }

func (o *nopHooks) Checked(context.Context, Observation) { o.n++ }

func (o *nopHooks) hooks() *Hooks { return &Hooks{Checked: o.Checked} }

// TestHooksAllocs: rate limiting costs the same allocations with no Hooks, with empty Hooks and with
// a hook that allocates nothing.
func TestHooksAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under the race detector")
	}
	nop := &nopHooks{}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, env := range []apikey.Environment{apikey.Sandbox, apikey.Live} {
		for _, perSecond := range []float64{1e9, 0} { // admitted, then refused
			r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
			r = r.WithContext(apikey.NewContext(r.Context(), apikey.Principal{Licensee: "lic_a", Environment: env}))
			measure := func(hooks *Hooks) float64 {
				rl := must(New(must(NewTokenBucket(perSecond, 1, nil)), apikey.RateLimitKey, &Options{Now: clock, Hooks: hooks}))
				_ = rl.Check(r) // takes the one token
				return testing.AllocsPerRun(100, func() { _ = rl.Check(r) })
			}
			none, empty, with := measure(nil), measure(&Hooks{}), measure(nop.hooks())
			require.Equal(t, none, empty, "%s %v", env, perSecond)
			require.Equal(t, none, with, "%s %v", env, perSecond)
		}
	}
	require.Positive(t, nop.n)
}

// BenchmarkObserved: Check with a hook that does nothing, against none.
func BenchmarkObserved(b *testing.B) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, hooks := range []*Hooks{nil, (&nopHooks{}).hooks()} {
		name := "nil"
		if hooks != nil {
			name = "nop"
		}
		b.Run("Check/"+name, func(b *testing.B) {
			rl := must(New(must(NewTokenBucket(1e9, 1e9, nil)), apikey.RateLimitKey, &Options{Now: func() time.Time { return now }, Hooks: hooks}))
			r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
			r = r.WithContext(apikey.NewContext(r.Context(), apikey.Principal{Licensee: "lic_a", Environment: apikey.Live}))
			b.ReportAllocs()
			for b.Loop() {
				if err := rl.Check(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
