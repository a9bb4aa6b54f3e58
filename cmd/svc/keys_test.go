package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
)

// newKeysAPI serves the keys API as the reference server does — apikey.KeysHandler behind the
// Authenticator, each route behind its permission, the mutations behind the idempotency middleware
// (without a Sealer, so a replayed secret's body is omitted) — under /v1, and returns its URL and a
// full key of one licensee.
func newKeysAPI(t *testing.T) (url, fullKey string) {
	t.Helper()
	iss, err := apikey.NewIssuer(nil, &apikey.IssuerOptions{Permissions: []string{"api_keys:read", "api_keys:write", "orders:read", "orders:write"}})
	require.NoError(t, err)
	auth, err := apikey.NewAuthenticator(iss, nil)
	require.NoError(t, err)
	keys, err := apikey.NewKeysHandler(iss, nil)
	require.NoError(t, err)
	idem, err := idempotency.New(&idempotency.Options{Scope: apikey.RequestScope})
	require.NoError(t, err)
	inner := http.NewServeMux()
	keys.Register(inner, "v1", idem.Handler)
	mux := http.NewServeMux()
	mux.Handle("GET /v1/api_keys", auth.Require("api_keys:read", inner))
	mux.Handle("GET /v1/api_keys/{id}", auth.Require("api_keys:read", inner))
	mux.Handle("/v1/api_keys", auth.Require("api_keys:write", inner))
	mux.Handle("/v1/api_keys/", auth.Require("api_keys:write", inner))
	srv := httptest.NewServer(auth.Handler(mux))
	t.Cleanup(srv.Close)
	creds, err := iss.Issue(context.Background(), apikey.Evaluation{Licensee: "lic_keys"})
	require.NoError(t, err)
	return srv.URL, creds.APIKey
}

var (
	keyCreated = regexp.MustCompile(`(?m)^API key (key_[a-z2-7]+) (created|rolled from key_[a-z2-7]+)`)
	keySecret  = regexp.MustCompile(`secret +(sk_sandbox_[a-z2-7]{40}) +\(shown once: store it now; it cannot be shown again\)`)
)

// TestKeysLifecycle drives keys through every command against the real handler: create (restricted
// and not), list and get without a secret, roll with an overlap and without, and revoke.
func TestKeysLifecycle(t *testing.T) {
	base, full := newKeysAPI(t)
	vars := map[string]string{envAPIKey: full, envBaseURL: base}

	r := runSvc(t, vars, "", "keys", "create", "--permission", "orders:write", "--permission", "api_keys:read,api_keys:write")
	require.Equal(t, exitOK, r.code, r.stderr)
	m := keyCreated.FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	id := m[1]
	sm := keySecret.FindStringSubmatch(r.stdout)
	require.NotNil(t, sm, r.stdout)
	secret := sm[1]
	require.Contains(t, r.stdout, "permissions  api_keys:read, api_keys:write, orders:write\n")
	require.Contains(t, r.stdout, "last used    never")
	require.Contains(t, r.stderr, "store the new API key's secret now", "the warning")

	t.Run("list and get never show a secret", func(t *testing.T) {
		r := runSvc(t, vars, "", "keys", "list")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Regexp(t, `^ID +PERMISSIONS +CREATED +ENDS +LAST USED\n`, r.stdout)
		require.Contains(t, r.stdout, id+"  api_keys:read, api_keys:write, orders:write")
		require.Contains(t, r.stdout, "all (the full key)")
		require.NotContains(t, r.stdout, "sk_")

		r = runSvc(t, vars, "", "keys", "list", "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.NotContains(t, r.stdout, "sk_")
		var list struct{ Data []map[string]any }
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
		require.Len(t, list.Data, 2)

		r = runSvc(t, vars, "", "keys", "get", id)
		require.Equal(t, exitOK, r.code, r.stderr)
		require.True(t, strings.HasPrefix(r.stdout, "API key "+id+"\n"), r.stdout)
		require.Contains(t, r.stdout, "environment  sandbox\n")
		require.Contains(t, r.stdout, "ends         "+time.Now().UTC().Format("2006-"), "a sandbox key expires")
		require.NotContains(t, r.stdout, "sk_")
	})
	t.Run("the new key works, within its permissions", func(t *testing.T) {
		mine := map[string]string{envAPIKey: secret, envBaseURL: base}
		r := runSvc(t, mine, "", "keys", "get", id)
		require.Equal(t, exitOK, r.code, r.stderr)
		r = runSvc(t, mine, "", "keys", "create")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "permissions  api_keys:read, api_keys:write, orders:write\n", "like the key that asks")
		r = runSvc(t, mine, "", "keys", "create", "--permission", "orders:read,orders:write")
		require.Equal(t, exitOK, r.code, r.stderr)
		r = runSvc(t, mine, "", "keys", "create", "--permission", "api_keys:write", "--permission", "events:read")
		require.Equal(t, exitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, "400 Bad Request")
		require.Contains(t, r.stderr, "body /permissions/1")
	})
	t.Run("roll: a new key, the old one working until --expires-in", func(t *testing.T) {
		r := runSvc(t, vars, "", "keys", "roll", id, "--expires-in", "1h")
		require.Equal(t, exitOK, r.code, r.stderr)
		m := keyCreated.FindStringSubmatch(r.stdout)
		require.NotNil(t, m, r.stdout)
		require.Equal(t, "rolled from "+id, m[2])
		next := m[1]
		require.NotEqual(t, id, next)
		require.Regexp(t, `secret +sk_sandbox_`, r.stdout)
		until := regexp.MustCompile(`old key +` + id + ` works until (\S+) +\(deploy the new key before then\)`).FindStringSubmatch(r.stdout)
		require.NotNil(t, until, r.stdout)
		at, err := time.Parse(time.RFC3339, until[1])
		require.NoError(t, err)
		require.WithinDuration(t, time.Now().Add(time.Hour), at, time.Minute)
		require.Contains(t, r.stderr, "store the new API key's secret now")
		require.Equal(t, exitOK, runSvc(t, map[string]string{envAPIKey: secret, envBaseURL: base}, "", "keys", "list").code,
			"the old key works until then")

		r = runSvc(t, vars, "", "keys", "roll", id)
		require.Equal(t, exitRefused, r.code)
		require.Contains(t, r.stderr, "422 Unprocessable Entity (api_key_ending)")

		r = runSvc(t, vars, "", "keys", "roll", next, "--expires-in", "0s", "--export")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Regexp(t, `^export SVC_API_KEY='sk_sandbox_[a-z2-7]{40}'\n$`, r.stdout)
		r = runSvc(t, vars, "", "keys", "roll", m[1], "--json")
		require.Equal(t, exitRefused, r.code, "rolled already")

		r = runSvc(t, vars, "", "keys", "create", "--permission", "orders:read")
		third := keyCreated.FindStringSubmatch(r.stdout)[1]
		r = runSvc(t, vars, "", "keys", "roll", third, "--expires-in", "0s")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Regexp(t, `old key +`+third+` no longer works`, r.stdout)
	})
	t.Run("revoke ends the key at once", func(t *testing.T) {
		r := runSvc(t, vars, "", "keys", "create", "--permission", "api_keys:read")
		victim := keyCreated.FindStringSubmatch(r.stdout)[1]
		victimSecret := keySecret.FindStringSubmatch(r.stdout)[1]
		r = runSvc(t, vars, "", "keys", "revoke", victim)
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "API key "+victim+" revoked: it authenticates nothing from now on\n")
		r = runSvc(t, map[string]string{envAPIKey: victimSecret, envBaseURL: base}, "", "keys", "list")
		require.Equal(t, exitRefused, r.code)
		require.Contains(t, r.stderr, "401 Unauthorized (api_key_invalid)")
		r = runSvc(t, vars, "", "keys", "get", "key_nobody")
		require.Equal(t, exitRefused, r.code)
		require.Contains(t, r.stderr, "404 Not Found (api_key_not_found)")
	})
}

// A replayed create or roll cannot show the secret again, and says what to do instead.
func TestKeysReplay(t *testing.T) {
	base, full := newKeysAPI(t)
	vars := map[string]string{envAPIKey: full, envBaseURL: base}
	r := runSvc(t, vars, "", "keys", "create", "--idempotency-key", "create-once")
	require.Equal(t, exitOK, r.code, r.stderr)
	id := keyCreated.FindStringSubmatch(r.stdout)[1]
	r = runSvc(t, vars, "", "keys", "create", "--idempotency-key", "create-once")
	require.NotEqual(t, exitOK, r.code)
	require.Contains(t, r.stderr, "the key was created by the first request with Idempotency-Key create-once, but the server does not keep answers that carry a secret")
	require.Contains(t, r.stderr, "revoke it ('svc keys revoke "+id+"')")
	require.Empty(t, r.stdout)

	r = runSvc(t, vars, "", "keys", "roll", id, "--idempotency-key", "roll-once")
	require.Equal(t, exitOK, r.code, r.stderr)
	next := keyCreated.FindStringSubmatch(r.stdout)[1]
	r = runSvc(t, vars, "", "keys", "roll", id, "--idempotency-key", "roll-once")
	require.NotEqual(t, exitOK, r.code)
	require.Contains(t, r.stderr, id+" was rolled by the first request with Idempotency-Key roll-once")
	require.Contains(t, r.stderr, "revoke the new key ("+next+")")
}

// Mistakes on the command line are refused before any request.
func TestKeysUsageErrors(t *testing.T) {
	var requests atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	defer api.Close()
	vars := map[string]string{envAPIKey: testKey, envBaseURL: api.URL}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"get without an ID", []string{"keys", "get"}, "the key's ID is required"},
		{"revoke: an ID that is not one", []string{"keys", "revoke", "key_../../orders"}, "is not an API key ID"},
		{"roll: an ID of another kind", []string{"keys", "roll", "we_abc"}, "is not an API key ID"},
		{"two IDs", []string{"keys", "get", "key_a", "key_b"}, `unexpected argument "key_b"`},
		{"a permission without an action", []string{"keys", "create", "--permission", "orders"}, `"orders" is not a permission`},
		{"a permission with another action", []string{"keys", "create", "--permission", "orders:delete"}, `"orders:delete" is not a permission`},
		{"roll: a negative --expires-in", []string{"keys", "roll", "key_a", "--expires-in", "-1h"}, "--expires-in -1h0m0s must be whole seconds, 0s or more"},
		{"roll: a fraction of a second", []string{"keys", "roll", "key_a", "--expires-in", "1500ms"}, "must be whole seconds"},
		{"list takes no argument", []string{"keys", "list", "key_a"}, `unexpected argument "key_a"`},
		{"a secret on the command line", []string{"keys", "create", "--key", "sk_sandbox_x"}, "there is no -key flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runSvc(t, vars, "", tc.args...)
			require.Equal(t, exitUsage, r.code, r.stderr)
			require.Contains(t, r.stderr, tc.want)
		})
	}
	require.Zero(t, requests.Load())
}
