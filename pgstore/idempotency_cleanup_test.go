package pgstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
)

// idemDeleteCounter is a DB that records the rows each DELETE statement removed.
type idemDeleteCounter struct {
	pgstore.DB
	mu      sync.Mutex
	deletes []int64
}

func (d *idemDeleteCounter) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := d.DB.Exec(ctx, sql, args...)
	if err == nil && strings.HasPrefix(sql, "DELETE") {
		d.mu.Lock()
		d.deletes = append(d.deletes, tag.RowsAffected())
		d.mu.Unlock()
	}
	return tag, err
}

func (d *idemDeleteCounter) recorded() []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]int64(nil), d.deletes...)
}

// idemLogCounter is a slog.Handler that keeps the errors of the records logged at Error.
type idemLogCounter struct {
	mu     sync.Mutex
	errors []string
}

func (h *idemLogCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *idemLogCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *idemLogCounter) WithGroup(string) slog.Handler            { return h }

func (h *idemLogCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelError {
		return nil
	}
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" {
			msg = a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	h.errors = append(h.errors, msg)
	h.mu.Unlock()
	return nil
}

func (h *idemLogCounter) logged() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.errors...)
}

// idemEventually polls cond until it holds, failing the test only when the test binary's -timeout
// draws near (patience): what the callers wait for is a count, which a busy machine only delays.
func idemEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience(t))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// idemFillExpired claims n keys under scope that are kept until expiresAt, completing every other one,
// in parallel.
func idemFillExpired(t *testing.T, s driver.Store, scope string, n int, claimedAt, expiresAt time.Time) {
	t.Helper()
	ctx := context.Background()
	work := make(chan int)
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			for i := range work {
				k := driver.Key{Scope: scope, Key: fmt.Sprintf("k%05d", i)}
				c, err := s.Claim(ctx, k, idemFP1, claimedAt, claimedAt.Add(idemLease), expiresAt)
				if err != nil || c.Status != driver.Claimed {
					t.Errorf("claim %v: %v %v", k, c.Status, err)
					continue
				}
				if i%2 == 0 {
					if err := s.Complete(ctx, k, c.Token, driver.Response{Status: 201}, expiresAt); err != nil {
						t.Errorf("complete %v: %v", k, err)
					}
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}

func idemCountRows(t *testing.T, pool *pgxpool.Pool, schema, where string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM "`+schema+`".idem WHERE `+where).Scan(&n))
	return n
}

// TestIdempotencyRunCleanupDrainsInBatches: a backlog of 2,500 expired records is deleted by the
// first pass in statements of at most Batch rows, live records stay, the expiry is judged by the
// injected clock (by the wall clock no record here has expired), and cancelling ends the loop.
func TestIdempotencyRunCleanupDrainsInBatches(t *testing.T) {
	s, pool, schema := newIdemStore(t)
	base := time.Now().UTC()
	idemFillExpired(t, s, "lic_expired", 2500, base, base.Add(time.Hour))
	idemFillExpired(t, s, "lic_live", 10, base, base.Add(48*time.Hour))
	require.Equal(t, 2510, idemCountRows(t, pool, schema, "true"))

	counter := &idemDeleteCounter{DB: pool}
	cs := must(pgstore.NewIdempotencyStore(counter, &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}))
	logs := &idemLogCounter{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cs.RunCleanup(ctx, &pgstore.CleanupOptions{
			Interval: time.Hour, // one pass is all this test may need
			Batch:    1000,
			Now:      func() time.Time { return base.Add(2 * time.Hour) },
			Logger:   slog.New(logs),
		})
	}()
	idemEventually(t, "expired records deleted", func() bool { return idemCountRows(t, pool, schema, "true") == 10 })
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("RunCleanup did not return after its context was cancelled")
	}

	require.Equal(t, 10, idemCountRows(t, pool, schema, "scope = 'lic_live'"), "live records are kept")
	deletes := counter.recorded()
	require.GreaterOrEqual(t, len(deletes), 3, "a backlog drains in several statements: %v", deletes)
	var total int64
	for _, n := range deletes {
		require.LessOrEqual(t, n, int64(1000), "a statement removes at most Batch rows: %v", deletes)
		total += n
	}
	require.EqualValues(t, 2500, total, "%v", deletes)
	require.Empty(t, logs.logged())
}

// TestIdempotencyRunCleanupSurvivesFailures: passes that fail (connections cut, a stalled server, a
// closed pool) are logged and retried at the next interval; the loop never ends on an error, deletes
// the backlog once the database is back, and returns when its context is cancelled.
func TestIdempotencyRunCleanupSurvivesFailures(t *testing.T) {
	run := func(t *testing.T, s *pgstore.IdempotencyStore, now time.Time) (*idemLogCounter, func()) {
		logs := &idemLogCounter{}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- s.RunCleanup(ctx, &pgstore.CleanupOptions{
				Interval: 50 * time.Millisecond, // also each statement's deadline
				Batch:    100,
				Now:      func() time.Time { return now },
				Logger:   slog.New(logs),
			})
		}()
		stop := func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("RunCleanup did not return after its context was cancelled")
			}
			for _, msg := range logs.logged() {
				require.NotContains(t, msg, context.Canceled.Error(), "stopping is not a failure")
			}
		}
		t.Cleanup(cancel)
		return logs, stop
	}

	t.Run("connections cut, then a stall", func(t *testing.T) {
		direct, pool, schema := newIdemStore(t)
		base := time.Now().UTC()
		idemFillExpired(t, direct, "lic_a", 250, base, base.Add(time.Hour))
		proxied, proxy := idemProxiedPool(t, schema)
		s := must(pgstore.NewIdempotencyStore(proxied, &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}))

		proxy.Cut()
		logs, stop := run(t, s, base.Add(2*time.Hour))
		idemEventually(t, "three failed passes logged", func() bool { return len(logs.logged()) >= 3 })
		require.Equal(t, 250, idemCountRows(t, pool, schema, "true"))
		proxy.Restore()
		idemEventually(t, "the backlog deleted once the server is back", func() bool { return idemCountRows(t, pool, schema, "true") == 0 })

		// A stalled server: each statement gives up at its deadline, and the loop carries on.
		failed := len(logs.logged())
		proxy.Stall()
		t.Cleanup(proxy.Resume)
		idemEventually(t, "three passes failed on the stall", func() bool { return len(logs.logged()) >= failed+3 })
		for _, msg := range logs.logged()[failed:] {
			require.Contains(t, msg, context.DeadlineExceeded.Error())
		}
		idemFillExpired(t, direct, "lic_b", 150, base, base.Add(time.Hour))
		proxy.Resume()
		idemEventually(t, "the new backlog deleted after the stall", func() bool { return idemCountRows(t, pool, schema, "true") == 0 })
		stop()
	})

	t.Run("closed pool", func(t *testing.T) {
		pool, err := pgxpool.New(context.Background(), pgtest.DSN(t))
		require.NoError(t, err)
		pool.Close()
		s := must(pgstore.NewIdempotencyStore(pool, nil))
		logs, stop := run(t, s, time.Now())
		idemEventually(t, "three failed passes logged", func() bool { return len(logs.logged()) >= 3 })
		stop()
		for _, msg := range logs.logged() {
			require.Contains(t, msg, "closed pool")
		}
	})
}
