package pgstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

var evlogTrace = producer.TraceContext{
	TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	TraceState:  "congo=t61rcWkgMzE",
}

// traceObserver gives publishes evlogTrace and keeps the attempts' infos, through its hooks.
type traceObserver struct {
	mu     sync.Mutex
	starts []producer.AttemptInfo
}

func (o *traceObserver) hooks() *producer.Hooks {
	return &producer.Hooks{
		EventTrace:  func(context.Context) producer.TraceContext { return evlogTrace },
		InjectTrace: func(_ context.Context, h webhook.TraceCarrier) { h.Set("traceparent", "attempt") },
		AttemptStart: func(ctx context.Context, a producer.AttemptInfo) context.Context {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.starts = append(o.starts, a)
			return ctx
		},
	}
}

// TestEventLogTraceThroughOutbox: the publishing request's trace context, appended in the caller's
// transaction, survives the commit and the numbering, and reaches the dispatcher's attempt; the
// delivery request carries the header the observer injected.
func TestEventLogTraceThroughOutbox(t *testing.T) {
	ctx := context.Background()
	l, pool, _ := newEventLog(t)
	var (
		mu  sync.Mutex
		got []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	eps := must(memstore.NewEndpoints(producer.Endpoint{ID: "we_a", URL: srv.URL, Owner: "lic_1", Secrets: []string{webhook.NewSecret()}},
		producer.Endpoint{ID: "we_b", URL: srv.URL, Owner: "lic_1", Secrets: []string{webhook.NewSecret()}}))
	obs := &traceObserver{}
	pub := must(producer.NewPublisher(l, eps, &producer.PublisherOptions{Now: func() time.Time { return evlogT0 }, Hooks: obs.hooks()}))

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = pub.WithLog(l.WithDB(tx)).Publish(ctx, "we_a", "order.created", map[string]int{"n": 1})
	require.NoError(t, err)
	_, err = pub.WithLog(l.WithDB(tx)).PublishToOwner(ctx, "lic_1", "order.filled", map[string]int{"n": 2})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	_, err = l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: webhook.Event{Type: "order.created", Created: evlogT0.Unix(), APIVersion: "v1", Data: []byte(`{}`)}})
	require.NoError(t, err, "an append without a trace context")

	d := must(producer.NewDispatcher(l, eps, &producer.DispatcherOptions{Guard: evlogLoopback, Hooks: obs.hooks(),
		Now: func() time.Time { return evlogT0.Add(time.Second) }}))
	for range 3 { // one pass per endpoint holder; the log may split the runs
		_, err := d.DeliverDue(ctx)
		require.NoError(t, err)
	}
	require.Len(t, obs.starts, 4)
	traced := 0
	for _, a := range obs.starts {
		if a.Trace == evlogTrace {
			traced++
		} else {
			require.Equal(t, producer.TraceContext{}, a.Trace)
		}
	}
	require.Equal(t, 3, traced, "the three published events carry the trace context, the bare append none")
	require.Equal(t, []string{"attempt", "attempt", "attempt", "attempt"}, got)
}

// TestEventLogMigrationAddsTraceColumns: tables an earlier version made (without the trace context
// columns) get them, their rows read as untraced, and a migration of tables that are up to date does
// not wait for an open outbox transaction.
func TestEventLogMigrationAddsTraceColumns(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	opts := &pgstore.EventLogOptions{Schema: schema, Table: "hooks"}
	require.NoError(t, pgstore.MigrateUpTo(ctx, pool, 1, opts))
	// As an earlier version left them: no trace context columns, an event numbered and one waiting,
	// and no version table (migrations were not versioned then).
	_, err := pool.Exec(ctx, `DROP TABLE pgstore_migrations;
ALTER TABLE hooks DROP COLUMN traceparent, DROP COLUMN tracestate;
ALTER TABLE hooks_pending DROP COLUMN traceparent, DROP COLUMN tracestate;
INSERT INTO hooks_streams (stream, last_seq) VALUES ('we_old', 1);
INSERT INTO hooks (stream, seq, id, type, created, api_version, data, next_attempt_at)
VALUES ('we_old', 1, 'evt_old1', 'order.created', 1767225600, 'v1', '{}', to_timestamp(1767225600));
INSERT INTO hooks_pending (stream, id, type, created, api_version, data)
VALUES ('we_old', 'evt_old2', 'order.created', 1767225600, 'v1', '{}')`)
	require.NoError(t, err)

	for range 2 {
		require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	}
	for _, table := range []string{"hooks", "hooks_pending"} {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
			WHERE table_schema = $1 AND table_name = $2 AND column_name IN ('traceparent', 'tracestate') AND is_nullable = 'YES'`,
			schema, table).Scan(&n))
		require.Equal(t, 2, n, "%s has both nullable columns", table)
	}
	l := must(pgstore.NewEventLog(pool, opts))
	_, err = l.Append(ctx, driver.StreamEvent{Stream: "we_old", Event: evlogEvent("order.created"),
		TraceParent: evlogTrace.TraceParent, TraceState: evlogTrace.TraceState})
	require.NoError(t, err)
	require.Equal(t, 2, numberAll(t, l))
	ds, err := l.Claim(ctx, driver.ClaimRequest{Now: evlogT0, LeaseUntil: evlogT0.Add(time.Minute), Limit: 10})
	require.NoError(t, err)
	require.Len(t, ds, 3)
	for _, dl := range ds {
		want := producer.TraceContext{}
		if dl.Sequence == 3 {
			want = evlogTrace
		}
		require.Equal(t, want, producer.TraceContext{TraceParent: dl.TraceParent, TraceState: dl.TraceState}, "event %d", dl.Sequence)
	}

	// An outbox transaction holds the pending table while its handler runs; a replica starting now
	// migrates without waiting for it, as there is nothing to alter.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = l.WithDB(tx).Append(ctx, driver.StreamEvent{Stream: "we_old", Event: evlogEvent("order.created")})
	require.NoError(t, err)
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, pgstore.Migrate(mctx, pool, opts))
}

func TestEventLogBacklogZeroValue(t *testing.T) {
	for _, l := range []*pgstore.EventLog{{}, nil} {
		_, err := l.Backlog(context.Background())
		require.ErrorIs(t, err, pgstore.ErrNotBuilt)
	}
}
