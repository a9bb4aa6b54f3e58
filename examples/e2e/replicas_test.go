package e2e

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/examples/internal/testenv"
)

// countRows counts a table's rows in the test's schema.
func countRows(t *testing.T, dsn, table string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&n))
	return n
}

// TestPostgresReplicas runs two order servers on one PostgreSQL schema: every durable record is
// shared, so either replica recognises the other's keys and idempotency records, and a consumer that
// keeps its cursor in PostgreSQL resumes after a restart without processing anything twice.
func TestPostgresReplicas(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	a := startOrderServerEnv(t, "replica-a", []string{loopbackAllow, postgresEnv(dsn)})
	b := startOrderServerEnv(t, "replica-b", []string{loopbackAllow, postgresEnv(dsn)})

	t.Run("each replica recognises the other's keys", func(t *testing.T) {
		createOrder(t, b.URL, a.SandboxKey, orderBody)
		createOrder(t, a.URL, b.SandboxKey, orderBody)
		issued := issueCredentials(t, a)
		createOrder(t, b.URL, issued, orderBody)
	})

	t.Run("idempotency records are shared", func(t *testing.T) {
		key := newKey()
		first := request{Method: "POST", URL: a.URL + "/v1/orders", Auth: bearer(a.SandboxKey), Key: key, Body: orderBody}.do(t)
		o := first.expectJSON(t, http.StatusCreated)
		again := request{Method: "POST", URL: b.URL + "/v1/orders", Auth: bearer(a.SandboxKey), Key: key, Body: orderBody}.do(t)
		require.Equal(t, http.StatusCreated, again.Status)
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(first.Body), string(again.Body))
		request{Method: "POST", URL: b.URL + "/v1/orders", Auth: bearer(a.SandboxKey), Key: key,
			Body: `{"account":"acc_2","side":"buy"}`}.do(t).expectProblem(t, http.StatusUnprocessableEntity, "idempotency_key_reused")
		got := request{Method: "GET", URL: b.URL + "/v1/orders/" + o["id"].(string), Auth: bearer(a.SandboxKey)}.do(t)
		require.Equal(t, o, got.expectJSON(t, http.StatusOK))
		request{Method: "GET", URL: b.URL + "/v1/orders/" + o["id"].(string), Auth: bearer(b.SandboxKey)}.do(t).
			expectProblem(t, http.StatusNotFound, "order_not_found")
	})

	t.Run("concurrent duplicates across replicas run once", func(t *testing.T) {
		key := newKey()
		const n = 12
		responses := make([]response, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range n {
			base := a.URL
			if i%2 == 1 {
				base = b.URL
			}
			wg.Go(func() {
				<-gate
				responses[i], errs[i] = request{Method: "POST", URL: base + "/v1/orders", Auth: bearer(a.SandboxKey),
					Key: key, Body: orderBody}.send()
			})
		}
		close(gate)
		wg.Wait()
		originals := 0
		ids := map[any]bool{}
		for i, r := range responses {
			require.NoError(t, errs[i])
			switch r.Status {
			case http.StatusCreated:
				if r.Header.Get("Idempotent-Replayed") != "true" {
					originals++
				}
				ids[r.object(t)["id"]] = true
			case http.StatusConflict:
				r.expectProblem(t, http.StatusConflict, "idempotency_key_in_use")
			default:
				t.Fatalf("unexpected answer %d: %s", r.Status, r.Body)
			}
		}
		require.Equal(t, 1, originals)
		require.LessOrEqual(t, len(ids), 1)
	})

	t.Run("webhooks from both replicas, and a consumer that crashes", func(t *testing.T) {
		key := issueCredentials(t, a)
		w := startWebhookSetup(t, a, key, postgresEnv(dsn))
		orders := createOrders(t, a.URL, key, 6, 2)
		for id := range createOrders(t, b.URL, key, 6, 2) {
			orders[id] = true
		}
		waitProcessed(t, w.consumer, 12, orders)

		// The consumer crashes; orders keep coming; a new consumer process on the same cursor picks
		// up exactly the events it missed.
		w.consumer.kill(t)
		later := createOrders(t, b.URL, key, 5, 1)
		restarted := startConsumer(t, "consumer-restarted", strings.TrimPrefix(w.consumer.URL, "http://"),
			w.consumer.Env, w.consumer.Args...)
		eventually(t, deliveryTimeout, func() bool { return len(restarted.processed()) >= 5 },
			"the restarted consumer processed %d of 5 missed events", len(restarted.processed()))
		evs := restarted.processed()
		require.Len(t, evs, 5, "the restarted consumer processes only what it missed")
		for i, ev := range evs {
			require.Equal(t, uint64(13+i), ev.Sequence)
			require.True(t, later[ev.Order])
		}
		require.Equal(t, 17, countRows(t, dsn, "consumer_processed_events"), "each event's effect committed once")
	})

	t.Run("a key revoked in the database is refused by both replicas", func(t *testing.T) {
		// Both replicas authenticate the key, and so cache its credential; the revocation, typed by
		// hand in SQL, reaches both caches through the table's trigger (within a second, pgstore
		// guarantees; here the running programs' wiring is checked).
		key := issueCredentials(t, a)
		for _, srv := range []*orderServer{a, b, a, b} {
			createOrder(t, srv.URL, key, orderBody)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err)
		defer conn.Close(ctx)
		h := apikey.HashKey(key)
		tag, err := conn.Exec(ctx, `UPDATE sandbox_credentials SET revoked_at = now() WHERE hash = $1`, h[:])
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected())
		revoked := time.Now()
		refused := func(srv *orderServer) bool {
			r := request{Method: "GET", URL: srv.URL + "/v1/webhook_endpoints", Auth: bearer(key)}.do(t)
			return r.Status == http.StatusUnauthorized
		}
		eventually(t, deliveryTimeout, func() bool { return refused(a) && refused(b) }, "a revoked key is still accepted")
		t.Logf("refused by both replicas %v after the revocation", time.Since(revoked))
	})

	t.Run("a replica that restarts finds everything", func(t *testing.T) {
		o := createOrder(t, a.URL, a.SandboxKey, orderBody)
		a.stop(t)
		a2 := startOrderServerEnv(t, "replica-a-restarted", []string{loopbackAllow, postgresEnv(dsn)})
		got := request{Method: "GET", URL: a2.URL + "/v1/orders/" + o["id"].(string), Auth: bearer(a.SandboxKey)}.do(t)
		require.Equal(t, o, got.expectJSON(t, http.StatusOK))
	})
}

// TestPostgresAndRedis keeps idempotency records in Redis while everything else stays in PostgreSQL:
// the replicas still recognise each other's keys, and the records are in Redis, not in PostgreSQL.
func TestPostgresAndRedis(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	redisURL, prefix := testenv.Redis(t)
	a := startOrderServerEnv(t, "replica-a", []string{loopbackAllow, postgresEnv(dsn), redisEnv(redisURL)}, "-redis-prefix", prefix)
	b := startOrderServerEnv(t, "replica-b", []string{loopbackAllow, postgresEnv(dsn), redisEnv(redisURL)}, "-redis-prefix", prefix)

	key := newKey()
	first := request{Method: "POST", URL: a.URL + "/v1/orders", Auth: bearer(a.SandboxKey), Key: key, Body: orderBody}.do(t)
	first.expectJSON(t, http.StatusCreated)
	again := request{Method: "POST", URL: b.URL + "/v1/orders", Auth: bearer(a.SandboxKey), Key: key, Body: orderBody}.do(t)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.Body), string(again.Body))
	request{Method: "POST", URL: b.URL + "/v1/orders", Auth: bearer(a.SandboxKey), Key: key,
		Body: `{"account":"acc_2","side":"buy"}`}.do(t).expectProblem(t, http.StatusUnprocessableEntity, "idempotency_key_reused")

	require.Zero(t, countRows(t, dsn, "idempotency_keys"), "with -redis, no idempotency record is in PostgreSQL")
	opts, err := redis.ParseURL(redisURL)
	require.NoError(t, err)
	rc := redis.NewClient(opts)
	defer rc.Close()
	keys, _, err := rc.Scan(context.Background(), 0, prefix+"*", 100).Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys, "the records are in Redis under the configured prefix")
}

// TestRedisOnly keeps idempotency records in Redis and the rest in memory.
func TestRedisOnly(t *testing.T) {
	redisURL, prefix := testenv.Redis(t)
	srv := startOrderServerEnv(t, "orderserver", []string{loopbackAllow, redisEnv(redisURL)}, "-redis-prefix", prefix)
	rq := request{Method: "POST", URL: srv.URL + "/v1/orders", Auth: bearer(srv.SandboxKey), Key: newKey(), Body: orderBody}
	first := rq.do(t)
	first.expectJSON(t, http.StatusCreated)
	again := rq.do(t)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.Body), string(again.Body))
}
