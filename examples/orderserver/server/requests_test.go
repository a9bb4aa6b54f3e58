package server

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/requestlog"
)

// requestEntry is a request as GET /{version}/requests answers it.
type requestEntry struct {
	Object         string  `json:"object"`
	ID             string  `json:"id"`
	APIKey         *string `json:"api_key"`
	Method         string  `json:"method"`
	Route          *string `json:"route"`
	Status         int     `json:"status"`
	Code           *string `json:"code"`
	IdempotencyKey *string `json:"idempotency_key"`
	Replayed       bool    `json:"replayed"`
	Version        *string `json:"version"`
	LatencyMS      int64   `json:"latency_ms"`
	Created        int64   `json:"created"`
}

// flushLog writes what the server's request log holds, as its flusher does every second.
func flushLog(t *testing.T, s *Server) {
	t.Helper()
	require.NoError(t, s.reqlog.Flush(context.Background()))
}

// requestOf reads one request of the key's licensee from the requests API.
func (ts *testServer) requestOf(t *testing.T, key, id string) requestEntry {
	t.Helper()
	w := ts.do("GET", "/v1/requests/"+id, key, "", "")
	require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
	require.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	var e requestEntry
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e))
	return e
}

// requestIDs lists the IDs GET /v1/requests?<query> answers the key.
func (ts *testServer) requestIDs(t *testing.T, key, query string) []string {
	t.Helper()
	w := ts.do("GET", "/v1/requests?"+query, key, "", "")
	require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
	var l struct {
		Data []requestEntry `json:"data"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &l))
	ids := []string{}
	for _, e := range l.Data {
		ids = append(ids, e.ID)
	}
	return ids
}

// TestRequestLog: every request is recorded under the X-Request-Id of its answer — a replay with
// replayed true, a refusal with its problem's code, each with the route it asked for, as documented —
// and each licensee reads its own requests in its own environment only: another's is 404
// request_not_found, as an unknown ID is, and absent from its list.
func TestRequestLog(t *testing.T) {
	clock := newTestClock()
	ts, live := newWebhookServer(t, WebhookOptions{}, clock)
	reader := ts.createKey(t, ts.key, "orders:read", "requests:read")

	order := `{"account":"acc_1","side":"buy"}`
	first := ts.do("POST", "/v1/orders", ts.key, "order-1", order)
	require.Equal(t, http.StatusCreated, first.Code, "%s", first.Body)
	replay := ts.do("POST", "/v1/orders", ts.key, "order-1", order)
	require.Equal(t, "true", replay.Header().Get("Idempotent-Replayed"))
	missing := ts.do("GET", "/v2/orders/ord_nobody", ts.key, "", "")
	expectProblem(t, missing, http.StatusNotFound, CodeOrderNotFound)
	denied := ts.do("POST", "/v1/orders", reader.Secret, "order-2", order)
	expectDenied(t, denied, "orders:write")
	anonymous := ts.do("GET", "/v1/orders/ord_nobody", "", "", "")
	require.Equal(t, http.StatusUnauthorized, anonymous.Code)
	liveOrder := ts.do("POST", "/v1/orders", live, "order-1", order)
	require.Equal(t, http.StatusCreated, liveOrder.Code, "%s", liveOrder.Body)
	flushLog(t, ts.Server)

	id := func(w *httptest.ResponseRecorder) string { return w.Header().Get("X-Request-Id") }
	t.Run("a replay", func(t *testing.T) {
		e := ts.requestOf(t, ts.key, id(replay))
		require.Equal(t, requestEntry{Object: "request", ID: id(replay), APIKey: e.APIKey, Method: "POST",
			Route: ptr("POST /v1/orders"), Status: http.StatusCreated, IdempotencyKey: ptr("order-1"), Replayed: true,
			Version: ptr("v1"), Created: clock.Now().Unix()}, e)
		require.NotNil(t, e.APIKey)
		require.True(t, strings.HasPrefix(*e.APIKey, "key_"), *e.APIKey)
		require.False(t, ts.requestOf(t, ts.key, id(first)).Replayed)
	})
	t.Run("refusals, with their codes", func(t *testing.T) {
		e := ts.requestOf(t, ts.key, id(missing))
		require.Equal(t, ptr(CodeOrderNotFound), e.Code)
		require.Equal(t, ptr("GET /v2/orders/{id}"), e.Route, "the documented path, on the request's version")
		require.Equal(t, ptr("v2"), e.Version)
		e = ts.requestOf(t, reader.Secret, id(denied))
		require.Equal(t, http.StatusForbidden, e.Status)
		require.Equal(t, ptr(apikey.CodePermissionDenied), e.Code)
		require.Equal(t, ptr("POST /v1/orders"), e.Route, "the route it asked for")
		require.Equal(t, ptr(reader.ID), e.APIKey, "the restricted key's ID")
		require.Nil(t, e.IdempotencyKey, "refused before the idempotency middleware read it")
	})
	t.Run("the list's filters", func(t *testing.T) {
		require.ElementsMatch(t, []string{id(denied), id(missing)}, ts.requestIDs(t, ts.key, "status=4xx"))
		require.Equal(t, []string{id(missing)}, ts.requestIDs(t, ts.key, "code="+CodeOrderNotFound))
		require.Equal(t, []string{id(denied)}, ts.requestIDs(t, ts.key, "api_key="+reader.ID))
		require.Subset(t, ts.requestIDs(t, ts.key, "route=POST+/v1/orders"), []string{id(first), id(replay), id(denied)})
	})
	t.Run("another licensee's or environment's request is 404, as an unknown one", func(t *testing.T) {
		ctx := context.Background()
		other, err := ts.IssueCredentials(ctx, apikey.Sandbox)
		require.NoError(t, err)
		for _, key := range []string{other.APIKey, live} {
			for _, rid := range []string{id(replay), id(missing), "req_nobody"} {
				p := expectProblem(t, ts.do("GET", "/v1/requests/"+rid, key, "", ""), http.StatusNotFound, requestlog.CodeRequestNotFound)
				require.Equal(t, "request_id", p.Errors[0].Name)
			}
			require.NotContains(t, ts.requestIDs(t, key, "limit=100"), id(replay))
		}
		require.Contains(t, ts.requestIDs(t, live, ""), id(liveOrder), "the production key reads its own")
		p := expectProblem(t, ts.do("GET", "/v1/requests/"+id(liveOrder), ts.key, "", ""), http.StatusNotFound,
			requestlog.CodeRequestNotFound)
		require.Contains(t, p.Detail, "no request of yours")

		// The same licensee's production key does not read its sandbox's requests, nor the reverse.
		prod, err := ts.issuer.Issue(ctx, apikey.Evaluation{Licensee: other.Licensee, Environment: apikey.Live})
		require.NoError(t, err)
		w := ts.do("GET", "/v1/orders/ord_x", other.APIKey, "", "")
		flushLog(t, ts.Server)
		expectProblem(t, ts.do("GET", "/v1/requests/"+id(w), prod.APIKey, "", ""), http.StatusNotFound, requestlog.CodeRequestNotFound)
		require.Equal(t, http.StatusNotFound, ts.requestOf(t, other.APIKey, id(w)).Status)
	})
	t.Run("an unauthenticated request is nobody's", func(t *testing.T) {
		require.NotContains(t, ts.requestIDs(t, ts.key, "status=401"), id(anonymous))
		e, err := ts.reqlogStore.Get(context.Background(), "", id(anonymous))
		require.NoError(t, err, "recorded, for operators")
		require.Equal(t, "", e.Route, "refused before routing")
	})
	t.Run("the requests API needs requests:read", func(t *testing.T) {
		k := ts.createKey(t, ts.key, "orders:read")
		expectDenied(t, ts.do("GET", "/v1/requests", k.Secret, "", ""), "requests:read")
		expectDenied(t, ts.do("GET", "/v1/requests/"+id(first), k.Secret, "", ""), "requests:read")
	})
	t.Run("a bad parameter is located", func(t *testing.T) {
		p := expectProblem(t, ts.do("GET", "/v1/requests?status=4x4", ts.key, "", ""), http.StatusBadRequest, "invalid_value")
		require.Equal(t, "status", p.Errors[0].Name)
	})
}

// TestRequestLogRoutes: the route recorded is the one that served the request, on its version; a
// route that only refuses, and a sandbox control asked for with a production key (which is told it
// does not exist), record none.
func TestRequestLogRoutes(t *testing.T) {
	ts, live := newWebhookServer(t, WebhookOptions{}, nil)
	for _, tc := range []struct {
		method, path, key, route string
	}{
		{"GET", "/v1/openapi.json", "", "GET /v1/openapi.json"},
		{"POST", "/v1/openapi.json", "", ""}, // 405
		{"POST", "/v1/sandbox/credentials", ts.AdminToken(), "POST /v1/sandbox/credentials"},
		{"POST", "/v1/sandbox/credentials", ts.key, ""}, // not the admin: an unknown route
		{"POST", "/v1/sandbox/events", ts.key, "POST /v1/sandbox/events"},
		{"POST", "/v1/sandbox/events", live, ""},
		{"GET", "/v1/nothing", ts.key, ""},
		{"DELETE", "/v1/orders", ts.key, ""}, // 405
		{"GET", "/v9/orders/ord_x", ts.key, ""},
		{"GET", "/v2/changelog", ts.key, "GET /v2/changelog"},
		{"GET", "/v1/version_pin", ts.key, "GET /v1/version_pin"},
		{"PUT", "/v1/sandbox/webhook_endpoints/we_x/faults", ts.key, "/v1/sandbox/webhook_endpoints/{id}/faults"},
	} {
		body := ""
		if tc.method == "POST" || tc.method == "PUT" {
			body = `{}`
		}
		w := ts.do(tc.method, tc.path, tc.key, ts.nextKey(), body)
		flushLog(t, ts.Server)
		owner := ""
		if tc.key == ts.key || tc.key == live {
			w := ts.do("GET", "/v1/requests/"+w.Header().Get("X-Request-Id"), tc.key, "", "")
			require.Equal(t, http.StatusOK, w.Code, "%s %s: %s", tc.method, tc.path, w.Body)
			var e requestEntry
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e))
			got := ""
			if e.Route != nil {
				got = *e.Route
			}
			require.Equal(t, tc.route, got, "%s %s", tc.method, tc.path)
			continue
		}
		e, err := ts.reqlogStore.Get(context.Background(), owner, w.Header().Get("X-Request-Id"))
		require.NoError(t, err, "%s %s", tc.method, tc.path)
		require.Equal(t, tc.route, e.Route, "%s %s", tc.method, tc.path)
	}
}

// TestRequestLogHoldsNoSecret: the log keeps no API key, webhook secret or body, even where a
// response carried one and where a client put a key where it does not belong (an Idempotency-Key).
func TestRequestLogHoldsNoSecret(t *testing.T) {
	ts, _ := newWebhookServer(t, WebhookOptions{SandboxGuard: loopbackGuard()}, nil)
	const marker = "acc_BODY_MARKER_7q"
	k := ts.createKey(t, ts.key, "orders:write")
	w := ts.do("POST", "/v1/webhook_endpoints", ts.key, ts.nextKey(), `{"url":"http://127.0.0.1:9/hooks"}`)
	require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
	var ep WebhookEndpoint
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &ep))
	require.True(t, strings.HasPrefix(ep.Secret, "whsec_"))
	w = ts.do("POST", "/v1/orders", k.Secret, k.Secret, `{"account":"`+marker+`","side":"buy"}`) // a key as Idempotency-Key
	require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
	keyAsID := w.Header().Get("X-Request-Id")
	ts.do("GET", "/v1/orders/"+ts.key, ts.key, "", "") // a key in the path
	ts.do("GET", "/v1/requests?route="+k.Secret, ts.key, "", "")
	creds := ts.do("POST", "/v1/sandbox/credentials", ts.AdminToken(), ts.nextKey(), "")
	require.Equal(t, http.StatusCreated, creds.Code, "%s", creds.Body)
	flushLog(t, ts.Server)

	w = ts.do("GET", "/v1/requests?limit=100", ts.key, "", "")
	require.Equal(t, http.StatusOK, w.Code)
	all := w.Body.String()
	require.Contains(t, all, keyAsID)
	stored, _, err := ts.reqlogStore.List(context.Background(), requestlog.Query{Owner: "", Limit: 100})
	require.NoError(t, err)
	require.NotEmpty(t, stored, "the admin's request")
	for _, e := range stored {
		b, err := json.Marshal(e)
		require.NoError(t, err)
		all += string(b)
	}
	for _, secret := range []string{"sk_sandbox_", "sk_live_", "whsec_", "adm_", marker, ts.AdminToken(), k.Secret, ep.Secret} {
		require.NotContains(t, all, secret)
	}
	require.Nil(t, ts.requestOf(t, ts.key, keyAsID).IdempotencyKey, "an Idempotency-Key shaped like a key is not kept")
}

// TestRequestLogOff: with Config.DisableRequestLog nothing is recorded; the requests API still
// answers, from the store.
func TestRequestLogOff(t *testing.T) {
	store, err := requestlog.NewMemoryStore(nil)
	require.NoError(t, err)
	s, err := New(Config{RequestLog: store, DisableRequestLog: true})
	require.NoError(t, err)
	require.Nil(t, s.reqlog)
	c, err := s.IssueCredentials(context.Background(), apikey.Sandbox)
	require.NoError(t, err)
	ts := &testServer{Server: s, key: c.APIKey}
	w := ts.do("POST", "/v1/orders", ts.key, "k", `{"account":"acc_1","side":"buy"}`)
	require.Equal(t, http.StatusCreated, w.Code)
	require.Empty(t, ts.requestIDs(t, ts.key, ""))
	entries, _, err := store.List(context.Background(), requestlog.Query{Owner: "sandbox:" + c.Licensee, Limit: 100})
	require.NoError(t, err)
	require.Empty(t, entries)
}

// TestServeFlushesRequestLog: Serve writes what the request log holds when it shuts down, after the
// last request was answered, without waiting for the flusher's next tick.
func TestServeFlushesRequestLog(t *testing.T) {
	store, err := requestlog.NewMemoryStore(nil)
	require.NoError(t, err)
	clock := newTestClock()
	s, err := New(Config{RequestLog: store, Now: clock.Now})
	require.NoError(t, err)
	c, err := s.IssueCredentials(context.Background(), apikey.Sandbox)
	require.NoError(t, err)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	req, err := http.NewRequest("GET", "http://"+ln.Addr().String()+"/v1/orders/ord_x", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+c.APIKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	cancel()
	require.NoError(t, <-served)

	e, err := store.Get(context.Background(), "sandbox:"+c.Licensee, resp.Header.Get("X-Request-Id"))
	require.NoError(t, err, "written at shutdown")
	require.Equal(t, http.StatusNotFound, e.Status)
	require.Equal(t, CodeOrderNotFound, e.Code)
}
