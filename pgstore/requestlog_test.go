package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/requestlog"
	"github.com/svcplatform/conventions/requestlog/requestlogtest"
)

func newRequestLogStore(t testing.TB) (*pgstore.RequestLogStore, pgstore.DB, string) {
	pool, schema := pgtest.Pool(t)
	opts := &pgstore.RequestLogStoreOptions{Schema: schema}
	require.NoError(t, pgstore.Migrate(context.Background(), pool, opts))
	return must(pgstore.NewRequestLogStore(pool, opts)), pool, schema
}

func TestRequestLogStoreConformance(t *testing.T) {
	requestlogtest.Run(t, func(t *testing.T) requestlog.Store {
		s, _, _ := newRequestLogStore(t)
		return s
	})
}

func TestRequestLogMigration(t *testing.T) {
	pool, schema := pgtest.Pool(t)
	ctx := context.Background()
	opts := &pgstore.RequestLogStoreOptions{Schema: schema + "_reqlog", Table: "support requests"}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+opts.Schema+`" CASCADE`) })

	sql := must(pgstore.MigrationSQL(opts))
	require.Contains(t, sql, `"`+opts.Schema+`"."support requests"`)
	require.Contains(t, must(pgstore.MigrationSQL(&pgstore.RequestLogStoreOptions{})), `"`+pgstore.DefaultRequestLogTable+`"`)
	require.NotContains(t, must(pgstore.MigrationSQL()), pgstore.DefaultRequestLogTable, "migrated only when named")

	// Replicas starting together, then a rerun.
	migrateAsReplicas(t, pool, opts)
	require.Equal(t, []string{"requestlog support requests 1"}, versionKeys(t, pool, opts.Schema))

	indexes := indexDefs(t, pool, opts.Schema, opts.Table)
	require.Len(t, indexes, 3)
	require.Contains(t, indexes[0], `(at)`)
	require.Contains(t, indexes[1], `(owner, at DESC, request_id DESC)`)
	require.Contains(t, indexes[2], `(owner, request_id)`, "the primary key")

	s := must(pgstore.NewRequestLogStore(pool, opts))
	e := requestlog.Entry{RequestID: "req_1", Owner: "live:lic_a", Method: "GET", Status: 200, At: time.Unix(1767225600, 0).UTC()}
	require.NoError(t, s.Insert(ctx, []requestlog.Entry{e}))
	got, err := s.Get(ctx, e.Owner, e.RequestID)
	require.NoError(t, err)
	require.Equal(t, e, got)
}

// The statements read through the indexes, not the whole table: a list of one owner newest first
// (the owner index, in its order: no sort), a lookup by ID (the primary key), and the retention (the
// time index, BRIN).
func TestRequestLogStoreUsesIndexes(t *testing.T) {
	s, pool, schema := newRequestLogStore(t)
	ctx := context.Background()
	var batch []requestlog.Entry
	t0 := time.Unix(1767225600, 0).UTC()
	for i := range 2000 {
		batch = append(batch, requestlog.Entry{RequestID: fmt.Sprintf("req_%05d", i), Owner: fmt.Sprintf("live:lic_%d", i%20),
			Method: "GET", Status: 200, At: t0.Add(time.Duration(i) * time.Second)})
	}
	require.NoError(t, s.Insert(ctx, batch))
	_, err := pool.Exec(ctx, `ANALYZE "`+schema+`".request_log`)
	require.NoError(t, err)
	plan := func(sql string, args ...any) string {
		rows, err := pool.Query(ctx, "EXPLAIN "+sql, args...)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return strings.Join(lines, "\n")
	}
	list, get, del := pgstore.RequestLogStatements(s)
	p := plan(list, "live:lic_3", int32(0), int32(0), "", "", "", nil, t0.Add(time.Hour), "", int64(21))
	require.Contains(t, p, "request_log_owner_at_idx", p)
	require.NotContains(t, p, "Sort", p)
	p = plan(list, "live:lic_3", int32(0), int32(2), "", "", "", nil, nil, "req_01983", int64(21))
	require.Contains(t, p, "request_log_owner_at_idx", p)
	require.Contains(t, p, "request_log_pkey", p, "the cursor")
	p = plan(get, "live:lic_3", "req_00003")
	require.Contains(t, p, "request_log_pkey", p)
	// The time index is a BRIN index, which the planner prefers to reading the table only once the
	// table is large; here it is told to avoid the sequential scan, to show the index serves.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL enable_seqscan = off")
	require.NoError(t, err)
	rows, err := tx.Query(ctx, "EXPLAIN "+del, t0.Add(time.Minute), int64(1000))
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	p = strings.Join(lines, "\n")
	require.Contains(t, p, "request_log_at_idx", p)
}

// A request through the real chain, its entry written to PostgreSQL by the Log: the table holds
// neither the API key nor the body, whatever the client put where.
func TestRequestLogStoreKeepsNoSecret(t *testing.T) {
	s, pool, schema := newRequestLogStore(t)
	ctx := context.Background()
	iss := must(apikey.NewIssuer(apikey.NewMemoryCredentialStore(), nil))
	issued, err := iss.Issue(ctx, apikey.Evaluation{Licensee: "lic_a"})
	require.NoError(t, err)
	auth := must(apikey.NewAuthenticator(iss, nil))
	reqlog := must(requestlog.New(&requestlog.Options{Store: s}))
	t.Cleanup(func() { _ = reqlog.Close(context.Background()) })

	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/orders", func(w http.ResponseWriter, r *http.Request) {
		apierror.WriteJSON(w, r, http.StatusCreated, map[string]string{"id": "ord_1"})
	})
	problems := apierror.Writer{}
	h := apierror.WithRequestID(reqlog.Handler(auth.Handler(problems.ServeMux(mux))))

	const marker = "MARKER-7f3a"
	for _, key := range []string{issued.APIKey, issued.APIKey + "x"} {
		r := httptest.NewRequest(http.MethodPost, "/v1/orders?note="+marker, strings.NewReader(`{"secret":"`+marker+`"}`))
		r.Header.Set("Authorization", "Bearer "+key)
		r.Header.Set("X-Note", marker)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
	}
	require.NoError(t, reqlog.Flush(ctx))
	require.Equal(t, uint64(2), reqlog.Stats().Written)

	var dump string
	require.NoError(t, pool.QueryRow(ctx, `SELECT string_agg(t::text, ' ') FROM "`+schema+`".request_log t`).Scan(&dump))
	require.Contains(t, dump, issued.KeyID)
	require.Contains(t, dump, "POST /v1/orders")
	require.NotContains(t, dump, marker)
	require.NotContains(t, dump, issued.APIKey[len(issued.APIKey)-20:])
	require.NotContains(t, dump, "sk_")
}

// Retention on PostgreSQL: the Log removes what is older than Retention, and nothing else.
func TestRequestLogStoreRetention(t *testing.T) {
	s, _, _ := newRequestLogStore(t)
	ctx := context.Background()
	clock := pgtest.NewClock(time.Unix(1767225600, 0).UTC())
	var old []requestlog.Entry
	for i := range 2500 { // more than one pruning step
		old = append(old, requestlog.Entry{RequestID: fmt.Sprintf("req_old%05d", i), Owner: "o", Method: "GET", Status: 200,
			At: clock.Now().Add(-8 * 24 * time.Hour)})
	}
	fresh := requestlog.Entry{RequestID: "req_fresh", Owner: "o", Method: "GET", Status: 200, At: clock.Now().Add(-time.Hour)}
	require.NoError(t, s.Insert(ctx, append(old, fresh)))

	reqlog := must(requestlog.New(&requestlog.Options{Store: s, Now: clock.Now, FlushInterval: time.Hour}))
	t.Cleanup(func() { _ = reqlog.Close(context.Background()) })
	require.NoError(t, reqlog.Flush(ctx)) // the retention is due at once: it runs after the flush
	require.Equal(t, uint64(2500), reqlog.Stats().Pruned)
	list, more, err := s.List(ctx, requestlog.Query{Owner: "o", Limit: 10})
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, list, 1)
	require.Equal(t, "req_fresh", list[0].RequestID)
}

// Text PostgreSQL cannot hold fails no batch.
func TestRequestLogStoreOddText(t *testing.T) {
	s, _, _ := newRequestLogStore(t)
	ctx := context.Background()
	odd := requestlog.Entry{RequestID: "req_odd", Owner: "o", Method: "GET", Route: "GET /a\x00b\xff", Status: 200, At: time.Unix(1767225600, 0)}
	ok := requestlog.Entry{RequestID: "req_ok", Owner: "o", Method: "GET", Status: 200, At: time.Unix(1767225601, 0)}
	require.NoError(t, s.Insert(ctx, []requestlog.Entry{odd, ok}))
	got, err := s.Get(ctx, "o", "req_odd")
	require.NoError(t, err)
	require.Equal(t, "GET /a\uFFFDb\uFFFD", got.Route)
	_, err = s.Get(ctx, "o", "req_ok")
	require.NoError(t, err)
}

func TestRequestLogStoreZeroValue(t *testing.T) {
	ctx := t.Context()
	for _, s := range []*pgstore.RequestLogStore{{}, nil} {
		require.ErrorIs(t, s.Insert(ctx, []requestlog.Entry{{RequestID: "req_1"}}), pgstore.ErrNotBuilt)
		_, err := s.Get(ctx, "o", "req_1")
		require.ErrorIs(t, err, pgstore.ErrNotBuilt)
		_, _, err = s.List(ctx, requestlog.Query{Owner: "o", Limit: 1})
		require.ErrorIs(t, err, pgstore.ErrNotBuilt)
		_, err = s.DeleteBefore(ctx, time.Now(), 1)
		require.ErrorIs(t, err, pgstore.ErrNotBuilt)
	}
	_, err := pgstore.NewRequestLogStore(nil, nil)
	require.Error(t, err)
}

// BenchmarkRequestLogInsert writes batches of the Log's default size (500) from 4 goroutines, as
// replicas' flushers would: one round trip per batch.
func BenchmarkRequestLogInsert(b *testing.B) {
	for _, size := range []int{100, requestlog.DefaultBatchSize} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s, _, _ := newRequestLogStore(b)
			t0 := time.Unix(1767225600, 0).UTC()
			var mu sync.Mutex
			next := 0
			b.ReportAllocs()
			b.SetParallelism(2)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				batch := make([]requestlog.Entry, size)
				for pb.Next() {
					mu.Lock()
					base := next
					next += size
					mu.Unlock()
					for i := range batch {
						n := base + i
						batch[i] = requestlog.Entry{RequestID: fmt.Sprintf("req_%026d", n), Owner: fmt.Sprintf("live:lic_%d", n%50),
							KeyID: "key_2vq4mxd1k8c0f6hz7t3w9bn5ya", Environment: "live", Method: "POST", Route: "POST /v1/orders",
							Status: 201, IdempotencyKey: "order-" + fmt.Sprint(n), Version: "v2", Latency: 3 * time.Millisecond,
							At: t0.Add(time.Duration(n) * time.Microsecond)}
					}
					if err := s.Insert(context.Background(), batch); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}
