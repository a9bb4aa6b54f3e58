package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/internal/testkit/faultproxy"
)

// The tests in this file drive the answers of the server's OpenAPI documents that the other
// end-to-end tests have no reason to provoke: the documents themselves, every operation in v2's
// shape, a body over the limit, the production rate limit, the version pin's 403, and — on real
// PostgreSQL and Redis — an Idempotency-Key in use, pruned events, and the store going away. Every
// request goes through send, which checks it and its answer against the document (see the contract
// checker); the coverage check at the end of the run fails if any documented answer was never seen.

// TestOpenAPIDocumentsServed fetches each version's document as an evaluator would.
func TestOpenAPIDocumentsServed(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	for _, v := range []string{"v1", "v2"} {
		r := request{Method: "GET", URL: srv.URL + "/" + v + "/openapi.json"}.do(t)
		doc := r.expectJSON(t, http.StatusOK)
		require.Equal(t, "3.1.0", doc["openapi"])
		require.Equal(t, v, doc["info"].(map[string]any)["version"])
		require.Equal(t, []any{map[string]any{"url": srv.URL}}, doc["servers"])
		require.Equal(t, v == "v1", r.Header.Get("Deprecation") != "", "only v1 announces its deprecation")
	}
	request{Method: "GET", URL: srv.URL + "/v9/openapi.json"}.do(t).expectProblem(t, http.StatusNotFound, "version_unknown")
	r := request{Method: "DELETE", URL: srv.URL + "/v1/openapi.json", Key: newKey()}.do(t)
	r.expectProblem(t, http.StatusMethodNotAllowed, "method_not_allowed")
	require.Equal(t, "GET, HEAD", r.Header.Get("Allow"))
}

// TestEveryOperationInV2 runs a sandbox licensee through every operation on v2, whose order has a
// direction where v1's has a side.
func TestEveryOperationInV2(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	key := bearer(issueCredentials(t, srv))
	u := func(path string) string { return srv.URL + "/v2" + path }

	o := request{Method: "POST", URL: u("/orders"), Auth: key, Key: newKey(), Body: `{"account":"acc_2","direction":"sell"}`}.
		do(t).expectJSON(t, http.StatusCreated)
	require.Equal(t, "sell", o["direction"])
	require.Equal(t, o, request{Method: "GET", URL: u("/orders/" + o["id"].(string)), Auth: key}.do(t).expectJSON(t, http.StatusOK))
	request{Method: "POST", URL: u("/orders"), Auth: key, Key: newKey(), Body: orderBody}.do(t).
		expectProblem(t, http.StatusBadRequest, "unknown_field") // v1's side is not a v2 member

	ep := request{Method: "POST", URL: u("/webhook_endpoints"), Auth: key, Key: newKey(), Body: `{"url":"` + unreachable + `"}`}.
		do(t).expectJSON(t, http.StatusCreated)
	id := ep["id"].(string)
	require.Equal(t, "v2", ep["api_version"])
	l := request{Method: "GET", URL: u("/webhook_endpoints"), Auth: key}.do(t).expectJSON(t, http.StatusOK)
	delete(ep, "secret") // shown once, at registration
	require.Equal(t, []any{ep}, l["data"])
	trig := request{Method: "POST", URL: u("/sandbox/events"), Auth: key, Key: newKey(), Body: `{"type":"sandbox.ping","data":{"n":1}}`}.
		do(t).expectJSON(t, http.StatusCreated)
	require.Len(t, trig["data"], 1)
	eventually(t, deliveryTimeout, func() bool {
		r := request{Method: "GET", URL: u("/webhook_endpoints/" + id + "/events?from=1"), Auth: key}.do(t)
		return len(r.expectJSON(t, http.StatusOK)["data"].([]any)) == 1
	}, "the triggered event is in the endpoint's range")
	request{Method: "GET", URL: u("/webhook_endpoints/" + id + "/deliveries?limit=5"), Auth: key}.do(t).expectJSON(t, http.StatusOK)
	for _, m := range []string{"POST", "PUT"} {
		f := request{Method: m, URL: u("/sandbox/webhook_endpoints/" + id + "/faults"), Auth: key, Key: newKey(), Body: `{"drop":0.5}`}.
			do(t).expectJSON(t, http.StatusOK)
		require.Equal(t, 0.5, f["drop"])
	}
	f := request{Method: "DELETE", URL: u("/sandbox/webhook_endpoints/" + id + "/faults"), Auth: key, Key: newKey()}.
		do(t).expectJSON(t, http.StatusOK)
	require.Equal(t, 0.0, f["drop"])
	r := request{Method: "POST", URL: u("/sandbox/reset"), Auth: key, Key: newKey()}.do(t)
	require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Body)
	request{Method: "GET", URL: u("/orders/" + o["id"].(string)), Auth: key}.do(t).expectProblem(t, http.StatusNotFound, "order_not_found")
}

// TestRefusalsOfTheDocument provokes the shared refusals no other test needs: the version pin of a
// production licensee, a body over the limit, and the production rate limit.
func TestRefusalsOfTheDocument(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	live := bearer(srv.LiveKey)

	t.Run("403 on another version than the pin", func(t *testing.T) {
		createOrder(t, srv.URL, srv.LiveKey, orderBody) // pins the production licensee to v1
		p := request{Method: "GET", URL: srv.URL + "/v2/orders/ord_x", Auth: live}.do(t).
			expectProblem(t, http.StatusForbidden, "version_not_enabled")
		require.Equal(t, "v1", p["pinned_version"])
	})

	t.Run("413 for a body over the limit", func(t *testing.T) {
		body := `{"account":"acc_1","side":"buy","pad":"` + strings.Repeat("x", 1<<20) + `"}`
		request{Method: "POST", URL: srv.URL + "/v1/orders", Auth: bearer(srv.SandboxKey), Key: newKey(), Body: body}.do(t).
			expectProblem(t, http.StatusRequestEntityTooLarge, "body_too_large")
		// An operation that publishes no event answers with the shared response (ContentTooLarge).
		body = `{"url":"` + unreachable + `","pad":"` + strings.Repeat("x", 1<<20) + `"}`
		request{Method: "POST", URL: srv.URL + "/v1/webhook_endpoints", Auth: bearer(srv.SandboxKey), Key: newKey(), Body: body}.do(t).
			expectProblem(t, http.StatusRequestEntityTooLarge, "body_too_large")
	})

	t.Run("415 for a body that is not JSON", func(t *testing.T) {
		r := request{Method: "POST", URL: srv.URL + "/v1/orders", Auth: bearer(srv.SandboxKey), Key: newKey(), Body: orderBody,
			Header: http.Header{"Content-Type": {"text/plain"}}}.do(t)
		r.expectProblem(t, http.StatusUnsupportedMediaType, "unsupported_media_type")
		require.Equal(t, "application/json", r.Header.Get("Accept-Post"))
	})

	t.Run("422 for a key reused with another endpoint", func(t *testing.T) {
		key := newKey()
		request{Method: "POST", URL: srv.URL + "/v1/webhook_endpoints", Auth: bearer(srv.SandboxKey), Key: key,
			Body: `{"url":"` + unreachable + `"}`}.do(t).expectJSON(t, http.StatusCreated)
		request{Method: "POST", URL: srv.URL + "/v1/webhook_endpoints", Auth: bearer(srv.SandboxKey), Key: key,
			Body: `{"url":"http://127.0.0.1:10/other"}`}.do(t).expectProblem(t, http.StatusUnprocessableEntity, "idempotency_key_reused")
	})

	t.Run("422 past the endpoint limit", func(t *testing.T) {
		key := issueCredentials(t, srv) // a licensee with no endpoint yet
		for range 16 {
			registerEndpoint(t, srv.URL, key, unreachable)
		}
		request{Method: "POST", URL: srv.URL + "/v1/webhook_endpoints", Auth: bearer(key), Key: newKey(),
			Body: `{"url":"` + unreachable + `"}`}.do(t).expectProblem(t, http.StatusUnprocessableEntity, "webhook_endpoint_limit_reached")
	})

	t.Run("429 past the production rate", func(t *testing.T) {
		// A server of its own, whose production licensees get one request and then a token every
		// thousand seconds: the second request is refused on any machine, however slow. (Racing
		// the default 100 a second against real time is what a loaded machine lost; the server
		// package's TestRateLimitByEnvironment checks the default burst on a clock that stands still.)
		slow := startOrderServer(t, "orderserver-ratelimit", "-live-rate", "0.001", "-live-burst", "1")
		get := request{Method: "GET", URL: slow.URL + "/v1/orders/ord_x", Auth: bearer(slow.LiveKey)}
		get.do(t).expectProblem(t, http.StatusNotFound, "order_not_found")
		limited := get.do(t)
		limited.expectProblem(t, http.StatusTooManyRequests, "rate_limited")
		secs, err := strconv.Atoi(limited.Header.Get("Retry-After"))
		require.NoError(t, err)
		require.Greater(t, secs, 900, "Retry-After is when the next token comes")
		// The sandbox has no limit at all.
		sandbox := request{Method: "GET", URL: slow.URL + "/v1/orders/ord_x", Auth: bearer(slow.SandboxKey)}
		for range 5 {
			sandbox.do(t).expectProblem(t, http.StatusNotFound, "order_not_found")
		}
	})
}

// proxiedDSN is dsn with its host and port replaced by the proxy's.
func proxiedDSN(t *testing.T, dsn string, p *faultproxy.Proxy) string {
	t.Helper()
	host, port := p.HostPort()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		u.Host = fmt.Sprintf("%s:%d", host, port)
		return u.String()
	}
	return fmt.Sprintf("%s host=%s port=%d", dsn, host, port) // in key=value form the last one wins
}

// TestDocumentedAnswersUnderFaults runs the server on real PostgreSQL (through a TCP proxy the test
// can cut) with its idempotency records in real Redis, and provokes the answers that need a store
// to misbehave or to hold still: 409 while a request with the same key runs, 410 for a range that
// retention pruned, and the 5XX of a store that is gone.
func TestDocumentedAnswersUnderFaults(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	redisURL, prefix := testenv.Redis(t)
	cfg, err := pgconn.ParseConfig(dsn)
	require.NoError(t, err)
	proxy := faultproxy.Start(t, fmt.Sprintf("%s:%d", cfg.Host, cfg.Port))
	srv := startOrderServerEnv(t, "orderserver-pg", []string{loopbackAllow, postgresEnv(proxiedDSN(t, dsn, proxy)), redisEnv(redisURL)},
		"-redis-prefix", prefix)
	sk := bearer(srv.SandboxKey)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn) // straight to PostgreSQL, not through the proxy
	require.NoError(t, err)
	defer conn.Close(context.Background())

	t.Run("409 while the first request with the key runs", func(t *testing.T) {
		// The first request claims the key in Redis, then waits inside its handler for the orders
		// table, which this transaction locks. Every other request with the key meanwhile is 409.
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "LOCK TABLE orders IN ACCESS EXCLUSIVE MODE")
		require.NoError(t, err)
		rq := request{Method: "POST", URL: srv.URL + "/v1/orders", Auth: sk, Key: newKey(), Body: orderBody}

		type result struct {
			r   response
			err error
		}
		results := make(chan result, 64)
		var wg sync.WaitGroup
		send := func() { wg.Go(func() { r, err := rq.send(); results <- result{r, err} }) }
		send()
		var inUse *response
		var done []response
		// One of the requests holds the key and waits for the lock; the others come back at once.
		// Send one at a time until one of them is the 409 (the first may overtake the one sent
		// before it, and then it is the one waiting).
		for inUse == nil && len(done) < 32 {
			send()
			res := <-results
			require.NoError(t, res.err)
			if res.r.Status == http.StatusConflict {
				inUse = &res.r
			} else {
				done = append(done, res.r)
			}
		}
		require.NotNil(t, inUse, "no 409 while the key's first request waits: %d other answers", len(done))
		inUse.expectProblem(t, http.StatusConflict, "idempotency_key_in_use")
		require.NotEmpty(t, inUse.Header.Get("Retry-After"))
		require.NoError(t, tx.Rollback(ctx))
		wg.Wait()
		close(results)
		for res := range results {
			require.NoError(t, res.err)
			done = append(done, res.r)
		}
		created := 0
		for _, r := range done {
			if r.Status == http.StatusCreated && r.Header.Get("Idempotent-Replayed") == "" {
				created++
			}
		}
		require.Equal(t, 1, created, "the key's order was created once")
		for range 2 {
			r := rq.do(t)
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
			require.Equal(t, "true", r.Header.Get("Idempotent-Replayed"))
		}
	})

	t.Run("410 for a range that retention pruned", func(t *testing.T) {
		id, _ := registerEndpoint(t, srv.URL, srv.SandboxKey, unreachable)
		createOrder(t, srv.URL, srv.SandboxKey, orderBody)
		createOrder(t, srv.URL, srv.SandboxKey, orderBody)
		eventually(t, deliveryTimeout, func() bool {
			r := request{Method: "GET", URL: srv.URL + "/v1/webhook_endpoints/" + id + "/events?from=1", Auth: sk}.do(t)
			return len(r.expectJSON(t, http.StatusOK)["data"].([]any)) == 2
		}, "both events are numbered")
		// What retention does: the stream records that sequence 1 is gone.
		tag, err := conn.Exec(ctx, "UPDATE webhook_events_streams SET pruned_through = 1 WHERE stream = $1", id)
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected())
		p := request{Method: "GET", URL: srv.URL + "/v1/webhook_endpoints/" + id + "/events?from=1", Auth: sk}.do(t).
			expectProblem(t, http.StatusGone, "events_pruned")
		require.True(t, locates(p, "query", "from"), "%v", p)
		l := request{Method: "GET", URL: srv.URL + "/v1/webhook_endpoints/" + id + "/events?from=2", Auth: sk}.do(t).
			expectJSON(t, http.StatusOK)
		require.Len(t, l["data"], 1)
	})

	t.Run("5XX when the database is gone", func(t *testing.T) {
		proxy.Cut()
		defer proxy.Restore()
		for _, rq := range []request{
			{Method: "GET", URL: srv.URL + "/v1/orders/ord_x", Auth: sk},
			{Method: "POST", URL: srv.URL + "/v1/orders", Auth: sk, Key: newKey(), Body: orderBody},
		} {
			// Authentication meets the outage first, unless the credential cache still serves: its
			// listener has not yet seen its connection go (it stops serving at once when it does, and a
			// second after its last round trip at the latest). Then the version pin, read before the
			// handler runs, or the request's own statement meets it, and the answer is the same 503
			// with its own code — never the opaque 500.
			r := rq.do(t)
			require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
			require.NoError(t, apierror.Check(r.Status, r.Header, r.Body))
			require.Contains(t, []any{"authentication_unavailable", "version_pin_unavailable", "service_unavailable"},
				r.object(t)["code"], "%s", r.Body)
			require.NotEmpty(t, r.Header.Get("Retry-After"))
		}
	})
}
