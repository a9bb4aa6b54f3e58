package pgstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/versioning"
	"github.com/svcplatform/conventions/versioning/pintest"
)

var pinT0 = time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)

// newPinStore migrates a fresh schema and returns a store on it.
func newPinStore(t testing.TB) (*pgstore.PinStore, *pgxpool.Pool, *pgstore.PinStoreOptions) {
	t.Helper()
	pool, schema := pgtest.Pool(t)
	opts := &pgstore.PinStoreOptions{Schema: schema}
	require.NoError(t, pgstore.Migrate(context.Background(), pool, opts))
	return must(pgstore.NewPinStore(pool, opts)), pool, opts
}

func TestPinStoreConformance(t *testing.T) {
	s, _, _ := newPinStore(t)
	// One store for every subtest: the suite isolates itself with random licensees and versions.
	pintest.Run(t, func(t *testing.T) versioning.PinStore { return s })
}

func TestPinStoreMigration(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	cases := []struct {
		name string
		opts *pgstore.PinStoreOptions
	}{
		{"schema and default table", &pgstore.PinStoreOptions{Schema: schema}},
		{"names that need quoting", &pgstore.PinStoreOptions{Schema: schema + `_Odd "Name"`, Table: `pins; DROP TABLE x`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.opts.Schema != schema {
				t.Cleanup(func() {
					_, _ = pool.Exec(context.Background(), `DROP SCHEMA `+pinQuoteIdent(tc.opts.Schema)+` CASCADE`)
				})
			}
			// Idempotent and safe when replicas start together.
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					if err := pgstore.Migrate(ctx, pool, tc.opts); err != nil {
						t.Errorf("migrate: %v", err)
					}
				})
			}
			wg.Wait()
			require.NoError(t, pgstore.Migrate(ctx, pool, tc.opts))
			s := must(pgstore.NewPinStore(pool, tc.opts))
			p, created, err := s.SetIfAbsent(ctx, "lic_m", "v2", pinT0)
			require.NoError(t, err)
			require.True(t, created)
			require.Equal(t, versioning.Pin{Licensee: "lic_m", Version: "v2", PinnedAt: pinT0}, p)
		})
	}
	require.Contains(t, must(pgstore.MigrationSQL(&pgstore.PinStoreOptions{})), `CREATE TABLE IF NOT EXISTS "version_pins"`)
	require.Contains(t, must(pgstore.MigrationSQL(&pgstore.PinStoreOptions{})), `COLLATE "C"`)
	require.NotContains(t, must(pgstore.MigrationSQL(&pgstore.PinStoreOptions{})), "CREATE SCHEMA")
}

func pinQuoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// A store built on the caller's transaction commits or rolls back with it: a pin moved in the
// same transaction as, say, a licensee's upgrade record.
func TestPinStoreInTransaction(t *testing.T) {
	ctx := context.Background()
	s, pool, opts := newPinStore(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, _, err = must(pgstore.NewPinStore(tx, opts)).SetIfAbsent(ctx, "lic_tx", "v1", pinT0)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	_, err = s.Get(ctx, "lic_tx")
	require.ErrorIs(t, err, versioning.ErrNotPinned)

	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	_, _, err = must(pgstore.NewPinStore(tx, opts)).SetIfAbsent(ctx, "lic_tx", "v1", pinT0)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	p, err := s.Get(ctx, "lic_tx")
	require.NoError(t, err)
	require.Equal(t, "v1", p.Version)
}

// A racing first insert that is still uncommitted: SetIfAbsent waits for it and then reports the
// pin it committed, never a second pin.
func TestPinStoreSetIfAbsentWaitsForUncommitted(t *testing.T) {
	ctx := context.Background()
	s, pool, opts := newPinStore(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, created, err := must(pgstore.NewPinStore(tx, opts)).SetIfAbsent(ctx, "lic_wait", "v2", pinT0)
	require.NoError(t, err)
	require.True(t, created)
	type result struct {
		p       versioning.Pin
		created bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		p, c, err := s.SetIfAbsent(ctx, "lic_wait", "v3", pinT0.Add(time.Second))
		done <- result{p, c, err}
	}()
	// Commit only once the second insert is waiting on the first's row lock.
	deadline := time.Now().Add(patience(t))
	for {
		var waiting int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO %' || $1 || '%'`, opts.Schema).Scan(&waiting))
		if waiting > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the second SetIfAbsent never waited on the lock")
	}
	require.NoError(t, tx.Commit(ctx))
	r := <-done
	require.NoError(t, r.err)
	require.False(t, r.created)
	require.Equal(t, "v2", r.p.Version)
}

// Two replicas of a service share the PostgreSQL store: pins created or moved through one are in
// force on the other.
func TestPinStoreAcrossReplicas(t *testing.T) {
	s, _, _ := newPinStore(t)
	reg, err := versioning.NewRegistry([]versioning.Version{
		{Name: "v1", Deprecated: pinT0.Add(-24 * time.Hour)},
		{Name: "v2"},
	}, []versioning.Change{{Name: "pin_test_step", Version: "v2"}})
	require.NoError(t, err)
	lic := func(r *http.Request) (string, error) { return r.Header.Get("X-Licensee"), nil }
	now := func() time.Time { return pinT0 }
	a := must(versioning.New(reg, &versioning.Options{Now: now, Pins: s, Licensee: lic, FirstUse: versioning.PinRequested}))
	b := must(versioning.New(reg, &versioning.Options{Now: now, Pins: s, Licensee: lic, FirstUse: versioning.PinRequested}))
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	call := func(rt *versioning.Router, path, licensee string) int {
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("X-Licensee", licensee)
		w := httptest.NewRecorder()
		rt.Handler(ok).ServeHTTP(w, r)
		return w.Code
	}
	// Replicas race on one licensee's first requests: one pin, agreed on by both.
	var wg sync.WaitGroup
	codes := make([]int, 16)
	for i := range codes {
		wg.Go(func() { codes[i] = call([]*versioning.Router{a, b}[i%2], "/v2/orders", "lic_shared") })
	}
	wg.Wait()
	for _, c := range codes {
		require.Equal(t, 200, c)
	}
	require.Equal(t, 403, call(a, "/v1/orders", "lic_shared"))
	require.Equal(t, 403, call(b, "/v1/orders", "lic_shared"))

	_, err = a.Repin(context.Background(), "lic_shared", "v1")
	require.NoError(t, err)
	require.Equal(t, 200, call(b, "/v1/orders", "lic_shared"), "the other replica sees the new pin")
	pins, err := s.List(context.Background(), "v1", "", 10)
	require.NoError(t, err)
	require.Len(t, pins, 1)
	require.Equal(t, "lic_shared", pins[0].Licensee)
}

// TestPinStoreMigrationPrevious: migration 3 adds the pin's previous version to a table in service.
// While a transaction that wrote a pin stays open the column cannot be added, and the migration
// waits for it; but it asks for its lock with a short timeout, again and again, so readers of the
// table — every request's pin lookup on the replicas still running the earlier version — are never
// queued behind it for longer than that. The pins already there read as pins that never moved.
func TestPinStoreMigrationPrevious(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	opts := &pgstore.PinStoreOptions{Schema: schema}
	require.NoError(t, pgstore.MigrateUpTo(ctx, pool, 2, opts))
	table := pgx.Identifier{schema, pgstore.DefaultPinTable}.Sanitize()
	insert := `INSERT INTO ` + table + ` (licensee, version, pinned_at) VALUES ($1, $2, $3)` // as the earlier version does
	_, err := pool.Exec(ctx, insert, "lic_1", "v2", pinT0)
	require.NoError(t, err)

	writer, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = writer.Rollback(ctx) }()
	_, err = writer.Exec(ctx, insert, "lic_2", "v1", pinT0)
	require.NoError(t, err)

	migrated := make(chan error, 1)
	go func() { migrated <- pgstore.Migrate(ctx, pool, opts) }()
	// Wait until migration 3 has been blocked by the writer at least once.
	writerPID := int32(writer.Conn().PgConn().PID())
	deadline := time.Now().Add(patience(t))
	for blocked := false; !blocked; {
		select {
		case err := <-migrated:
			t.Fatalf("the migration did not wait for the open write: %v", err)
		default:
		}
		require.True(t, time.Now().Before(deadline), "the migration never waited for the writer's lock")
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE $1 = ANY (pg_blocking_pids(pid)) AND query LIKE '-- The rollback window%')`, writerPID).Scan(&blocked))
	}
	for i := range 10 {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var v string
		err := pool.QueryRow(rctx, `SELECT version FROM `+table+` WHERE licensee = 'lic_1'`).Scan(&v)
		cancel()
		require.NoError(t, err, "reader %d is not held up", i)
		require.Equal(t, "v2", v)
	}
	select {
	case err := <-migrated:
		t.Fatalf("the migration ended while the writer's transaction was open: %v", err)
	default:
	}

	require.NoError(t, writer.Commit(ctx))
	require.NoError(t, <-migrated)
	s := must(pgstore.NewPinStore(pool, opts))
	for _, lic := range []string{"lic_1", "lic_2"} {
		p, err := s.Get(ctx, lic)
		require.NoError(t, err)
		require.Empty(t, p.Previous, "%s was pinned before pins had a previous version", lic)
	}
	p, err := s.CompareAndSwap(ctx, "lic_2", "v1", "v2", pinT0.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, versioning.Pin{Licensee: "lic_2", Version: "v2", PinnedAt: pinT0.Add(time.Hour), Previous: "v1"}, p)
	require.NoError(t, pgstore.Migrate(ctx, pool, opts), "running it again changes nothing")
}

// Replicas of a service roll one licensee's upgrade back at once, through the shared store: exactly
// one rollback moves the pin, and the others find nothing left to roll back.
func TestPinStoreRollbackAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	s, _, opts := newPinStore(t)
	other := must(pgstore.NewPinStore(replicaPool(t), opts))
	reg, err := versioning.NewRegistry([]versioning.Version{{Name: "v1"}, {Name: "v2"}},
		[]versioning.Change{{Name: "pin_test_step", Version: "v2"}})
	require.NoError(t, err)
	now := func() time.Time { return pinT0.Add(time.Hour) }
	routers := []*versioning.Router{
		must(versioning.New(reg, &versioning.Options{Now: now, Pins: s})),
		must(versioning.New(reg, &versioning.Options{Now: now, Pins: other})),
	}
	_, _, err = s.SetIfAbsent(ctx, "lic_roll", "v1", pinT0)
	require.NoError(t, err)
	up, err := routers[0].Upgrade(ctx, "lic_roll", "v2")
	require.NoError(t, err)
	require.Equal(t, "v1", up.Previous)

	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() { _, errs[i] = routers[i%2].Rollback(ctx, "lic_roll") })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		require.ErrorIs(t, err, versioning.ErrNoRollback)
	}
	require.Equal(t, 1, won, "exactly one rollback wins")
	p, err := s.Get(ctx, "lic_roll")
	require.NoError(t, err)
	require.Equal(t, "v1", p.Version)
	require.Equal(t, "v2", p.Previous)
}

func BenchmarkPinStoreGet(b *testing.B) {
	s, _, _ := newPinStore(b)
	ctx := context.Background()
	_, _, err := s.SetIfAbsent(ctx, "lic_bench", "v2", pinT0)
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get(ctx, "lic_bench"); err != nil {
			b.Fatal(err)
		}
	}
}
