package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook/producer"
)

// The tests in this file provoke the answers of the bounds on events that the documents list: an
// event too large (413 event_too_large) on order creation and the trigger, an endpoint that keeps as
// many events as it may (429 events_quota_exceeded) on both, and too many range requests of one
// licensee at once (429 range_requests_in_flight). Each refusal did nothing, so its Idempotency-Key
// is not kept: the same request is decided again, and runs once its cause is gone.

// inProcessServer is the reference server built in this process with the options a test needs,
// serving on a free loopback port until the test ends.
type inProcessServer struct {
	*server.Server
	URL, SandboxKey string
}

// startInProcess runs server.New(cfg) on a loopback port. The event bounds have no flag in the
// orderserver program — they are options of the server package, which a product would set in code
// — so the tests that need small ones build the server here; every exchange still goes over HTTP
// through request.send and the contract checker, as with the program.
func startInProcess(t *testing.T, cfg server.Config) *inProcessServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg.BaseURL = "http://" + ln.Addr().String()
	s, err := server.New(cfg)
	if err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	c, err := s.IssueCredentials(context.Background(), apikey.Sandbox)
	if err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("in-process server: %v", err)
		}
	})
	return &inProcessServer{Server: s, URL: cfg.BaseURL, SandboxKey: c.APIKey}
}

// loopbackGuard lets endpoints be registered on loopback, as loopbackAllow does for the program.
func loopbackGuard() *ssrf.Guard {
	return &ssrf.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
}

// TestEventTooLarge: with a small MaxEventBytes, an order and a trigger whose event is over it are
// 413 event_too_large, located in the body; nothing is created or published, and the key is not
// kept: the same key with a smaller event runs.
func TestEventTooLarge(t *testing.T) {
	const most = 256 // an order's event, with an account of 64 characters, is over; a small trigger's is not
	srv := startInProcess(t, server.Config{Webhooks: server.WebhookOptions{MaxEventBytes: most, SandboxGuard: loopbackGuard()}})
	sk := bearer(srv.SandboxKey)
	id, _ := registerEndpoint(t, srv.URL, srv.SandboxKey, unreachable)

	order := request{Method: "POST", URL: srv.URL + "/v1/orders", Auth: sk, Key: newKey(),
		Body: `{"account":"` + strings.Repeat("a", 64) + `","side":"buy"}`}
	for range 2 {
		r := order.do(t)
		p := r.expectProblem(t, http.StatusRequestEntityTooLarge, server.CodeEventTooLarge)
		require.True(t, locates(p, "body", ""), "%v", p)
		require.Empty(t, r.Header.Get("Idempotent-Replayed"), "the refusal is not kept")
	}
	require.Zero(t, srv.Stats().OrdersCreated, "no order was created")

	big := `{"type":"sandbox.ping","data":{"pad":"` + strings.Repeat("x", 1024) + `"}}`
	for _, path := range []string{"/v1/sandbox/events", "/v2/sandbox/events"} {
		key := newKey()
		for range 2 {
			r := request{Method: "POST", URL: srv.URL + path, Auth: sk, Key: key, Body: big}.do(t)
			p := r.expectProblem(t, http.StatusRequestEntityTooLarge, server.CodeEventTooLarge)
			require.True(t, locates(p, "body", "/data"), "%v", p)
			require.Contains(t, p["detail"], strconv.Itoa(most))
			require.Empty(t, r.Header.Get("Idempotent-Replayed"))
		}
	}
	require.Zero(t, srv.Stats().EventsEmitted, "nothing was published")

	// The same key with a smaller event runs: the refusal kept nothing.
	key := newKey()
	request{Method: "POST", URL: srv.URL + "/v1/sandbox/events", Auth: sk, Key: key, Body: big}.
		do(t).expectProblem(t, http.StatusRequestEntityTooLarge, server.CodeEventTooLarge)
	r := request{Method: "POST", URL: srv.URL + "/v1/sandbox/events", Auth: sk, Key: key, Body: `{"type":"sandbox.ping","data":{"n":1}}`}.do(t)
	l := r.expectJSON(t, http.StatusCreated)
	require.Len(t, l["data"], 1)
	require.Equal(t, id, l["data"].([]any)[0].(map[string]any)["endpoint"])
}

// TestEventBoundsOnPostgres runs the program on real PostgreSQL in transactional mode — a stored
// refusal would commit with the request's transaction — and provokes, at the program's own bounds,
// 429 events_quota_exceeded on an order and a trigger, and 429 range_requests_in_flight.
func TestEventBoundsOnPostgres(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	srv := startOrderServerEnv(t, "orderserver-pg", []string{loopbackAllow, postgresEnv(dsn)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())

	t.Run("429 events_quota_exceeded, then the same keys run once", func(t *testing.T) {
		key := issueCredentials(t, srv)
		sk := bearer(key)
		id, _ := registerEndpoint(t, srv.URL, key, unreachable)
		createOrder(t, srv.URL, key, orderBody)
		rangeOf := func(from int) []any {
			r := request{Method: "GET", URL: fmt.Sprintf("%s/v1/webhook_endpoints/%s/events?from=%d", srv.URL, id, from), Auth: sk}.do(t)
			return r.expectJSON(t, http.StatusOK)["data"].([]any)
		}
		eventually(t, deliveryTimeout, func() bool { return len(rangeOf(1)) == 1 }, "the order's event is numbered")
		// The stream as if it had numbered the most events an endpoint keeps, and retention had
		// removed none: cheaper than appending 10,000 events.
		tag, err := conn.Exec(ctx, "UPDATE webhook_events_streams SET last_seq = $2 WHERE stream = $1", id, server.DefaultMaxStreamEvents)
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected())
		orders := func() (n int) {
			require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&n))
			return n
		}
		before := orders()

		order := request{Method: "POST", URL: srv.URL + "/v1/orders", Auth: sk, Key: newKey(), Body: orderBody}
		trigger := request{Method: "POST", URL: srv.URL + "/v1/sandbox/events", Auth: sk, Key: newKey(), Body: `{"type":"sandbox.ping","data":{"n":1}}`}
		for _, rq := range []request{order, trigger, order, trigger} {
			r := rq.do(t)
			r.expectProblem(t, http.StatusTooManyRequests, server.CodeEventsQuotaExceeded)
			secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
			require.NoError(t, err)
			require.Positive(t, secs)
			require.Empty(t, r.Header.Get("Idempotent-Replayed"), "%s: the refusal is not kept", rq.URL)
		}
		require.Equal(t, before, orders(), "a refused order leaves no row")

		// What retention does: the stream's two oldest events are gone, which frees room for two.
		_, err = conn.Exec(ctx, "UPDATE webhook_events_streams SET pruned_through = 2 WHERE stream = $1", id)
		require.NoError(t, err)
		for _, rq := range []request{order, trigger} {
			r := rq.do(t)
			require.Equal(t, http.StatusCreated, r.Status, "%s: %s", rq.URL, r.Body)
			require.Empty(t, r.Header.Get("Idempotent-Replayed"))
		}
		for _, rq := range []request{order, trigger} {
			r := rq.do(t)
			require.Equal(t, http.StatusCreated, r.Status, "%s: %s", rq.URL, r.Body)
			require.Equal(t, "true", r.Header.Get("Idempotent-Replayed"), "%s: done once, replayed after", rq.URL)
		}
		require.Equal(t, before+1, orders(), "the order was created once")
		first := server.DefaultMaxStreamEvents + 1
		eventually(t, deliveryTimeout, func() bool { return len(rangeOf(first)) == 2 }, "the order's and the trigger's events are numbered")
		require.Len(t, rangeOf(first), 2, "one event each")
	})

	t.Run("429 range_requests_in_flight", func(t *testing.T) {
		key := issueCredentials(t, srv) // a licensee of its own: the bound is per licensee
		id, _ := registerEndpoint(t, srv.URL, key, unreachable)
		rq := request{Method: "GET", URL: srv.URL + "/v1/webhook_endpoints/" + id + "/events?from=1", Auth: bearer(key)}
		rq.do(t).expectJSON(t, http.StatusOK) // pins the licensee's version before the table is locked

		// Every range read waits for this lock, holding its place among the licensee's requests in
		// flight; the requests beyond the bound are refused at once.
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, "LOCK TABLE webhook_events IN ACCESS EXCLUSIVE MODE")
		require.NoError(t, err)

		const sent = 2 * producer.DefaultRangeInFlight
		type result struct {
			r   response
			err error
		}
		results := make(chan result, sent)
		var wg sync.WaitGroup
		for range sent {
			wg.Go(func() { r, err := rq.send(); results <- result{r, err} })
		}
		// At most DefaultRangeInFlight of them wait for the lock; the others come back while it holds.
		for range sent - producer.DefaultRangeInFlight {
			res := <-results
			require.NoError(t, res.err)
			p := res.r.expectProblem(t, http.StatusTooManyRequests, producer.CodeRangeBusy)
			require.Contains(t, p["detail"], strconv.Itoa(producer.DefaultRangeInFlight))
			require.Equal(t, "1", res.r.Header.Get("Retry-After"))
		}
		require.NoError(t, tx.Rollback(ctx))
		wg.Wait()
		close(results)
		for res := range results {
			require.NoError(t, res.err)
			res.r.expectJSON(t, http.StatusOK)
		}
		// Their places are free again.
		rq.do(t).expectJSON(t, http.StatusOK)
	})
}
