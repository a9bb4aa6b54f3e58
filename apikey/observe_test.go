package apikey

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/ratelimit"
)

// recordingObserver is a fake Observer, of both this package and ratelimit, that keeps every call.
type recordingObserver struct {
	mu     sync.Mutex
	auths  []Observation
	limits []ratelimit.Observation
}

func (o *recordingObserver) Authenticated(_ context.Context, a Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.auths = append(o.auths, a)
}

func (o *recordingObserver) Checked(_ context.Context, l ratelimit.Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.limits = append(o.limits, l)
}

// resolverFunc adapts a function to Resolver.
type resolverFunc func(ctx context.Context, k Key) (Principal, error)

func (f resolverFunc) Resolve(ctx context.Context, k Key) (Principal, error) { return f(ctx, k) }

// TestObserverAuthentication: every authentication is reported exactly once with its outcome and the
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
	unknown := must(New(Live)).Reveal()
	typo := sandbox[:len(sandbox)-1] + map[bool]string{true: "b", false: "a"}[sandbox[len(sandbox)-1] == 'a']
	relabelled := "sk_live_" + strings.TrimPrefix(sandbox, "sk_sandbox_") // a sandbox key passed off as production
	forged := "sk_live_" + strings.Repeat("a", 40)                        // the right shape, made up

	tests := []struct {
		name     string
		resolver Resolver
		header   string // "" sends none
		want     Observation
		status   int
	}{
		{"live ok", nil, "Bearer " + live, Observation{Outcome: OutcomeAuthenticated, Environment: Live, Licensee: "lic_a"}, 200},
		{"sandbox ok", nil, "Bearer " + sandbox, Observation{Outcome: OutcomeAuthenticated, Environment: Sandbox, Licensee: "lic_a"}, 200},
		{"missing", nil, "", Observation{Outcome: OutcomeMissing}, 401},
		{"basic", nil, "Basic dXNlcjpwYXNz", Observation{Outcome: OutcomeSchemeUnsupported}, 401},
		{"bare key", nil, live, Observation{Outcome: OutcomeSchemeUnsupported}, 401},
		{"scheme only", nil, "Bearer", Observation{Outcome: OutcomeMalformed}, 401},
		{"not a key", nil, "Bearer hunter2-my-password", Observation{Outcome: OutcomeMalformed}, 401},
		{"forged", nil, "Bearer " + forged, Observation{Outcome: OutcomeChecksumMismatch}, 401},
		{"typo", nil, "Bearer " + typo, Observation{Outcome: OutcomeChecksumMismatch}, 401},
		{"relabelled environment", nil, "Bearer " + relabelled, Observation{Outcome: OutcomeChecksumMismatch}, 401},
		{"unknown", nil, "Bearer " + unknown, Observation{Outcome: OutcomeUnknownKey, Environment: Live}, 401},
		{"expired", nil, "Bearer " + expired.APIKey, Observation{Outcome: OutcomeExpired, Environment: Sandbox}, 401},
		{"revoked", nil, "Bearer " + revoked.APIKey, Observation{Outcome: OutcomeRevoked, Environment: Sandbox}, 401},
		{"resolver down", resolverFunc(func(context.Context, Key) (Principal, error) { return Principal{}, errStoreDown }),
			"Bearer " + live, Observation{Outcome: OutcomeUnavailable, Environment: Live}, 503},
		{"resolver answers for the other environment", resolverFunc(func(context.Context, Key) (Principal, error) {
			return Principal{Licensee: "lic_a", Environment: Sandbox}, nil
		}), "Bearer " + live, Observation{Outcome: OutcomeEnvironmentMismatch, Environment: Live}, 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recordingObserver{}
			var res Resolver = iss
			if tc.resolver != nil {
				res = tc.resolver
			}
			auth := must(NewAuthenticator(res, &AuthenticatorOptions{Observer: obs}))
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

// TestObserverChain: behind the Authenticator, a forged key never reaches the rate limit, and one
// value observing both sees each decision once.
func TestObserverChain(t *testing.T) {
	obs := &recordingObserver{}
	iss := must(NewIssuer(nil, nil))
	live := issue(t, iss, "lic_a", Live).APIKey
	auth := must(NewAuthenticator(iss, &AuthenticatorOptions{Observer: obs}))
	rl := must(ratelimit.New(must(ratelimit.NewTokenBucket(0, 1, nil)), RateLimitKey, &ratelimit.Options{Observer: obs}))
	h := auth.Handler(rl.Handler(echoPrincipal))
	require.Equal(t, 200, do(t, h, "GET", "/v1/orders", live, "").Code)
	require.Equal(t, 429, do(t, h, "GET", "/v1/orders", live, "").Code)
	require.Equal(t, 401, do(t, h, "GET", "/v1/orders", "sk_live_"+strings.Repeat("b", 40), "").Code)
	outcomes := func() (a []Outcome, l []ratelimit.Outcome) {
		for _, o := range obs.auths {
			a = append(a, o.Outcome)
		}
		for _, o := range obs.limits {
			l = append(l, o.Outcome)
		}
		return a, l
	}
	a, l := outcomes()
	require.Equal(t, []Outcome{OutcomeAuthenticated, OutcomeAuthenticated, OutcomeChecksumMismatch}, a)
	require.Equal(t, []ratelimit.Outcome{ratelimit.OutcomeAllowed, ratelimit.OutcomeRefused}, l)
}

func TestOutcomeStrings(t *testing.T) {
	var as []string
	for o := Outcome(1); o < NumOutcomes; o++ {
		as = append(as, o.String())
	}
	require.Equal(t, []string{"ok", "missing", "scheme_unsupported", "malformed", "checksum_mismatch", "unknown",
		"expired", "revoked", "unavailable", "environment_mismatch"}, as)
	require.Equal(t, "", Outcome(0).String(), "the zero Outcome is no outcome")
	require.Equal(t, "invalid", Outcome(99).String())
}

// nopObserver counts and allocates nothing.
type nopObserver struct{ n int }

func (o *nopObserver) Authenticated(context.Context, Observation) { o.n++ }

// TestObserverAllocs: authentication costs the same allocations with no Observer as with one that
// allocates nothing.
func TestObserverAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under the race detector")
	}
	iss := must(NewIssuer(nil, nil))
	live := issue(t, iss, "lic_a", Live).APIKey
	nop := &nopObserver{}
	for _, header := range []string{"Bearer " + live, "Bearer " + must(New(Live)).Reveal(), "", "Bearer nope"} {
		r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		measure := func(a *Authenticator) float64 {
			return testing.AllocsPerRun(100, func() { _, _ = a.Authenticate(r) })
		}
		none := measure(must(NewAuthenticator(iss, nil)))
		with := measure(must(NewAuthenticator(iss, &AuthenticatorOptions{Observer: nop})))
		require.Equal(t, none, with, header)
	}
	require.Positive(t, nop.n)
}

// BenchmarkObserved: Authenticate with an Observer that does nothing, against none.
func BenchmarkObserved(b *testing.B) {
	iss := must(NewIssuer(nil, nil))
	c, _ := iss.Issue(context.Background(), Evaluation{Licensee: "lic_a", Environment: Live})
	for _, obs := range []Observer{nil, &nopObserver{}} {
		name := "nil"
		if obs != nil {
			name = "nop"
		}
		b.Run("Authenticate/"+name, func(b *testing.B) {
			auth := must(NewAuthenticator(iss, &AuthenticatorOptions{Observer: obs}))
			r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
			r.Header.Set("Authorization", "Bearer "+c.APIKey)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := auth.Authenticate(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
