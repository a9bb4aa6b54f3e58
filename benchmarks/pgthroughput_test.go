package benchmarks

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svcplatform/conventions/apikey"
	orderserver "github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/examples/orderserver/server/pgserver"
	"github.com/svcplatform/conventions/internal/testkit/testid"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// The knobs of BenchmarkPGThroughput. The defaults keep CI's single pass (-benchtime 1x) to a few
// seconds per sub-benchmark; the full measurement raises them (docs/BENCHMARKS.md has the command).
const (
	envClients        = "SVC_BENCH_CLIENTS"         // concurrent clients, ours and pgbench's -c (default 8)
	envOrders         = "SVC_BENCH_ORDERS"          // orders per iteration (default 200)
	envEvents         = "SVC_BENCH_EVENTS"          // events (messages) per iteration (default 400)
	envEndpoints      = "SVC_BENCH_ENDPOINTS"       // webhook endpoints = streams = Watermill topics (default 16)
	envDispatchers    = "SVC_BENCH_DISPATCHERS"     // producer.Dispatchers sharing the EventLog (default 1)
	envPgbenchSeconds = "SVC_BENCH_PGBENCH_SECONDS" // pgbench -T (default 2)
	envPgbench        = "SVC_BENCH_PGBENCH"         // the pgbench binary (default: pgbench on PATH)
	envTrace          = "SVC_BENCH_TRACE"           // "1": log every statement's count and time per operation
)

// eventPayloadSize is the size of every event's data and every Watermill message's payload.
const eventPayloadSize = 256

type throughputKnobs struct {
	clients, orders, events, endpoints, dispatchers, pgbenchSeconds int
	trace                                                           bool
}

// envKnob is the positive integer in the environment variable name, or def when it is unset.
func envKnob(tb testing.TB, name string, def int) int {
	tb.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

func loadKnobs(tb testing.TB) throughputKnobs {
	tb.Helper()
	get := func(name string, def int) int { return envKnob(tb, name, def) }
	return throughputKnobs{
		clients:        get(envClients, 8),
		orders:         get(envOrders, 200),
		events:         get(envEvents, 400),
		endpoints:      get(envEndpoints, 16),
		dispatchers:    get(envDispatchers, 1),
		pgbenchSeconds: get(envPgbenchSeconds, 2),
		trace:          os.Getenv(envTrace) == "1",
	}
}

// BenchmarkPGThroughput measures throughput on the real PostgreSQL server named by
// SVC_TEST_POSTGRES_DSN, at SVC_BENCH_CLIENTS concurrent clients:
//
//   - orders: POST /v1/orders through the reference order server (examples/orderserver/server) wired
//     as SVC_POSTGRES_DSN wires it — transactional idempotency, so the claim, the order row, its
//     order.created event and the stored response commit in one transaction — against pgbench -N
//     (simple-update, one commit per transaction) at the same client count, on its own database.
//     Reports orders/s, pgbench's tps and their ratio. orders gives each client a licensee of its own;
//     orders/one-licensee has every client place one licensee's orders, all of whose events go to
//     one endpoint's stream; orders/request-log-off is orders with the server's request log turned
//     off (server.Config.DisableRequestLog), so that one run shows what the log costs: its orders/s
//     against orders'.
//   - events/ours: SVC_BENCH_EVENTS events appended through producer.Publisher to a pgstore.EventLog
//     across SVC_BENCH_ENDPOINTS endpoints, then delivered by producer.Dispatchers to a local consumer
//     answering 204. Reports appended/s and delivered/s.
//   - events/watermill: the same count and payload size published with Watermill's SQL publisher
//     across as many topics, then consumed with its SQL subscriber. Reports published/s and consumed/s.
//
// One iteration is one batch of SVC_BENCH_ORDERS orders (SVC_BENCH_EVENTS events). ns/op, B/op and
// allocs/op are per order (per event), over the timed part only; B/op and allocs/op count every
// goroutine of the process (server, pgx, dispatcher), which is what an order costs here. Every schema
// and database it creates is dropped when it ends, on failure too.
func BenchmarkPGThroughput(b *testing.B) {
	b.Run("orders", func(b *testing.B) { benchOrders(b, false, true) })
	b.Run("orders/one-licensee", func(b *testing.B) { benchOrders(b, true, true) })
	b.Run("orders/request-log-off", func(b *testing.B) { benchOrders(b, false, false) })
	b.Run("events/ours", benchEventsOurs)
	b.Run("events/watermill", benchEventsWatermill)
}

// --- PostgreSQL plumbing ----------------------------------------------------------------------------

// requireDSN returns SVC_TEST_POSTGRES_DSN, skipping when it is unset and failing when nothing
// answers at the address it names.
func requireDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(envPostgres)
	if dsn == "" {
		tb.Skipf("%s is not set: skipping the PostgreSQL throughput benchmarks", envPostgres)
	}
	postgresAnswers(tb, dsn)
	return dsn
}

// schemaPool returns a pool whose connections resolve unqualified names in a schema of this run's own
// (search_path), so that code using its default table names — the reference server, the event log,
// Watermill — creates its tables there. The schema is dropped, CASCADE, when the benchmark ends.
func schemaPool(tb testing.TB, dsn string, maxConns int32, tracer any) *pgxpool.Pool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("%s is set but PostgreSQL does not answer: %v", envPostgres, err)
	}
	defer admin.Close(ctx)
	schema := testid.New("svcbench_")
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() { dropSchema(tb, dsn, schema) })

	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		tb.Fatalf("%s: %v", envPostgres, err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	cfg.MaxConns = maxConns
	if t, ok := tracer.(pgx.QueryTracer); ok {
		cfg.ConnConfig.Tracer = t
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("%s: %v", envPostgres, err)
	}
	tb.Cleanup(pool.Close) // runs before dropSchema: cleanups run last-in first-out
	if err := pool.Ping(ctx); err != nil {
		tb.Fatalf("%s is set but PostgreSQL does not answer: %v", envPostgres, err)
	}
	return pool
}

func dropSchema(tb testing.TB, dsn, schema string) {
	adminExec(tb, dsn, "drop schema "+schema, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
}

// adminExec runs one cleanup statement on a connection of its own, reporting (not failing on) errors.
func adminExec(tb testing.TB, dsn, what, sql string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Errorf("%s: %v", what, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		tb.Errorf("%s: %v", what, err)
	}
}

// --- statement tracing ------------------------------------------------------------------------------

// stmtTracer counts the statements and round trips of a pool (a batch is one round trip) and, when
// detailed, the count and wall time of each distinct statement.
type stmtTracer struct {
	stmts, trips atomic.Int64
	detail       bool
	mu           sync.Mutex
	by           map[string]*stmtStat
}

type stmtStat struct {
	n int64
	d time.Duration
}

type traceKey struct{}

type traceStart struct {
	sql string
	at  time.Time
}

func newStmtTracer(detail bool) *stmtTracer {
	return &stmtTracer{detail: detail, by: map[string]*stmtStat{}}
}

func (t *stmtTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	t.stmts.Add(1)
	t.trips.Add(1)
	if !t.detail {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, traceStart{sql: data.SQL, at: time.Now()})
}

func (t *stmtTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if s, ok := ctx.Value(traceKey{}).(traceStart); ok {
		t.record(s.sql, time.Since(s.at))
	}
}

func (t *stmtTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.trips.Add(1)
	return ctx
}

func (t *stmtTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	t.stmts.Add(1)
	if t.detail {
		t.record("(batched) "+data.SQL, 0)
	}
}

func (t *stmtTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (t *stmtTracer) record(sql string, d time.Duration) {
	key := strings.Join(strings.Fields(sql), " ")
	if len(key) > 110 {
		key = key[:110] + "…"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.by[key]
	if st == nil {
		st = &stmtStat{}
		t.by[key] = st
	}
	st.n++
	st.d += d
}

// reset forgets what was counted so far (the setup and the warm-up).
func (t *stmtTracer) reset() {
	t.stmts.Store(0)
	t.trips.Store(0)
	t.mu.Lock()
	clear(t.by)
	t.mu.Unlock()
}

// report prints, per operation, every statement's count and wall time, the slowest first. It goes to
// stderr: the testing package keeps only ten lines of a benchmark's log.
func (t *stmtTracer) report(tb testing.TB, what string, ops int) {
	if !t.detail || ops == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.by))
	var total time.Duration
	for k, st := range t.by {
		keys = append(keys, k)
		total += st.d
	}
	slices.SortFunc(keys, func(a, b string) int { return int(t.by[b].d - t.by[a].d) })
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: statements per %s (%d %ss; wall time summed over all connections):\n", tb.Name(), what, ops, what)
	for _, k := range keys {
		st := t.by[k]
		fmt.Fprintf(&sb, "  %6.2f/%s  %7.1f µs each  %5.1f%%  %s\n", float64(st.n)/float64(ops), what,
			float64(st.d.Microseconds())/float64(max(st.n, 1)), 100*float64(st.d)/float64(max(total, 1)), k)
	}
	fmt.Fprint(os.Stderr, sb.String())
}

// --- measuring --------------------------------------------------------------------------------------

// meter measures the timed part of a sub-benchmark: wall time and the process's allocations.
type meter struct {
	start            time.Time
	mallocs, bytes   uint64
	elapsed          time.Duration
	dMallocs, dBytes uint64
}

func startMeter() *meter {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &meter{start: time.Now(), mallocs: ms.Mallocs, bytes: ms.TotalAlloc}
}

func (m *meter) stop() {
	m.elapsed += time.Since(m.start)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.dMallocs += ms.Mallocs - m.mallocs
	m.dBytes += ms.TotalAlloc - m.bytes
}

// publishPhase publishes messages 0..warm-1 untimed, then warm..warm+total-1 timed and traced (the
// tracer is reset between the two), each by one of clients goroutines, and returns the timed meter.
func publishPhase(b *testing.B, clients, warm, total int, tracer *stmtTracer, publish func(i int) error) *meter {
	if err := runClients(clients, warm, func(_, i int) error { return publish(i) }); err != nil {
		b.Fatal(err)
	}
	tracer.reset()
	m := startMeter()
	err := runClients(clients, total, func(_, i int) error { return publish(warm + i) })
	m.stop()
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// reportPerOp replaces the framework's ns/op, B/op and allocs/op (which would count the setup and
// pgbench) with the timed part's, per operation.
func reportPerOp(b *testing.B, elapsed time.Duration, mallocs, bytes uint64, ops int) {
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(ops), "ns/op")
	b.ReportMetric(float64(bytes)/float64(ops), "B/op")
	b.ReportMetric(float64(mallocs)/float64(ops), "allocs/op")
}

func perSecond(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// warmups is how many operations run, concurrently, before the clock starts.
func warmups(clients int) int { return 4 * clients }

// runClients runs jobs 0…total-1 on clients goroutines, each job told its client's number, and returns
// the first error.
func runClients(clients, total int, job func(client, i int) error) error {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for c := range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				if err := job(c, i); err != nil {
					errOnce.Do(func() { firstErr = err })
					next.Store(int64(total)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// orderPhase places warmups(clients) orders untimed (so that pools are open and statements prepared
// before the clock starts), then total orders timed and traced, and returns the timed meter and the
// statements and round trips the tracer counted in it. order(c, i) places order i from client c;
// warm-up orders have negative i.
func orderPhase(b *testing.B, clients, total int, tracer *stmtTracer, order func(c, i int) error) (m *meter, stmts, trips int64) {
	if err := runClients(clients, warmups(clients), func(c, i int) error { return order(c, -1-i) }); err != nil {
		b.Fatal(err)
	}
	tracer.reset()
	m = startMeter()
	err := runClients(clients, total, order)
	m.stop()
	if err != nil {
		b.Fatal(err)
	}
	tracer.report(b, "order", total)
	return m, tracer.stmts.Load(), tracer.trips.Load()
}

// reportOrders reports an order phase against pgbench's tps.
func reportOrders(b *testing.B, m *meter, total int, tps float64, stmts, trips int64) {
	ours := perSecond(total, m.elapsed)
	reportPerOp(b, m.elapsed, m.dMallocs, m.dBytes, total)
	b.ReportMetric(ours, "orders/s")
	b.ReportMetric(tps, "tps")
	b.ReportMetric(ours/tps, "ratio")
	b.ReportMetric(float64(stmts)/float64(total), "stmts/order")
	b.ReportMetric(float64(trips)/float64(total), "roundtrips/order")
}

// --- orders vs pgbench ------------------------------------------------------------------------------

// benchOrders places orders through the reference server. Each client is a licensee of its own, or,
// with shared, all clients place the orders of one licensee (one key, one webhook endpoint): the busy
// licensee of issue 20, whose events all go to one stream. requestLog keeps the server's request log
// on, as it ships (its entries written to PostgreSQL in batches while the orders run).
func benchOrders(b *testing.B, shared, requestLog bool) {
	dsn := requireDSN(b)
	pgbench := requirePgbench(b)
	k := loadKnobs(b)
	ctx := context.Background()

	tracer := newStmtTracer(k.trace)
	// As examples/orderserver builds it from SVC_POSTGRES_DSN: 32 connections, so that requests holding a
	// transaction never queue for one at this concurrency.
	pool := schemaPool(b, dsn, 32, tracer)
	srv := newOrderServer(b, pool, requestLog)

	// One sandbox licensee per client, or one for all when shared (sandbox keys have no rate ceiling;
	// production's 100/s per licensee would measure the limiter), each with one webhook endpoint, so
	// each order appends one event to its licensee's stream inside the order's transaction.
	keys := make([]string, k.clients)
	for c := range keys {
		if shared && c > 0 {
			keys[c] = keys[0]
			continue
		}
		creds, err := srv.IssueCredentials(ctx, apikey.Sandbox)
		if err != nil {
			b.Fatal(err)
		}
		keys[c] = creds.APIKey
		rec := postJSON(srv.Handler(), "/v1/webhook_endpoints", keys[c], testid.New("idem_"),
			`{"url":"http://127.0.0.1:9/never-delivered"}`)
		if rec.Code != http.StatusCreated {
			b.Fatalf("create webhook endpoint: %d %s", rec.Code, rec.Body)
		}
	}
	run := testid.New("")
	order := func(client, i int) error {
		rec := postJSON(srv.Handler(), "/v1/orders", keys[client], fmt.Sprintf("ord-%s-%d", run, i),
			`{"account":"acct_bench","side":"buy"}`)
		if rec.Code != http.StatusCreated {
			return fmt.Errorf("POST /v1/orders: %d %s", rec.Code, rec.Body)
		}
		return nil
	}
	// The events are numbered after their orders commit, by a sequencer as the server's dispatcher
	// runs one (the benchmark does not deliver): its work is part of what an order costs. The warm-up
	// orders also pin each licensee's version.
	seqLog := must(pgstore.NewEventLog(pool, nil))
	seq, err := producer.NewSequencer(seqLog, &producer.SequencerOptions{PollInterval: 5 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	seqCtx, stopSeq := context.WithCancel(ctx)
	var sequencing sync.WaitGroup
	sequencing.Go(func() { _ = seq.Run(seqCtx) })
	defer func() { stopSeq(); sequencing.Wait() }()

	total, warm := k.orders*b.N, warmups(k.clients)
	m, stmts, trips := orderPhase(b, k.clients, total, tracer, order)
	if err := waitUnsequenced(ctx, seqLog); err != nil {
		b.Fatal(err)
	}
	var events, streams, last int64
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT stream), coalesce(max(seq), 0) FROM webhook_events`).
		Scan(&events, &streams, &last); err != nil {
		b.Fatal(err)
	}
	if want := int64(total + warm); events != want || (shared && (streams != 1 || last != want)) {
		b.Fatalf("%d events on %d streams (last sequence %d), want %d", events, streams, last, want)
	}

	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&rows); err != nil {
		b.Fatal(err)
	}
	if want := total + warm; rows != want {
		b.Fatalf("orders table has %d rows, want %d", rows, want)
	}

	reportOrders(b, m, total, runPgbench(b, pgbench, dsn, k.clients, k.pgbenchSeconds), stmts, trips)
}

// waitUnsequenced returns once the log has no event waiting for its number, or fails after a minute.
func waitUnsequenced(ctx context.Context, log *pgstore.EventLog) error {
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := log.Unsequenced(ctx)
		if err != nil || n == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after a minute %d events still wait for their number", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// newOrderServer builds the reference server on pool exactly as examples/orderserver's openBackends
// does with SVC_POSTGRES_DSN (pgserver.Migrate, pgserver.Config and pgserver.Listen, which keeps the
// caches of credentials and pins true until the benchmark ends; without its cleanup loop and without
// a seal key ring, the command's default): every store on PostgreSQL, the request log included
// unless requestLog is false, and the transactional idempotency mode.
func newOrderServer(tb testing.TB, pool *pgxpool.Pool, requestLog bool) *orderserver.Server {
	tb.Helper()
	if err := pgserver.Migrate(context.Background(), pool); err != nil {
		tb.Fatalf("migrate: %v", err)
	}
	cfg, err := pgserver.Config(pool, nil)
	if err != nil {
		tb.Fatal(err)
	}
	listenCtx, stopListen := context.WithCancel(context.Background())
	listened := make(chan error, 1)
	go func() { listened <- pgserver.Listen(listenCtx, cfg, nil) }()
	tb.Cleanup(func() { // before the pool closes: cleanups run last-in first-out
		stopListen()
		if err := <-listened; err != nil {
			tb.Errorf("pgserver.Listen: %v", err)
		}
	})
	cfg.BaseURL = "http://127.0.0.1:8080"
	cfg.DisableRequestLog = !requestLog
	// The benchmark's endpoints (of sandbox keys) are on loopback, which the default guard refuses.
	cfg.Webhooks = orderserver.WebhookOptions{SandboxGuard: &ssrf.Guard{
		Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
	srv, err := orderserver.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return srv
}

// postJSON serves one POST in process, as a client's request would arrive.
func postJSON(h http.Handler, path, apiKey, idemKey, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Idempotency-Key", idemKey)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// requirePgbench finds pgbench: skipped when it is missing, except in CI (CI=true), where that fails.
func requirePgbench(tb testing.TB) string {
	tb.Helper()
	name := os.Getenv(envPgbench)
	if name == "" {
		name = "pgbench"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("pgbench not found (%v): in CI the PostgreSQL throughput benchmark must run", err)
		}
		tb.Skipf("pgbench not found (%v): skipping the PostgreSQL throughput benchmark (set %s)", err, envPgbench)
	}
	return path
}

var tpsLine = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)

// runPgbench creates a database of its own, initialises it (pgbench -i -s 1), runs pgbench -N
// (simple-update: one commit per transaction) with clients clients for seconds seconds, drops the
// database and returns the reported tps.
func runPgbench(b *testing.B, pgbench, dsn string, clients, seconds int) float64 {
	b.Helper()
	ctx := context.Background()
	db := testid.New("svc_bench_pgbench_")
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		b.Fatalf("create database: %v", err)
	}
	b.Cleanup(func() {
		adminExec(b, dsn, "drop database "+db, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
	})
	conn, err := withDatabase(dsn, db)
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(runCtx, pgbench, "-i", "-s", "1", "-q", conn).CombinedOutput(); err != nil {
		b.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(runCtx, pgbench, "-N", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(2, clients)),
		"-T", strconv.Itoa(seconds), conn).CombinedOutput()
	if err != nil {
		b.Fatalf("pgbench -N: %v\n%s", err, out)
	}
	m := tpsLine.FindSubmatch(out)
	if m == nil {
		b.Fatalf("pgbench printed no tps line:\n%s", out)
	}
	tps, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil || tps <= 0 {
		b.Fatalf("pgbench tps %q: %v", m[1], err)
	}
	return tps
}

// withDatabase returns dsn (a URL or a key=value string, both of which libpq and so pgbench accept)
// naming database db instead.
func withDatabase(dsn, db string) (string, error) {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("%s: %w", envPostgres, err)
		}
		u.Path = "/" + db
		u.RawPath = ""
		return u.String(), nil
	}
	return dsn + " dbname=" + db, nil
}

// --- events: ours -----------------------------------------------------------------------------------

// consumer is a local webhook consumer that answers 204 at once and counts what it got.
type consumer struct {
	*httptest.Server
	got atomic.Int64
}

func newConsumer(tb testing.TB) *consumer {
	c := &consumer{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c.got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	tb.Cleanup(c.Close)
	return c
}

// eventPayload is an event's data: JSON of exactly eventPayloadSize bytes.
func eventPayload(i int) []byte {
	head := fmt.Sprintf(`{"id":"ord_%010d","account":"acct_bench","side":"buy","pad":"`, i)
	tail := `"}`
	return []byte(head + strings.Repeat("x", eventPayloadSize-len(head)-len(tail)) + tail)
}

func benchEventsOurs(b *testing.B) {
	dsn := requireDSN(b)
	k := loadKnobs(b)
	ctx := context.Background()
	tracer := newStmtTracer(k.trace)
	pool := schemaPool(b, dsn, 32, tracer)
	if err := pgstore.Migrate(ctx, pool, &pgstore.EventLogOptions{}); err != nil {
		b.Fatal(err)
	}
	log := must(pgstore.NewEventLog(pool, nil))
	cons := newConsumer(b)
	eps := make([]producer.Endpoint, k.endpoints)
	ids := make([]string, k.endpoints)
	for i := range eps {
		ids[i] = fmt.Sprintf("we_bench_%03d", i)
		eps[i] = producer.Endpoint{ID: ids[i], URL: cons.URL + "/hooks/" + ids[i], Owner: "lic_bench",
			Secrets: []string{webhook.NewSecret()}}
	}
	endpoints, err := memstore.NewEndpoints(eps...)
	if err != nil {
		b.Fatal(err)
	}
	pub, err := producer.NewPublisher(log, endpoints, nil)
	if err != nil {
		b.Fatal(err)
	}

	// Loopback needs its own client: the default one refuses private addresses. Many idle
	// connections per host, since every endpoint is on the one consumer; no redirects.
	transport := &http.Transport{Proxy: nil, MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	total := k.events * b.N
	warm := warmups(k.clients)
	payloads := make([][]byte, warm+total)
	for i := range payloads {
		payloads[i] = eventPayload(i)
	}
	publish := func(i int) error {
		_, err := pub.Publish(ctx, ids[i%len(ids)], "order.created", payloads[i])
		return err
	}
	// Warm-up as for the orders; these events are delivered (and counted) with the others.
	appendM := publishPhase(b, k.clients, warm, total, tracer, publish)
	tracer.report(b, "appended event", total)
	appendStmts := tracer.stmts.Load()

	// The wait's backlog polls go through a log of their own, on the untraced pool: they are not the
	// dispatchers' statements.
	waitLog, err := pgstore.NewEventLog(pool, nil)
	if err != nil {
		b.Fatal(err)
	}
	tracer.reset()
	deliverM := startMeter()
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	for range k.dispatchers {
		d, err := producer.NewDispatcher(log, endpoints, &producer.DispatcherOptions{
			Client:       client,
			PollInterval: 10 * time.Millisecond,
			Retention:    -1, // nothing to prune in a fresh schema; keep the pass to delivery alone
		})
		if err != nil {
			stop()
			b.Fatal(err)
		}
		running.Go(func() { _ = d.Run(runCtx) })
	}
	waitErr := waitDelivered(ctx, &cons.got, warm+total, waitLog.Backlog, deliveryDeadline(warm+total))
	deliverM.stop()
	stop()
	running.Wait()
	if waitErr != nil {
		b.Fatal(waitErr)
	}
	tracer.report(b, "delivered event", warm+total)
	deliverStmts := tracer.stmts.Load()
	if got := cons.got.Load(); got != int64(warm+total) {
		b.Logf("the consumer got %d requests for %d events (%d duplicates)", got, warm+total, got-int64(warm+total))
	}

	reportPipeline(b, warm, total, appendM, deliverM, appendStmts, deliverStmts, "append", "appended", "delivery", "delivered")
}

// reportPipeline reports a publish phase (the total timed messages) and a consume phase (all
// warm+total of them): per message, the publish's share and the consume's; rates, their ratio, and
// statements per message of each.
func reportPipeline(b *testing.B, warm, total int, in, out *meter, inStmts, outStmts int64, inNoun, inVerb, outNoun, outVerb string) {
	all := warm + total
	reportPerOp(b, in.elapsed+out.elapsed*time.Duration(total)/time.Duration(all),
		in.dMallocs+out.dMallocs*uint64(total)/uint64(all),
		in.dBytes+out.dBytes*uint64(total)/uint64(all), total)
	inRate, outRate := perSecond(total, in.elapsed), perSecond(all, out.elapsed)
	b.ReportMetric(inRate, inVerb+"/s")
	b.ReportMetric(outRate, outVerb+"/s")
	b.ReportMetric(outRate/inRate, "ratio")
	b.ReportMetric(float64(inStmts)/float64(total), "stmts/"+inNoun)
	b.ReportMetric(float64(outStmts)/float64(all), "stmts/"+outNoun)
}

func deliveryDeadline(events int) time.Duration {
	return time.Minute + time.Duration(events)*5*time.Millisecond
}

// waitDelivered returns once the consumer has had total events (got) and backlog reports none
// undelivered — every outcome recorded, not only received — or fails after within.
func waitDelivered[B any](ctx context.Context, got *atomic.Int64, total int, backlog func(context.Context) ([]B, error), within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		if got.Load() >= int64(total) {
			left, err := backlog(ctx)
			if err != nil {
				return err
			}
			if len(left) == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v the consumer had %d of %d events", within, got.Load(), total)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// --- events: Watermill ------------------------------------------------------------------------------

func benchEventsWatermill(b *testing.B) {
	dsn := requireDSN(b)
	k := loadKnobs(b)
	ctx := context.Background()
	tracer := newStmtTracer(k.trace)
	pool := schemaPool(b, dsn, 32, tracer)
	db := wmsql.BeginnerFromPgx(pool)
	logger := watermill.NopLogger{}
	schema := wmsql.DefaultPostgreSQLSchema{}
	offsets := wmsql.DefaultPostgreSQLOffsetsAdapter{}

	pub, err := wmsql.NewPublisher(db, wmsql.PublisherConfig{SchemaAdapter: schema}, logger)
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	sub, err := wmsql.NewSubscriber(db, wmsql.SubscriberConfig{
		ConsumerGroup:  "bench",
		PollInterval:   10 * time.Millisecond, // as our dispatchers' poll
		ResendInterval: 10 * time.Millisecond,
		RetryInterval:  10 * time.Millisecond,
		SchemaAdapter:  schema,
		OffsetsAdapter: offsets,
	}, logger)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	topics := make([]string, k.endpoints)
	for i := range topics {
		topics[i] = fmt.Sprintf("bench_%03d", i)
		if err := sub.SubscribeInitialize(topics[i]); err != nil {
			b.Fatal(err)
		}
	}

	total := k.events * b.N
	warm := warmups(k.clients)
	payloads := make([][]byte, warm+total)
	for i := range payloads {
		payloads[i] = eventPayload(i)
	}
	publish := func(i int) error {
		return pub.Publish(topics[i%len(topics)], message.NewMessage(watermill.NewUUID(), payloads[i]))
	}
	pubM := publishPhase(b, k.clients, warm, total, tracer, publish)
	pubStmts := tracer.stmts.Load()

	tracer.reset()
	subM := startMeter()
	subCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		got  atomic.Int64
		done = make(chan struct{})
		once sync.Once
	)
	for _, topic := range topics {
		msgs, err := sub.Subscribe(subCtx, topic)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for msg := range msgs {
				if len(msg.Payload) != eventPayloadSize {
					b.Errorf("payload of %d bytes", len(msg.Payload))
				}
				msg.Ack()
				if got.Add(1) == int64(warm+total) {
					once.Do(func() { close(done) })
				}
			}
		}()
	}
	select {
	case <-done:
	case <-time.After(deliveryDeadline(warm + total)):
		b.Fatalf("Watermill consumed %d of %d messages", got.Load(), warm+total)
	}
	subM.stop()
	stop()
	subStmts := tracer.stmts.Load()
	tracer.report(b, "consumed message", warm+total)

	reportPipeline(b, warm, total, pubM, subM, pubStmts, subStmts, "publish", "published", "consume", "consumed")
}
