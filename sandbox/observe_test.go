package sandbox

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
)

// recordingObserver is a fake Observer that keeps every call.
type recordingObserver struct {
	mu     sync.Mutex
	auths  []AuthObservation
	limits []LimitObservation
}

func (o *recordingObserver) Authenticated(_ context.Context, a AuthObservation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.auths = append(o.auths, a)
}

func (o *recordingObserver) LimitChecked(_ context.Context, l LimitObservation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.limits = append(o.limits, l)
}

// resolverFunc adapts a function to Resolver.
type resolverFunc func(ctx context.Context, k Key) (Principal, error)

func (f resolverFunc) Resolve(ctx context.Context, k Key) (Principal, error) { return f(ctx, k) }

// TestObserverAuthentication: every authentication is reported exactly once with its result and the
// key's environment, hostile credentials included; no observation holds the key.
func TestObserverAuthentication(t *testing.T) {
	clk := newClock()
	iss := must(NewIssuer(nil, &IssuerOptions{Now: clk.Now, SandboxTTL: time.Hour}))
	expired := issue(t, iss, "lic_a", Sandbox)
	clk.Advance(2 * time.Hour)
	revoked := issue(t, iss, "lic_a", Sandbox)
	require.NoError(t, iss.Revoke(context.Background(), revoked.KeyID))
	live := issue(t, iss, "lic_a", Live).APIKey
	sandbox := issue(t, iss, "lic_a", Sandbox).APIKey
	unknown := must(NewKey(Live)).Reveal()
	typo := sandbox[:len(sandbox)-1] + map[bool]string{true: "b", false: "a"}[sandbox[len(sandbox)-1] == 'a']
	relabelled := "sk_live_" + strings.TrimPrefix(sandbox, "sk_sandbox_") // a sandbox key passed off as production
	forged := "sk_live_" + strings.Repeat("a", 40)                        // the right shape, made up

	tests := []struct {
		name     string
		resolver Resolver
		header   string // "" sends none
		want     AuthObservation
		status   int
	}{
		{"live ok", nil, "Bearer " + live, AuthObservation{Result: AuthOK, Environment: Live, Licensee: "lic_a"}, 200},
		{"sandbox ok", nil, "Bearer " + sandbox, AuthObservation{Result: AuthOK, Environment: Sandbox, Licensee: "lic_a"}, 200},
		{"missing", nil, "", AuthObservation{Result: AuthMissing}, 401},
		{"basic", nil, "Basic dXNlcjpwYXNz", AuthObservation{Result: AuthScheme}, 401},
		{"bare key", nil, live, AuthObservation{Result: AuthScheme}, 401},
		{"scheme only", nil, "Bearer", AuthObservation{Result: AuthMalformed}, 401},
		{"not a key", nil, "Bearer hunter2-my-password", AuthObservation{Result: AuthMalformed}, 401},
		{"forged", nil, "Bearer " + forged, AuthObservation{Result: AuthChecksum}, 401},
		{"typo", nil, "Bearer " + typo, AuthObservation{Result: AuthChecksum}, 401},
		{"relabelled environment", nil, "Bearer " + relabelled, AuthObservation{Result: AuthChecksum}, 401},
		{"unknown", nil, "Bearer " + unknown, AuthObservation{Result: AuthUnknown, Environment: Live}, 401},
		{"expired", nil, "Bearer " + expired.APIKey, AuthObservation{Result: AuthExpired, Environment: Sandbox}, 401},
		{"revoked", nil, "Bearer " + revoked.APIKey, AuthObservation{Result: AuthRevoked, Environment: Sandbox}, 401},
		{"resolver down", resolverFunc(func(context.Context, Key) (Principal, error) { return Principal{}, errStoreDown }),
			"Bearer " + live, AuthObservation{Result: AuthUnavailable, Environment: Live}, 503},
		{"resolver answers for the other environment", resolverFunc(func(context.Context, Key) (Principal, error) {
			return Principal{Licensee: "lic_a", Environment: Sandbox}, nil
		}), "Bearer " + live, AuthObservation{Result: AuthEnvironmentMismatch, Environment: Live}, 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recordingObserver{}
			var res Resolver = iss
			if tc.resolver != nil {
				res = tc.resolver
			}
			auth := must(NewAuthenticator(res, &AuthOptions{Observer: obs}))
			r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			rec := httptest.NewRecorder()
			auth.Handler(echoPrincipal).ServeHTTP(rec, r)
			require.Equal(t, tc.status, rec.Code)
			require.Len(t, obs.auths, 1)
			got := obs.auths[0]
			require.GreaterOrEqual(t, got.Duration, time.Duration(0))
			got.Duration = 0
			require.Equal(t, tc.want, got)
			require.Empty(t, obs.limits)
		})
	}
}

// TestObserverRateLimit: every check is reported once, with the principal's environment and licensee
// and never the key; a burst of 5 over a bucket of 3 is 3 allowed and 2 refused.
func TestObserverRateLimit(t *testing.T) {
	clk := newClock()
	livePrincipal := Principal{Licensee: "lic_live", Environment: Live}
	sandboxPrincipal := Principal{Licensee: "lic_box", Environment: Sandbox}
	live := LimitObservation{Environment: Live, Licensee: "lic_live"}
	with := func(o LimitObservation, res LimitResult, retry time.Duration) LimitObservation {
		o.Result, o.RetryAfter = res, retry
		return o
	}
	tests := []struct {
		name       string
		limiter    Limiter
		key        KeyFunc
		failClosed bool
		principal  *Principal
		requests   int
		want       []LimitObservation
		statuses   []int
	}{
		{name: "burst over the limit", principal: &livePrincipal, requests: 5,
			want:     []LimitObservation{live, live, live, with(live, LimitRefused, time.Second), with(live, LimitRefused, time.Second)},
			statuses: []int{200, 200, 200, 429, 429}},
		{name: "sandbox has no ceiling", principal: &sandboxPrincipal, requests: 5,
			want: []LimitObservation{
				{Result: LimitExempt, Environment: Sandbox, Licensee: "lic_box"}, {Result: LimitExempt, Environment: Sandbox, Licensee: "lic_box"},
				{Result: LimitExempt, Environment: Sandbox, Licensee: "lic_box"}, {Result: LimitExempt, Environment: Sandbox, Licensee: "lic_box"},
				{Result: LimitExempt, Environment: Sandbox, Licensee: "lic_box"}},
			statuses: []int{200, 200, 200, 200, 200}},
		{name: "no principal", requests: 1, want: []LimitObservation{{Result: LimitNoKey}}, statuses: []int{500}},
		{name: "key hook refuses", requests: 1, principal: &livePrincipal,
			key:  func(*http.Request) (string, error) { return "", apierror.Unauthenticated("who_are_you", "no account") },
			want: []LimitObservation{with(live, LimitNoKey, 0)}, statuses: []int{401}},
		{name: "limiter down, open", limiter: failingLimiter{}, principal: &livePrincipal, requests: 1,
			want: []LimitObservation{with(live, LimitFailedOpen, 0)}, statuses: []int{200}},
		{name: "limiter down, closed", limiter: failingLimiter{}, failClosed: true, principal: &livePrincipal, requests: 1,
			want: []LimitObservation{with(live, LimitFailedClosed, 0)}, statuses: []int{503}},
		{name: "own key without principal", requests: 2,
			key:  func(*http.Request) (string, error) { return "user_7", nil },
			want: []LimitObservation{{}, {}}, statuses: []int{200, 200}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recordingObserver{}
			l := tc.limiter
			if l == nil {
				l = must(NewTokenBucket(1, 3, nil))
			}
			rl := must(NewRateLimit(l, &RateLimitOptions{Now: clk.Now, Key: tc.key, FailClosed: tc.failClosed, Observer: obs}))
			ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
			var statuses []int
			for range tc.requests {
				r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
				if tc.principal != nil {
					r = r.WithContext(NewContext(r.Context(), *tc.principal))
				}
				rec := httptest.NewRecorder()
				rl.Handler(ok).ServeHTTP(rec, r)
				statuses = append(statuses, rec.Code)
			}
			require.Equal(t, tc.statuses, statuses)
			require.Equal(t, tc.want, obs.limits)
			require.Empty(t, obs.auths)
		})
	}
}

// TestObserverChain: behind the Authenticator, a forged key never reaches the rate limit, and the
// observer sees each decision once.
func TestObserverChain(t *testing.T) {
	obs := &recordingObserver{}
	iss := must(NewIssuer(nil, nil))
	live := issue(t, iss, "lic_a", Live).APIKey
	auth := must(NewAuthenticator(iss, &AuthOptions{Observer: obs}))
	rl := must(NewRateLimit(must(NewTokenBucket(0, 1, nil)), &RateLimitOptions{Observer: obs}))
	h := auth.Handler(rl.Handler(echoPrincipal))
	require.Equal(t, 200, do(t, h, "GET", "/v1/orders", live, "").Code)
	require.Equal(t, 429, do(t, h, "GET", "/v1/orders", live, "").Code)
	require.Equal(t, 401, do(t, h, "GET", "/v1/orders", "sk_live_"+strings.Repeat("b", 40), "").Code)
	results := func() (a []AuthResult, l []LimitResult) {
		for _, o := range obs.auths {
			a = append(a, o.Result)
		}
		for _, o := range obs.limits {
			l = append(l, o.Result)
		}
		return a, l
	}
	a, l := results()
	require.Equal(t, []AuthResult{AuthOK, AuthOK, AuthChecksum}, a)
	require.Equal(t, []LimitResult{LimitAllowed, LimitRefused}, l)
}

func TestResultStrings(t *testing.T) {
	var as, ls []string
	for r := range NumAuthResults {
		as = append(as, AuthResult(r).String())
	}
	for r := range NumLimitResults {
		ls = append(ls, LimitResult(r).String())
	}
	require.Equal(t, []string{"ok", "missing", "scheme_unsupported", "malformed", "checksum_mismatch", "unknown",
		"expired", "revoked", "unavailable", "environment_mismatch"}, as)
	require.Equal(t, []string{"allowed", "exempt", "refused", "no_key", "failed_open", "failed_closed"}, ls)
	require.Equal(t, "invalid", AuthResult(99).String())
	require.Equal(t, "invalid", LimitResult(99).String())
}

// nopObserver counts and allocates nothing.
type nopObserver struct{ n int }

func (o *nopObserver) Authenticated(context.Context, AuthObservation) { o.n++ }
func (o *nopObserver) LimitChecked(context.Context, LimitObservation) { o.n++ }

// TestObserverAllocs: authentication and rate limiting cost the same allocations with no Observer as
// with one that allocates nothing.
func TestObserverAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under the race detector")
	}
	iss := must(NewIssuer(nil, nil))
	live := issue(t, iss, "lic_a", Live).APIKey
	nop := &nopObserver{}
	for _, header := range []string{"Bearer " + live, "Bearer " + must(NewKey(Live)).Reveal(), "", "Bearer nope"} {
		r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		measure := func(a *Authenticator) float64 {
			return testing.AllocsPerRun(100, func() { _, _ = a.Authenticate(r) })
		}
		none := measure(must(NewAuthenticator(iss, nil)))
		with := measure(must(NewAuthenticator(iss, &AuthOptions{Observer: nop})))
		require.Equal(t, none, with, header)
	}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, env := range []Environment{Sandbox, Live} {
		for _, perSecond := range []float64{1e9, 0} { // admitted, then refused
			r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
			r = r.WithContext(NewContext(r.Context(), Principal{Licensee: "lic_a", Environment: env}))
			measure := func(obs Observer) float64 {
				rl := must(NewRateLimit(must(NewTokenBucket(perSecond, 1, nil)), &RateLimitOptions{Now: clock, Observer: obs}))
				_ = rl.Check(r) // takes the one token
				return testing.AllocsPerRun(100, func() { _ = rl.Check(r) })
			}
			none, with := measure(nil), measure(nop)
			require.Equal(t, none, with, "%s %v", env, perSecond)
		}
	}
	require.Positive(t, nop.n)
}

// BenchmarkObserved: Authenticate and Check with an Observer that does nothing, against none.
func BenchmarkObserved(b *testing.B) {
	iss := must(NewIssuer(nil, nil))
	c, _ := iss.Issue(context.Background(), Evaluation{Licensee: "lic_a", Environment: Live})
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, obs := range []Observer{nil, &nopObserver{}} {
		name := "nil"
		if obs != nil {
			name = "nop"
		}
		b.Run("Authenticate/"+name, func(b *testing.B) {
			auth := must(NewAuthenticator(iss, &AuthOptions{Observer: obs}))
			r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
			r.Header.Set("Authorization", "Bearer "+c.APIKey)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := auth.Authenticate(r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Check/"+name, func(b *testing.B) {
			rl := must(NewRateLimit(must(NewTokenBucket(1e9, 1e9, nil)), &RateLimitOptions{Now: func() time.Time { return now }, Observer: obs}))
			r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
			r = r.WithContext(NewContext(r.Context(), Principal{Licensee: "lic_a", Environment: Live}))
			b.ReportAllocs()
			for b.Loop() {
				if err := rl.Check(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
