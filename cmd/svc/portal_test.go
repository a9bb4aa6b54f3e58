package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/portal"
)

// newPortalAPI serves POST /v1/portal_sessions as the reference server does — the portal's
// SessionsHandler behind the Authenticator and the idempotency middleware (without a Sealer, so a
// replayed link's body is omitted) — and returns its URL and a sandbox key.
func newPortalAPI(t *testing.T) (base, key string) {
	t.Helper()
	iss, err := apikey.NewIssuer(nil, nil)
	require.NoError(t, err)
	auth, err := apikey.NewAuthenticator(iss, nil)
	require.NoError(t, err)
	idem, err := idempotency.New(&idempotency.Options{Scope: apikey.RequestScope})
	require.NoError(t, err)
	p, err := portal.New(&portal.Options{API: http.NotFoundHandler(), BaseURL: "https://api.example.com/portal"})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/portal_sessions", idem.Handler(p.SessionsHandler(apierror.Writer{})))
	srv := httptest.NewServer(auth.Handler(mux))
	t.Cleanup(srv.Close)
	creds, err := iss.Issue(context.Background(), apikey.Evaluation{Licensee: "lic_portal"})
	require.NoError(t, err)
	return srv.URL, creds.APIKey
}

func TestPortal(t *testing.T) {
	base, key := newPortalAPI(t)
	vars := map[string]string{envAPIKey: key, envBaseURL: base}

	r := runSvc(t, vars, "", "portal")
	require.Equal(t, exitOK, r.code, r.stderr)
	link := strings.TrimSuffix(r.stdout, "\n")
	require.NotContains(t, link, "\n", "only the link is printed on stdout, for $(svc portal)")
	u, err := url.Parse(link)
	require.NoError(t, err)
	require.Equal(t, "https://api.example.com/portal/login", u.Scheme+"://"+u.Host+u.Path)
	require.Len(t, u.Query().Get("token"), 43, "256 random bits")
	require.Contains(t, r.stderr, "a one-time link to the sandbox webhook portal, valid until ")
	require.Contains(t, r.stderr, "share it with no one")

	t.Run("every run mints another link", func(t *testing.T) {
		r := runSvc(t, vars, "", "portal")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.NotEqual(t, r.stdout, link+"\n")
	})
	t.Run("--json prints the server's answer", func(t *testing.T) {
		r := runSvc(t, vars, "", "portal", "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, `"object":"portal_session"`)
		require.Contains(t, r.stdout, `"environment":"sandbox"`)
	})
	t.Run("a replayed key cannot show the link again and says what to do", func(t *testing.T) {
		r := runSvc(t, vars, "", "portal", "--idempotency-key", "portal-once")
		require.Equal(t, exitOK, r.code, r.stderr)
		r = runSvc(t, vars, "", "portal", "--idempotency-key", "portal-once")
		require.NotEqual(t, exitOK, r.code)
		require.Empty(t, r.stdout)
		require.Contains(t, r.stderr, "run 'svc portal' without --idempotency-key for a new one")
	})
	t.Run("a refused key is the server's problem", func(t *testing.T) {
		r := runSvc(t, map[string]string{envAPIKey: "sk_sandbox_" + strings.Repeat("a", 40), envBaseURL: base}, "", "portal")
		require.NotEqual(t, exitOK, r.code)
		require.Empty(t, r.stdout)
		require.Contains(t, r.stderr, "401")
	})
}
