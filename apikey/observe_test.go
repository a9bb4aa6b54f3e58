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

// recorder keeps every observation it is given, of both this package and ratelimit.
type recorder struct {
	mu     sync.Mutex
	auths  []Observation
	limits []ratelimit.Observation
}

func (o *recorder) Authenticated(_ context.Context, a Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.auths = append(o.auths, a)
}

func (o *recorder) Checked(_ context.Context, l ratelimit.Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.limits = append(o.limits, l)
}

// hooks returns Hooks that report to o.
func (o *recorder) hooks() *Hooks { return &Hooks{Authenticated: o.Authenticated} }

// resolverFunc adapts a function to Resolver.
type resolverFunc func(ctx context.Context, k Key) (Principal, error)

func (f resolverFunc) Resolve(ctx context.Context, k Key) (Principal, error) { return f(ctx, k) }

// authCase is one path through the Authenticator: the credentials sent, what the Hooks are told and
// the status answered.
type authCase struct {
	name     string
	resolver Resolver // nil means the Issuer
	header   string   // "" sends none
	want     Observation
	status   int
}

// authCases returns a path for every Outcome, hostile credentials included, and the Issuer they
// resolve with.
func authCases(t *testing.T) (*Issuer, []authCase) {
	t.Helper()
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

	return iss, []authCase{
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
}

// serve sends one request with tc's credentials through an Authenticator built with hooks, to its
// Handler and to Authenticate; it checks both answers and returns the response.
func (tc authCase) serve(t *testing.T, iss *Issuer, hooks *Hooks) *httptest.ResponseRecorder {
	t.Helper()
	var res Resolver = iss
	if tc.resolver != nil {
		res = tc.resolver
	}
	auth := must(NewAuthenticator(res, &AuthenticatorOptions{Hooks: hooks}))
	r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
	if tc.header != "" {
		r.Header.Set("Authorization", tc.header)
	}
	p, err := auth.Authenticate(r)
	require.Equal(t, tc.status == 200, err == nil, "%v", err)
	require.Equal(t, tc.want.Licensee, p.Licensee)
	rec := httptest.NewRecorder()
	auth.Handler(echoPrincipal).ServeHTTP(rec, r)
	require.Equal(t, tc.status, rec.Code)
	return rec
}

// TestHooksAuthentication: every authentication is reported exactly once with its outcome and the
// key's environment, hostile credentials included; no observation holds the key.
func TestHooksAuthentication(t *testing.T) {
	iss, tests := authCases(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recorder{}
			tc.serve(t, iss, obs.hooks())
			require.Len(t, obs.auths, 2) // Authenticate, then the Handler
			for _, got := range obs.auths {
				require.GreaterOrEqual(t, got.Duration, time.Duration(0))
				got.Duration = 0
				require.Equal(t, tc.want, got)
			}
			require.Empty(t, obs.limits)
		})
	}
}

// TestHooksNilAndEmpty: an Authenticator with a nil *Hooks or with Hooks that set no field (as Hooks
// written before a field was added leave it) answers every path as one with a hook does, without
// calling anything, and Hooks whose one field is set see each path's outcome.
func TestHooksNilAndEmpty(t *testing.T) {
	iss, tests := authCases(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recorder{}
			with := tc.serve(t, iss, &Hooks{Authenticated: obs.Authenticated})
			require.Len(t, obs.auths, 2)
			for _, got := range obs.auths {
				require.Equal(t, tc.want.Outcome, got.Outcome)
			}
			for name, hooks := range map[string]*Hooks{"nil": nil, "empty": {}} {
				rec := tc.serve(t, iss, hooks)
				require.Equal(t, with.Header().Get("WWW-Authenticate"), rec.Header().Get("WWW-Authenticate"), name)
				require.Equal(t, with.Header().Get("Retry-After"), rec.Header().Get("Retry-After"), name)
				if tc.status != 200 {
					require.Equal(t, problem(t, with).Code, problem(t, rec).Code, name)
				}
			}
			require.Len(t, obs.auths, 2, "only the Authenticator given the hook reports")
		})
	}
}

// TestHooksChain: behind the Authenticator, a forged key never reaches the rate limit, and one value
// observing both sees each decision once.
func TestHooksChain(t *testing.T) {
	obs := &recorder{}
	iss := must(NewIssuer(nil, nil))
	live := issue(t, iss, "lic_a", Live).APIKey
	auth := must(NewAuthenticator(iss, &AuthenticatorOptions{Hooks: obs.hooks()}))
	rl := must(ratelimit.New(must(ratelimit.NewTokenBucket(0, 1, nil)), RateLimitKey, &ratelimit.Options{Hooks: &ratelimit.Hooks{Checked: obs.Checked}}))
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
	for o := Outcome(1); o <= OutcomeEnvironmentMismatch; o++ {
		as = append(as, o.String())
	}
	require.Equal(t, []string{"ok", "missing", "scheme_unsupported", "malformed", "checksum_mismatch", "unknown",
		"expired", "revoked", "unavailable", "environment_mismatch"}, as)
	require.Equal(t, "", Outcome(0).String(), "the zero Outcome is no outcome")
	require.Equal(t, "invalid", (OutcomeEnvironmentMismatch + 1).String())
	require.Equal(t, "invalid", Outcome(99).String())
}

// nopHooks counts and allocates nothing.
type nopHooks struct{ n int }

func (o *nopHooks) Authenticated(context.Context, Observation) { o.n++ }

func (o *nopHooks) hooks() *Hooks { return &Hooks{Authenticated: o.Authenticated} }

// TestHooksAllocs: authentication costs the same allocations with no Hooks, with empty Hooks and
// with a hook that allocates nothing.
func TestHooksAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under the race detector")
	}
	iss := must(NewIssuer(nil, nil))
	live := issue(t, iss, "lic_a", Live).APIKey
	nop := &nopHooks{}
	for _, header := range []string{"Bearer " + live, "Bearer " + must(New(Live)).Reveal(), "", "Bearer nope"} {
		r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		measure := func(hooks *Hooks) float64 {
			a := must(NewAuthenticator(iss, &AuthenticatorOptions{Hooks: hooks}))
			return testing.AllocsPerRun(100, func() { _, _ = a.Authenticate(r) })
		}
		none, empty, with := measure(nil), measure(&Hooks{}), measure(nop.hooks())
		require.Equal(t, none, empty, header)
		require.Equal(t, none, with, header)
	}
	require.Positive(t, nop.n)
}

// BenchmarkObserved: Authenticate with a hook that does nothing, against none.
func BenchmarkObserved(b *testing.B) {
	iss := must(NewIssuer(nil, nil))
	c, _ := iss.Issue(context.Background(), Evaluation{Licensee: "lic_a", Environment: Live})
	for _, hooks := range []*Hooks{nil, (&nopHooks{}).hooks()} {
		name := "nil"
		if hooks != nil {
			name = "nop"
		}
		b.Run("Authenticate/"+name, func(b *testing.B) {
			auth := must(NewAuthenticator(iss, &AuthenticatorOptions{Hooks: hooks}))
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
