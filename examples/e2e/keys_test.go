package e2e

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/internal/testenv"
)

// The tests in this file drive the keys API and restricted keys on the real servers: every
// documented answer of /api_keys, a restricted key let in and refused, a roll whose old key stops,
// and — on PostgreSQL — both replicas agreeing on what a roll ended.

// createAPIKey creates a key with the key by, restricted to perms (none: a key like by's), and
// returns the answer: the key, with its secret.
func createAPIKey(t *testing.T, base, by string, perms ...string) map[string]any {
	t.Helper()
	body := `{}`
	if len(perms) > 0 {
		b, err := json.Marshal(map[string]any{"permissions": perms})
		require.NoError(t, err)
		body = string(b)
	}
	k := request{Method: "POST", URL: base + "/v1/api_keys", Auth: bearer(by), Key: newKey(), Body: body}.do(t).
		expectJSON(t, http.StatusCreated)
	require.True(t, strings.HasPrefix(k["secret"].(string), "sk_"), "%v", k)
	return k
}

// expectPermissionDenied checks a 403 permission_denied located at the Authorization header and
// naming the permission the route requires.
func expectPermissionDenied(t *testing.T, r response, permission string) {
	t.Helper()
	p := r.expectProblem(t, http.StatusForbidden, "permission_denied")
	require.True(t, locates(p, "header", "Authorization"), "%s", r.Body)
	require.Equal(t, permission, p["required_permission"])
	require.Contains(t, p["detail"], permission)
}

// TestAPIKeys runs a licensee's keys through the keys API: create (with a replay that does not
// show the secret again), list and get without any secret, the refusals, revoke, and roll.
func TestAPIKeys(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	admin := issueCredentials(t, srv) // a licensee of its own, with its full key
	u := func(path string) string { return srv.URL + "/v1" + path }

	idem := newKey()
	create := request{Method: "POST", URL: u("/api_keys"), Auth: bearer(admin), Key: idem, Body: `{"permissions":["orders:read","webhook_endpoints:write"]}`}
	first := create.do(t)
	k := first.expectJSON(t, http.StatusCreated)
	id, secret := k["id"].(string), k["secret"].(string)
	require.Equal(t, "/v1/api_keys/"+id, first.Header.Get("Location"))
	require.Equal(t, "no-store", first.Header.Get("Cache-Control"))
	require.Equal(t, []any{"orders:read", "webhook_endpoints:write"}, k["permissions"])
	require.Equal(t, true, k["restricted"])
	require.Equal(t, "sandbox", k["environment"])

	t.Run("a replay does not show the secret again", func(t *testing.T) {
		again := create.do(t)
		require.Equal(t, http.StatusCreated, again.Status)
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		require.Equal(t, "true", again.Header.Get("Idempotent-Body-Omitted"))
		require.Empty(t, again.Body)
		require.Equal(t, first.Header.Get("Location"), again.Header.Get("Location"))
	})
	t.Run("list and get never show a secret", func(t *testing.T) {
		l := request{Method: "GET", URL: u("/api_keys"), Auth: bearer(admin)}.do(t)
		list := l.expectJSON(t, http.StatusOK)
		require.Len(t, list["data"], 2, "the licensee's full key and the new one")
		require.NotContains(t, string(l.Body), "sk_sandbox_")
		g := request{Method: "GET", URL: u("/api_keys/" + id), Auth: bearer(secret)}.do(t)
		require.Equal(t, http.StatusForbidden, g.Status, "this key lacks api_keys:read")
		g = request{Method: "GET", URL: u("/api_keys/" + id), Auth: bearer(admin)}.do(t)
		got := g.expectJSON(t, http.StatusOK)
		require.NotContains(t, got, "secret")
		require.NotContains(t, string(g.Body), secret)
	})
	t.Run("a restricted key is let in and refused", func(t *testing.T) {
		request{Method: "GET", URL: u("/orders/ord_x"), Auth: bearer(secret)}.do(t).expectProblem(t, http.StatusNotFound, "order_not_found")
		expectPermissionDenied(t, request{Method: "POST", URL: u("/orders"), Auth: bearer(secret), Key: newKey(), Body: orderBody}.do(t), "orders:write")
		ep := request{Method: "POST", URL: u("/webhook_endpoints"), Auth: bearer(secret), Key: newKey(), Body: `{"url":"` + unreachable + `"}`}.
			do(t).expectJSON(t, http.StatusCreated)
		expectPermissionDenied(t, request{Method: "GET", URL: u("/webhook_endpoints/" + ep["id"].(string) + "/events?from=1"), Auth: bearer(secret)}.do(t),
			"events:read")
		expectPermissionDenied(t, request{Method: "POST", URL: u("/sandbox/events"), Auth: bearer(secret), Key: newKey(), Body: `{}`}.do(t), "sandbox:write")
		expectPermissionDenied(t, request{Method: "DELETE", URL: u("/api_keys/" + id), Auth: bearer(secret), Key: newKey()}.do(t), "api_keys:write")
		// A key with api_keys:write hands out only what it has.
		manager := createAPIKey(t, srv.URL, admin, "api_keys:write", "orders:read")
		p := request{Method: "POST", URL: u("/api_keys"), Auth: bearer(manager["secret"].(string)), Key: newKey(), Body: `{"permissions":["orders:write"]}`}.
			do(t).expectProblem(t, http.StatusForbidden, "permission_denied")
		require.True(t, locates(p, "body", "/permissions/0"), "%v", p)
		request{Method: "POST", URL: u("/api_keys/" + id + "/roll"), Auth: bearer(manager["secret"].(string)), Key: newKey()}.do(t).
			expectProblem(t, http.StatusForbidden, "permission_denied")
	})
	t.Run("refusals", func(t *testing.T) {
		p := request{Method: "POST", URL: u("/api_keys"), Auth: bearer(admin), Key: newKey(), Body: `{"permissions":["orders:delete"]}`}.do(t).
			expectProblem(t, http.StatusBadRequest, "invalid_permission")
		require.True(t, locates(p, "body", "/permissions/0"))
		request{Method: "POST", URL: u("/api_keys"), Auth: bearer(admin), Body: `{}`}.do(t).expectProblem(t, http.StatusBadRequest, "idempotency_key_missing")
		request{Method: "GET", URL: u("/api_keys"), Auth: ""}.do(t).expectProblem(t, http.StatusUnauthorized, "api_key_missing")
		request{Method: "GET", URL: u("/api_keys/key_nobody"), Auth: bearer(admin)}.do(t).expectProblem(t, http.StatusNotFound, "api_key_not_found")
		request{Method: "POST", URL: u("/api_keys/" + id + "/roll"), Auth: bearer(admin), Key: newKey(), Body: `{"expires_in":604801}`}.do(t).
			expectProblem(t, http.StatusBadRequest, "out_of_range")
		// Another licensee's key is the same 404 as an unknown one.
		other := issueCredentials(t, srv)
		for _, rq := range []request{
			{Method: "GET", URL: u("/api_keys/" + id), Auth: bearer(other)},
			{Method: "DELETE", URL: u("/api_keys/" + id), Auth: bearer(other), Key: newKey()},
			{Method: "POST", URL: u("/api_keys/" + id + "/roll"), Auth: bearer(other), Key: newKey()},
		} {
			rq.do(t).expectProblem(t, http.StatusNotFound, "api_key_not_found")
		}
	})
	t.Run("a roll keeps both keys working until expires_in, and the old one not after", func(t *testing.T) {
		works := func(key string) bool {
			r := request{Method: "GET", URL: u("/orders/ord_x"), Auth: bearer(key)}.do(t)
			require.Contains(t, []int{http.StatusNotFound, http.StatusUnauthorized}, r.Status, "%s", r.Body)
			return r.Status == http.StatusNotFound
		}
		r := request{Method: "POST", URL: u("/api_keys/" + id + "/roll"), Auth: bearer(admin), Key: newKey(), Body: `{"expires_in":3600}`}.do(t)
		next := r.expectJSON(t, http.StatusCreated)
		require.Equal(t, k["permissions"], next["permissions"])
		require.Equal(t, id, next["previous_key"].(map[string]any)["id"])
		require.Equal(t, "/v1/api_keys/"+next["id"].(string), r.Header.Get("Location"))
		require.True(t, works(secret), "the old key works until its end")
		require.True(t, works(next["secret"].(string)))
		// A key already set to end is not rolled again: roll the key that replaced it.
		request{Method: "POST", URL: u("/api_keys/" + id + "/roll"), Auth: bearer(admin), Key: newKey()}.do(t).
			expectProblem(t, http.StatusUnprocessableEntity, "api_key_ending")
		// expires_in 0 ends the rolled key at once.
		third := request{Method: "POST", URL: u("/api_keys/" + next["id"].(string) + "/roll"), Auth: bearer(admin), Key: newKey(), Body: `{"expires_in":0}`}.
			do(t).expectJSON(t, http.StatusCreated)
		require.False(t, works(next["secret"].(string)), "refused after expires_in 0")
		require.True(t, works(third["secret"].(string)))
	})
	t.Run("revoke ends a key at once", func(t *testing.T) {
		victim := createAPIKey(t, srv.URL, admin, "orders:read")
		r := request{Method: "DELETE", URL: u("/api_keys/" + victim["id"].(string)), Auth: bearer(admin), Key: newKey()}.do(t)
		revoked := r.expectJSON(t, http.StatusOK)
		require.NotNil(t, revoked["expires_at"])
		request{Method: "GET", URL: u("/orders/ord_x"), Auth: bearer(victim["secret"].(string))}.do(t).
			expectProblem(t, http.StatusUnauthorized, "api_key_invalid")
	})
	t.Run("a production key's restricted key is told nothing of the sandbox", func(t *testing.T) {
		live := createAPIKey(t, srv.URL, srv.LiveKey, "orders:read")
		require.Equal(t, "live", live["environment"])
		request{Method: "POST", URL: u("/sandbox/events"), Auth: bearer(live["secret"].(string)), Key: newKey(), Body: `{}`}.do(t).
			expectProblem(t, http.StatusNotFound, "route_not_found")
	})
}

// TestAPIKeyLimit: a licensee holds at most 100 working keys per environment; the next is 422
// api_key_limit_reached, and revoking one makes room.
func TestAPIKeyLimit(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	admin := issueCredentials(t, srv)
	var last map[string]any
	for range 99 { // the licensee's full key is the first
		last = createAPIKey(t, srv.URL, admin, "orders:read")
	}
	create := request{Method: "POST", URL: srv.URL + "/v1/api_keys", Auth: bearer(admin), Key: newKey(), Body: `{"permissions":["orders:read"]}`}
	create.do(t).expectProblem(t, http.StatusUnprocessableEntity, "api_key_limit_reached")
	request{Method: "DELETE", URL: srv.URL + "/v1/api_keys/" + last["id"].(string), Auth: bearer(admin), Key: newKey()}.do(t).
		expectJSON(t, http.StatusOK)
	// The refusal stored nothing: the same Idempotency-Key now creates the key.
	create.do(t).expectJSON(t, http.StatusCreated)
}

// TestAPIKeysOnPostgresReplicas: on a shared PostgreSQL, a key created on one replica works on the
// other, and a roll with expires_in 0 on one ends the old key on the other too (each replica's
// credential cache is told of the change).
func TestAPIKeysOnPostgresReplicas(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	a := startOrderServerEnv(t, "replica-a", []string{loopbackAllow, postgresEnv(dsn)})
	b := startOrderServerEnv(t, "replica-b", []string{loopbackAllow, postgresEnv(dsn)})
	admin := issueCredentials(t, a)
	k := createAPIKey(t, a.URL, admin, "orders:read")
	secret := k["secret"].(string)
	get := request{Method: "GET", URL: b.URL + "/v1/orders/ord_x", Auth: bearer(secret)}
	get.do(t).expectProblem(t, http.StatusNotFound, "order_not_found") // B knows (and caches) the key
	expectPermissionDenied(t, request{Method: "POST", URL: b.URL + "/v1/orders", Auth: bearer(secret), Key: newKey(), Body: orderBody}.do(t),
		"orders:write")

	next := request{Method: "POST", URL: a.URL + "/v1/api_keys/" + k["id"].(string) + "/roll", Auth: bearer(admin), Key: newKey(),
		Body: `{"expires_in":0}`}.do(t).expectJSON(t, http.StatusCreated)
	eventually(t, startTimeout, func() bool {
		return get.do(t).Status == http.StatusUnauthorized
	}, "replica B refuses the key replica A rolled with expires_in 0")
	request{Method: "GET", URL: b.URL + "/v1/orders/ord_x", Auth: bearer(next["secret"].(string))}.do(t).
		expectProblem(t, http.StatusNotFound, "order_not_found")
	l := request{Method: "GET", URL: b.URL + "/v1/api_keys", Auth: bearer(admin)}.do(t).expectJSON(t, http.StatusOK)
	ids := []any{}
	for _, d := range l["data"].([]any) {
		ids = append(ids, d.(map[string]any)["id"])
	}
	require.Contains(t, ids, next["id"])
	require.NotContains(t, ids, k["id"], "the rolled key ended")
}

// TestSvcKeys drives the real svc's keys commands against the real server: a restricted key created
// (its secret printed once, with the warning), refused outside its permission, listed without its
// secret, and rolled with --expires-in 0s, after which the old key is refused and the new one works.
func TestSvcKeys(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	base := []string{"SVC_BASE_URL=" + srv.URL, "SVC_API_VERSION=v1"}
	admin := append(slices.Clone(base), exports(t, runSvc(t, append(slices.Clone(base), "SVC_ADMIN_TOKEN="+srv.AdminToken), "", "credentials", "new", "--export"))...)

	r := runSvc(t, admin, "", "keys", "create", "--permission", "orders:write")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "store the new API key's secret now")
	m := regexp.MustCompile(`(?m)^API key (key_[a-z2-7]+) created`).FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	id, secret := m[1], regexp.MustCompile(`sk_sandbox_[a-z2-7]{40}`).FindString(r.stdout)
	require.NotEmpty(t, secret, r.stdout)
	restricted := append(slices.Clone(base), "SVC_API_KEY="+secret)

	r = runSvc(t, restricted, "", "orders", "create", "--account", "acc_keys")
	require.Equal(t, 0, r.code, r.stderr)
	r = runSvc(t, restricted, "", "endpoints", "list")
	require.Equal(t, 3, r.code, r.stderr)
	require.Contains(t, r.stderr, "403 Forbidden (permission_denied)")
	require.Contains(t, r.stderr, "webhook_endpoints:read")

	r = runSvc(t, admin, "", "keys", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, id+"  orders:write")
	require.NotContains(t, r.stdout, "sk_")
	r = runSvc(t, admin, "", "keys", "get", id)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "permissions  orders:write\n")

	rolled := append(slices.Clone(base), exports(t, runSvc(t, admin, "", "keys", "roll", id, "--expires-in", "0s", "--export"))...)
	r = runSvc(t, restricted, "", "orders", "create", "--account", "acc_keys")
	require.Equal(t, 3, r.code, "the old key is refused after expires_in 0: %s", r.stderr)
	require.Contains(t, r.stderr, "401 Unauthorized (api_key_invalid)")
	r = runSvc(t, rolled, "", "orders", "create", "--account", "acc_keys")
	require.Equal(t, 0, r.code, r.stderr)
	r = runSvc(t, rolled, "", "endpoints", "list")
	require.Equal(t, 3, r.code, "the new key has the old one's permissions, no more")
}
