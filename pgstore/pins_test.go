package pgstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

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
