package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/driver/drivertest"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

var evlogT0 = time.Unix(1767225600, 0).UTC()

// newEventLog migrates a fresh schema and returns an event log on it.
func newEventLog(t testing.TB) (*pgstore.EventLog, *pgxpool.Pool, *pgstore.EventLogOptions) {
	t.Helper()
	pool, schema := pgtest.Pool(t)
	opts := &pgstore.EventLogOptions{Schema: schema}
	require.NoError(t, pgstore.Migrate(context.Background(), pool, opts))
	return must(pgstore.NewEventLog(pool, opts)), pool, opts
}

func TestEventLogConformance(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) driver.Log {
		_, _, opts := newEventLog(t)
		return must(pgstore.NewEventLog(fastCommitPool(t), opts))
	})
}

// fastCommitPool is a second pool on the test database whose sessions do not wait for the WAL flush
// at commit (synchronous_commit = off). Visibility, locking and rollback are unchanged — only a crash
// of the server could lose the last commits — so the suite checks the same behaviour, but the 8,000
// appends that queue on one counter row no longer wait for 8,000 disk flushes under -race.
func fastCommitPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func evlogEvent(typ string) webhook.Event {
	return webhook.Event{Type: typ, Created: evlogT0.Unix(), APIVersion: "v1", Data: json.RawMessage(`{}`)}
}

func evlogSeqs(t *testing.T, l driver.Log, stream string) []uint64 {
	t.Helper()
	evs, _, err := l.Range(context.Background(), stream, 1, math.MaxUint64, producer.MaxRangeLimit)
	require.NoError(t, err)
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Sequence
	}
	return out
}

// numberAll numbers every committed pending event of l (Sequence until none waits) and returns how
// many it numbered. A Sequence that numbers nothing while events wait met a numbering lock another
// test's log holds: tables of the same unqualified name in other schemas share the locks' keys.
func numberAll(t testing.TB, l *pgstore.EventLog) int {
	t.Helper()
	n := 0
	for tries := 0; ; {
		runs, err := l.Sequence(context.Background(), 1000)
		require.NoError(t, err)
		if len(runs) == 0 {
			left, err := l.Unsequenced(context.Background())
			require.NoError(t, err)
			if left == 0 {
				return n
			}
			if tries++; tries > 10000 {
				t.Fatalf("%d events stay unnumbered", left)
			}
			runtime.Gosched()
			continue
		}
		for _, r := range runs {
			n += len(r.IDs)
		}
	}
}

func TestEventLogTransactions(t *testing.T) {
	ctx := context.Background()
	t.Run("a rolled-back append leaves nothing to number", func(t *testing.T) {
		l, pool, opts := newEventLog(t)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		e, err := must(pgstore.NewEventLog(tx, opts)).Append(ctx, driver.StreamEvent{Stream: "we_a", Event: evlogEvent("order.created")})
		require.NoError(t, err)
		require.Zero(t, e.Sequence, "numbered after the commit, not at Append")
		require.NotEmpty(t, e.ID)
		require.NoError(t, tx.Rollback(ctx))
		require.Zero(t, numberAll(t, l))

		for range 2 {
			_, err = l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: evlogEvent("order.created")})
			require.NoError(t, err)
		}
		require.Equal(t, 2, numberAll(t, l))
		require.Equal(t, []uint64{1, 2}, evlogSeqs(t, l, "we_a"), "the rolled-back event took no number")
	})

	t.Run("appends to one stream do not wait for each other", func(t *testing.T) {
		l, pool, opts := newEventLog(t)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		first, err := must(pgstore.NewEventLog(tx, opts)).Append(ctx, driver.StreamEvent{Stream: "we_a", Event: evlogEvent("order.created")})
		require.NoError(t, err)

		// The first transaction is still open: the second append neither waits for it nor is numbered
		// behind it. Before issue 20 this append queued on the stream's counter row.
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		second, err := l.Append(short, driver.StreamEvent{Stream: "we_a", Event: evlogEvent("order.shipped")})
		require.NoError(t, err)
		require.Equal(t, 1, numberAll(t, l), "only the committed event is numbered")
		evs, _, err := l.Range(ctx, "we_a", 1, math.MaxUint64, 10)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		require.Equal(t, second.ID, evs[0].ID)
		require.Equal(t, uint64(1), evs[0].Sequence)

		require.NoError(t, tx.Commit(ctx))
		require.Equal(t, 1, numberAll(t, l))
		evs, _, err = l.Range(ctx, "we_a", 1, math.MaxUint64, 10)
		require.NoError(t, err)
		require.Equal(t, []string{second.ID, first.ID}, []string{evs[0].ID, evs[1].ID},
			"numbered in the order they became visible")
		require.Equal(t, []uint64{1, 2}, evlogSeqs(t, l, "we_a"))
	})

	t.Run("the appending transaction sees its own pending event", func(t *testing.T) {
		_, pool, opts := newEventLog(t)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		tl := must(pgstore.NewEventLog(tx, opts))
		_, err = tl.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: evlogEvent("order.created")})
		require.NoError(t, err)
		n, err := tl.Unsequenced(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		n, err = must(pgstore.NewEventLog(pool, opts)).Unsequenced(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "nobody else sees it before the commit")
	})
}

// TestEventLogOutbox is the transactional outbox: the business row and its event commit together or
// not at all.
func TestEventLogOutbox(t *testing.T) {
	ctx := context.Background()
	l, pool, opts := newEventLog(t)
	_, err := pool.Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY)`)
	require.NoError(t, err)
	eps, err := memstore.NewEndpoints(producer.Endpoint{ID: "we_a", URL: "https://example.com/hook",
		Secrets: []string{webhook.NewSecret()}, Owner: "lic_1"})
	require.NoError(t, err)
	pub, err := producer.NewPublisher(l, eps, &producer.PublisherOptions{Now: func() time.Time { return evlogT0 }})
	require.NoError(t, err)

	place := func(id string, commit bool) {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, id)
		require.NoError(t, err)
		_, err = pub.WithLog(must(pgstore.NewEventLog(tx, opts))).Publish(ctx, "we_a", "order.created", map[string]string{"id": id})
		require.NoError(t, err)
		if commit {
			require.NoError(t, tx.Commit(ctx))
		}
	}
	place("ord_1", true)
	place("ord_2", false)
	place("ord_3", true)

	var orders int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders))
	require.Equal(t, 2, orders)
	require.Equal(t, 2, numberAll(t, l))
	evs, _, err := l.Range(ctx, "we_a", 1, math.MaxUint64, 10)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.JSONEq(t, `{"id":"ord_1"}`, string(evs[0].Data))
	require.JSONEq(t, `{"id":"ord_3"}`, string(evs[1].Data))
	require.Equal(t, []uint64{1, 2}, []uint64{evs[0].Sequence, evs[1].Sequence}, "the rolled-back order left no gap")
}

func TestEventLogMigration(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	opts := &pgstore.EventLogOptions{Schema: schema + "_x", Table: "hooks"}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+opts.Schema+`" CASCADE`) })

	sql := must(pgstore.MigrationSQL(opts))
	require.Contains(t, sql, `CREATE SCHEMA IF NOT EXISTS "`+opts.Schema+`"`)
	require.Contains(t, sql, `"`+opts.Schema+`"."hooks_streams"`)
	// Only the history's own ID may come from a SEQUENCE (an IDENTITY column): never an event's.
	events := strings.ToUpper(sql[:strings.Index(sql, "_attempts")])
	require.NotContains(t, events, "SERIAL", "sequences come from the counter row, never a SEQUENCE")
	require.NotContains(t, events, "IDENTITY")
	require.NotContains(t, strings.ToUpper(sql), "SERIAL")

	for range 2 { // idempotent
		require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	}
	l := must(pgstore.NewEventLog(pool, opts))
	_, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: evlogEvent("order.created")})
	require.NoError(t, err)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM "`+opts.Schema+`"."hooks_pending"`).Scan(&n))
	require.Equal(t, 1, n, "the configured schema holds the pending table")
	require.Equal(t, 1, numberAll(t, l))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM "`+opts.Schema+`"."hooks"`).Scan(&n))
	require.Equal(t, 1, n, "the configured schema and table hold the event")

	// Replicas starting together migrate one at a time.
	migrateAsReplicas(t, pool, opts)
}

func TestEventLogDefaultsToSearchPath(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.Pool(t) // search_path is the test's schema
	require.NoError(t, pgstore.Migrate(ctx, pool, &pgstore.EventLogOptions{}))
	l := must(pgstore.NewEventLog(pool, nil))
	_, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: evlogEvent("order.created")})
	require.NoError(t, err)
	require.Equal(t, 1, numberAll(t, l))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM webhook_events_streams`).Scan(&n))
	require.Equal(t, 1, n)
}

// TestEventLogSimpleProtocol runs the log through a pool that uses the simple protocol (as behind
// PgBouncer in transaction mode), where every value arrives in text format.
func TestEventLogSimpleProtocol(t *testing.T) {
	ctx := context.Background()
	_, _, opts := newEventLog(t)
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	l := must(pgstore.NewEventLog(pool, opts))

	datas := []string{`{}`, `{"note":"café ☕ \u0000 \\ \"q\"","n":-1.5e3}`, `[1, 2,   3]`, `"` + strings.Repeat("x", 70<<10) + `"`}
	for i, d := range datas {
		e, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: webhook.Event{ID: fmt.Sprintf("evt_%d", i), Type: "order.created", Created: evlogT0.Unix(),
			APIVersion: "2026-01-01", Data: json.RawMessage(d)}})
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("evt_%d", i), e.ID)
	}
	require.Equal(t, len(datas), numberAll(t, l))
	evs, more, err := l.Range(ctx, "we_a", 1, math.MaxUint64, 10)
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, evs, len(datas))
	for i, e := range evs {
		require.Equal(t, fmt.Sprintf("evt_%d", i), e.ID)
		require.Equal(t, uint64(i+1), e.Sequence)
		require.Equal(t, evlogT0.Unix(), e.Created)
		require.Equal(t, "2026-01-01", e.APIVersion)
		require.Equal(t, datas[i], string(e.Data), "byte for byte")
	}
	ds, err := l.Claim(ctx, driver.ClaimRequest{Now: evlogT0, LeaseUntil: evlogT0.Add(time.Minute), Limit: 10})
	require.NoError(t, err)
	require.Len(t, ds, len(datas))
	require.Equal(t, datas[1], string(ds[1].Event.Data))
	require.NoError(t, l.Failed(ctx, ds[0].Lease, driver.Attempt{At: evlogT0, RetryAt: evlogT0.Add(time.Hour), Reason: "status 500"}))
	st, err := l.Status(ctx, "we_a", 1)
	require.NoError(t, err)
	require.Equal(t, 1, st.Attempts)
	require.True(t, st.NextAttempt.Equal(evlogT0.Add(time.Hour)))
	n, err := l.Cleanup(ctx, evlogT0.Add(time.Second), 2)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, _, err = l.Range(ctx, "we_a", 1, 10, 10)
	var pe *driver.PrunedError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, uint64(3), pe.FirstRetained)
}

func TestEventLogStreamQuota(t *testing.T) {
	// Racing appenders each check committed state: a stream can pass its bound by one event per
	// appender in flight at once (EventLogOptions.MaxStreamEvents).
	drivertest.RunStreamQuota(t, func(t *testing.T, max int) driver.Log {
		pool, schema := pgtest.Pool(t)
		opts := &pgstore.EventLogOptions{Schema: schema, MaxStreamEvents: max}
		require.NoError(t, pgstore.Migrate(context.Background(), pool, opts))
		return must(pgstore.NewEventLog(fastCommitPool(t), opts))
	}, drivertest.QuotaRacers-1)
}
