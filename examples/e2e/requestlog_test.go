package e2e

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/internal/testenv"
)

// The tests in this file find requests in the request log of the real server on PostgreSQL, by the
// X-Request-Id their answers carried, and read the log's table with SQL to see that it holds no
// secret.

// findRequest polls GET /v1/requests/{id} with key until the entry is there — the log writes in
// batches, at least once a second — and returns it. Every poll is checked against the document like
// any exchange: a 404 request_not_found until the entry is written.
func findRequest(t *testing.T, base, key, id string) map[string]any {
	t.Helper()
	var entry map[string]any
	eventually(t, deliveryTimeout, func() bool {
		r := request{Method: "GET", URL: base + "/v1/requests/" + id, Auth: bearer(key)}.do(t)
		if r.Status == http.StatusNotFound {
			r.expectProblem(t, http.StatusNotFound, "request_not_found")
			return false
		}
		entry = r.expectJSON(t, http.StatusOK)
		require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
		return true
	}, "request %s in the request log", id)
	return entry
}

// listRequests answers GET /v1/requests with the query q.
func listRequests(t *testing.T, base, key string, q url.Values) (ids []string, hasMore bool) {
	t.Helper()
	l := request{Method: "GET", URL: base + "/v1/requests?" + q.Encode(), Auth: bearer(key)}.do(t).expectJSON(t, http.StatusOK)
	ids = []string{}
	for _, e := range l["data"].([]any) {
		ids = append(ids, e.(map[string]any)["id"].(string))
	}
	return ids, l["has_more"].(bool)
}

// TestRequestLog, on PostgreSQL: a replayed request and a refused one are found by the X-Request-Id
// the client got, with what became of them, and by the list's filters; another licensee is told
// request_not_found; and the log's table, read with SQL, holds no API key, no webhook secret and no
// byte of a request body.
func TestRequestLog(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	srv := startOrderServerEnv(t, "orderserver", []string{loopbackAllow, postgresEnv(dsn)})
	key := issueCredentials(t, srv)
	u := func(path string) string { return srv.URL + "/v1" + path }

	// What must never reach the log: a key's secret (in the answer that created it, and in every
	// Authorization header), a webhook signing secret (in the registration's answer), and the body.
	restricted := createAPIKey(t, srv.URL, key, "orders:read", "requests:read")
	secret := restricted["secret"].(string)
	_, whsec := registerEndpoint(t, srv.URL, key, unreachable)
	const marker = "acc_E2E_BODY_MARKER"
	body := `{"account":"` + marker + `","side":"buy"}`

	idem := newKey()
	first := request{Method: "POST", URL: u("/orders"), Auth: bearer(key), Key: idem, Body: body}.do(t)
	first.expectJSON(t, http.StatusCreated)
	replay := request{Method: "POST", URL: u("/orders"), Auth: bearer(key), Key: idem, Body: body}.do(t)
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	refused := request{Method: "POST", URL: u("/orders"), Auth: bearer(secret), Key: newKey(), Body: body}.do(t)
	expectPermissionDenied(t, refused, "orders:write")
	missing := request{Method: "GET", URL: u("/orders/ord_nobody"), Auth: bearer(secret)}.do(t)
	missing.expectProblem(t, http.StatusNotFound, "order_not_found")
	id := func(r response) string { return r.Header.Get("X-Request-Id") }

	t.Run("a replayed request, by its X-Request-Id", func(t *testing.T) {
		e := findRequest(t, srv.URL, key, id(replay))
		require.Equal(t, id(replay), e["id"])
		require.Equal(t, "request", e["object"])
		require.Equal(t, true, e["replayed"])
		require.Equal(t, float64(http.StatusCreated), e["status"])
		require.Equal(t, "POST /v1/orders", e["route"])
		require.Equal(t, idem, e["idempotency_key"])
		require.Equal(t, "v1", e["version"])
		require.Nil(t, e["code"])
		require.Equal(t, false, findRequest(t, srv.URL, key, id(first))["replayed"])
	})
	t.Run("a refused request, by the request_id of its problem", func(t *testing.T) {
		p := refused.object(t)
		e := findRequest(t, srv.URL, secret, p["request_id"].(string))
		require.Equal(t, "permission_denied", e["code"])
		require.Equal(t, float64(http.StatusForbidden), e["status"])
		require.Equal(t, "POST /v1/orders", e["route"])
		require.Equal(t, restricted["id"], e["api_key"], "the key's ID, never the key")
		require.Equal(t, "order_not_found", findRequest(t, srv.URL, key, id(missing))["code"])
	})
	t.Run("the list's filters", func(t *testing.T) {
		ids, _ := listRequests(t, srv.URL, key, url.Values{"code": {"permission_denied"}})
		require.Equal(t, []string{id(refused)}, ids)
		ids, _ = listRequests(t, srv.URL, key, url.Values{"status": {"4xx"}, "api_key": {restricted["id"].(string)}})
		require.ElementsMatch(t, []string{id(refused), id(missing)}, ids)
		ids, _ = listRequests(t, srv.URL, key, url.Values{"status": {"201"}, "route": {"POST /v1/orders"}})
		require.ElementsMatch(t, []string{id(first), id(replay)}, ids)
		// Newest first, a page at a time.
		page, more := listRequests(t, srv.URL, key, url.Values{"route": {"POST /v1/orders"}, "limit": {"1"}})
		require.True(t, more)
		require.Len(t, page, 1)
		next, _ := listRequests(t, srv.URL, key, url.Values{"route": {"POST /v1/orders"}, "starting_after": {page[0]}})
		require.NotContains(t, next, page[0])
		require.Len(t, append(page, next...), 3, "the order, its replay and the refusal")
		since := url.Values{"since": {"0"}, "until": {"1"}}
		ids, more = listRequests(t, srv.URL, key, since)
		require.Empty(t, ids, "nothing in 1970")
		require.False(t, more)
	})
	t.Run("refusals", func(t *testing.T) {
		p := request{Method: "GET", URL: u("/requests?status=4x4"), Auth: bearer(key)}.do(t).expectProblem(t, http.StatusBadRequest, "invalid_value")
		require.True(t, locates(p, "query", "status"), "%v", p)
		request{Method: "GET", URL: u("/requests/" + id(replay))}.do(t).expectProblem(t, http.StatusUnauthorized, "api_key_missing")
		noLog := createAPIKey(t, srv.URL, key, "orders:read")
		expectPermissionDenied(t, request{Method: "GET", URL: u("/requests"), Auth: bearer(noLog["secret"].(string))}.do(t), "requests:read")
		// Another licensee's request is the same 404 as an unknown one, and absent from its list.
		other := issueCredentials(t, srv)
		for _, rid := range []string{id(replay), "req_nobody"} {
			p := request{Method: "GET", URL: u("/requests/" + rid), Auth: bearer(other)}.do(t).
				expectProblem(t, http.StatusNotFound, "request_not_found")
			require.True(t, locates(p, "path", "request_id"), "%v", p)
		}
		ids, _ := listRequests(t, srv.URL, other, url.Values{"limit": {"100"}})
		require.NotContains(t, ids, id(replay))
	})
	t.Run("the table holds no secret and no body", func(t *testing.T) {
		// Every request above was answered before this one, and the log writes in order: once its
		// entry is there, theirs are too.
		last := request{Method: "GET", URL: u("/orders/ord_last"), Auth: bearer(key)}.do(t)
		findRequest(t, srv.URL, key, id(last))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err)
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, "SELECT r::text FROM request_log r")
		require.NoError(t, err)
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		all := strings.Join(texts, "\n")
		require.Contains(t, all, id(replay), "the table read is the log's")
		require.Contains(t, all, id(refused))
		for _, s := range []string{"sk_sandbox_", "sk_live_", "whsec_", key, secret, whsec, srv.AdminToken, marker, "Bearer"} {
			require.NotContains(t, all, s)
		}
	})
}
