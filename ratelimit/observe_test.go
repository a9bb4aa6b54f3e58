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

// recordingObserver is a fake Observer that keeps every call.
type recordingObserver struct {
	mu     sync.Mutex
	limits []Observation
}

func (o *recordingObserver) Checked(_ context.Context, l Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.limits = append(o.limits, l)
}

// TestObserverRateLimit: every check is reported once, with its outcome and never the key; a burst of
// 5 over a bucket of 3 is 3 allowed and 2 refused.
func TestObserverRateLimit(t *testing.T) {
	clk := newClock()
	livePrincipal := apikey.Principal{Licensee: "lic_live", Environment: apikey.Live}
	sandboxPrincipal := apikey.Principal{Licensee: "lic_box", Environment: apikey.Sandbox}
	allowed, exempt := Observation{Outcome: OutcomeAllowed}, Observation{Outcome: OutcomeExempt}
	tests := []struct {
		name       string
		limiter    Limiter
		key        conventions.CallerFunc // nil means apikey.RateLimitKey
		failClosed bool
		principal  *apikey.Principal
		requests   int
		want       []Observation
		statuses   []int
	}{
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
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recordingObserver{}
			l := tc.limiter
			if l == nil {
				l = must(NewTokenBucket(1, 3, nil))
			}
			key := tc.key
			if key == nil {
				key = apikey.RateLimitKey
			}
			rl := must(New(l, key, &Options{Now: clk.Now, FailClosed: tc.failClosed, Observer: obs}))
			ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
			var statuses []int
			for range tc.requests {
				r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
				if tc.principal != nil {
					r = r.WithContext(apikey.NewContext(r.Context(), *tc.principal))
				}
				rec := httptest.NewRecorder()
				rl.Handler(ok).ServeHTTP(rec, r)
				statuses = append(statuses, rec.Code)
			}
			require.Equal(t, tc.statuses, statuses)
			require.Equal(t, tc.want, obs.limits)
		})
	}
}

func TestOutcomeStrings(t *testing.T) {
	var ls []string
	for o := Outcome(1); o < NumOutcomes; o++ {
		ls = append(ls, o.String())
	}
	require.Equal(t, []string{"allowed", "exempt", "refused", "no_key", "failed_open", "failed_closed"}, ls)
	require.Equal(t, "", Outcome(0).String(), "the zero Outcome is no outcome")
	require.Equal(t, "invalid", Outcome(99).String())
}

// nopObserver counts and allocates nothing.
type nopObserver struct{ n int }

func (o *nopObserver) Checked(context.Context, Observation) { o.n++ }

// TestObserverAllocs: rate limiting costs the same allocations with no Observer as with one that
// allocates nothing.
func TestObserverAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under the race detector")
	}
	nop := &nopObserver{}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, env := range []apikey.Environment{apikey.Sandbox, apikey.Live} {
		for _, perSecond := range []float64{1e9, 0} { // admitted, then refused
			r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
			r = r.WithContext(apikey.NewContext(r.Context(), apikey.Principal{Licensee: "lic_a", Environment: env}))
			measure := func(obs Observer) float64 {
				rl := must(New(must(NewTokenBucket(perSecond, 1, nil)), apikey.RateLimitKey, &Options{Now: clock, Observer: obs}))
				_ = rl.Check(r) // takes the one token
				return testing.AllocsPerRun(100, func() { _ = rl.Check(r) })
			}
			none, with := measure(nil), measure(nop)
			require.Equal(t, none, with, "%s %v", env, perSecond)
		}
	}
	require.Positive(t, nop.n)
}

// BenchmarkObserved: Check with an Observer that does nothing, against none.
func BenchmarkObserved(b *testing.B) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, obs := range []Observer{nil, &nopObserver{}} {
		name := "nil"
		if obs != nil {
			name = "nop"
		}
		b.Run("Check/"+name, func(b *testing.B) {
			rl := must(New(must(NewTokenBucket(1e9, 1e9, nil)), apikey.RateLimitKey, &Options{Now: func() time.Time { return now }, Observer: obs}))
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
