package pgstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/portal"
	"github.com/svcplatform/conventions/portal/portaltest"
)

func newPortalStore(t testing.TB) (*pgstore.PortalStore, *pgxpool.Pool, string) {
	pool, schema := pgtest.Pool(t)
	opts := &pgstore.PortalStoreOptions{Schema: schema}
	require.NoError(t, pgstore.Migrate(context.Background(), pool, opts))
	return must(pgstore.NewPortalStore(pool, opts)), pool, schema
}

func TestPortalStoreConformance(t *testing.T) {
	portaltest.Run(t, func(t *testing.T) portal.Store {
		s, _, _ := newPortalStore(t)
		return s
	})
}

// portalKey is a key as the Portal derives it: a SHA-256 in hex.
func portalKey(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// portalT0 is a fixed instant: the store compares with the now it is given, never its own clock.
var portalT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func portalSession(perms []string, expires time.Time) portal.Session {
	return portal.Session{Licensee: "lic_a", Environment: apikey.Live, KeyID: "key_a", Permissions: perms, Version: "v2",
		ExpiresAt: expires}
}

func TestPortalMigration(t *testing.T) {
	pool, schema := pgtest.Pool(t)
	ctx := context.Background()
	opts := &pgstore.PortalStoreOptions{Schema: schema + "_portal", Table: "portal links"}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+opts.Schema+`" CASCADE`) })

	sql := must(pgstore.MigrationSQL(opts))
	require.Contains(t, sql, `"`+opts.Schema+`"."portal links"`)
	require.Contains(t, must(pgstore.MigrationSQL(&pgstore.PortalStoreOptions{})), `"`+pgstore.DefaultPortalTable+`"`)
	require.NotContains(t, must(pgstore.MigrationSQL()), pgstore.DefaultPortalTable, "migrated only when named")

	// Replicas starting together, then a rerun.
	migrateAsReplicas(t, pool, opts)
	require.Equal(t, []string{"portal portal links 1"}, versionKeys(t, pool, opts.Schema))

	indexes := indexDefs(t, pool, opts.Schema, opts.Table)
	require.Len(t, indexes, 2)
	require.Contains(t, indexes[0], `(expires_at)`)
	require.Contains(t, indexes[1], `(key)`, "the primary key")

	s := must(pgstore.NewPortalStore(pool, opts))
	sess := portalSession([]string{"webhook_endpoints:read"}, portalT0.Add(time.Hour))
	require.NoError(t, s.Put(ctx, portalKey("a"), sess, portalT0))
	got, err := s.Get(ctx, portalKey("a"), portalT0)
	require.NoError(t, err)
	require.Equal(t, sess, got)
}

// The table keeps the full key's NULL apart from the empty array of a key without permissions, so
// that SQL typed by hand, or another program, reads them as the Portal does.
func TestPortalStorePermissionsColumn(t *testing.T) {
	s, pool, _ := newPortalStore(t)
	ctx := context.Background()
	for name, perms := range map[string][]string{"full": nil, "none": {}, "some": {"events:read", "a,b"}} {
		require.NoError(t, s.Put(ctx, portalKey(name), portalSession(perms, portalT0.Add(time.Hour)), portalT0))
	}
	rows, err := pool.Query(ctx, `SELECT key, permissions IS NULL, coalesce(cardinality(permissions), -1) FROM portal_sessions`)
	require.NoError(t, err)
	type row struct {
		Key    string
		IsNull bool
		N      int
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	require.NoError(t, err)
	require.ElementsMatch(t, []row{{portalKey("full"), true, -1}, {portalKey("none"), false, 0}, {portalKey("some"), false, 2}}, got)
}

// The Portal's clock has nanoseconds, PostgreSQL keeps microseconds: cut alike, the expiry and the
// now never let an entry be served at or after its ExpiresAt, to the nanosecond.
func TestPortalStoreExpiryNanoseconds(t *testing.T) {
	s, _, _ := newPortalStore(t)
	ctx := context.Background()
	expires := portalT0.Add(time.Hour + 123456789*time.Nanosecond) // …:05.123456789
	require.NoError(t, s.Put(ctx, portalKey("k"), portalSession(nil, expires), portalT0))
	got, err := s.Get(ctx, portalKey("k"), expires.Add(-time.Microsecond))
	require.NoError(t, err)
	require.Equal(t, expires.Truncate(time.Microsecond), got.ExpiresAt, "kept to the microsecond")
	// At and after ExpiresAt, and in its last microsecond, which PostgreSQL cannot tell from it: an
	// entry may stop less than a microsecond early, never late.
	for i, now := range []time.Time{expires, expires.Add(time.Nanosecond), expires.Add(999 * time.Nanosecond), expires.Add(-time.Nanosecond)} {
		_, err := s.Get(ctx, portalKey("k"), now)
		require.ErrorIs(t, err, portal.ErrNotFound, "Get %v after ExpiresAt", now.Sub(expires))
		take := portalKey(fmt.Sprint("take-", i))
		require.NoError(t, s.Put(ctx, take, portalSession(nil, expires), portalT0))
		_, err = s.Take(ctx, take, now)
		require.ErrorIs(t, err, portal.ErrNotFound, "Take %v after ExpiresAt", now.Sub(expires))
	}
}

// Expired rows leave at Puts, at most 100 a Put; live ones stay, and so does the row a Put writes,
// expired or not.
func TestPortalStorePrunes(t *testing.T) {
	s, pool, _ := newPortalStore(t)
	ctx := context.Background()
	count := func() (all, expired int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE expires_at <= $1) FROM portal_sessions`,
			portalT0.Add(time.Hour)).Scan(&all, &expired))
		return all, expired
	}
	for i := range 230 {
		require.NoError(t, s.Put(ctx, portalKey(fmt.Sprint("old-", i)), portalSession(nil, portalT0.Add(time.Minute)), portalT0))
	}
	for i := range 5 {
		require.NoError(t, s.Put(ctx, portalKey(fmt.Sprint("live-", i)), portalSession(nil, portalT0.Add(2*time.Hour)), portalT0))
	}
	all, expired := count()
	require.Equal(t, 235, all, "nothing had expired by those Puts' now")
	require.Equal(t, 230, expired)

	later := portalT0.Add(time.Hour)
	for i, want := range []int{130, 30, 0, 0} {
		require.NoError(t, s.Put(ctx, portalKey(fmt.Sprint("new-", i)), portalSession(nil, later.Add(time.Hour)), later))
		all, expired = count()
		require.Equal(t, want, expired, "after Put %d", i)
		require.Equal(t, want+5+i+1, all, "after Put %d: the live rows stay", i)
	}
	// A Put already expired replaces what its key held, and its own prune removes it.
	require.NoError(t, s.Put(ctx, portalKey("live-0"), portalSession(nil, later), later))
	all, expired = count()
	require.Zero(t, expired)
	require.Equal(t, 5+4-1, all)
	_, err := s.Get(ctx, portalKey("live-0"), portalT0)
	require.ErrorIs(t, err, portal.ErrNotFound)
}

// Replicas race for one link: two pools on one table (two processes), many Takes each; exactly one
// of them opens a session, round after round.
func TestPortalStoreReplicasRaceTake(t *testing.T) {
	a, _, schema := newPortalStore(t)
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 16
	other, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(other.Close)
	b := must(pgstore.NewPortalStore(other, &pgstore.PortalStoreOptions{Schema: schema}))
	replicas := []*pgstore.PortalStore{a, b}

	ctx := context.Background()
	const rounds, perReplica = 20, 8
	for round := range rounds {
		key := portalKey(fmt.Sprint("race-", round))
		sess := portalSession([]string{}, portalT0.Add(time.Hour))
		require.NoError(t, replicas[round%2].Put(ctx, key, sess, portalT0))
		var (
			wins  [2]atomic.Int32
			wg    sync.WaitGroup
			start = make(chan struct{})
		)
		for r, s := range replicas {
			for range perReplica {
				wg.Go(func() {
					<-start
					got, err := s.Take(ctx, key, portalT0)
					switch {
					case err == nil:
						wins[r].Add(1)
						if got.Permissions == nil || len(got.Permissions) != 0 {
							t.Errorf("round %d: the winner got permissions %#v, want an empty list", round, got.Permissions)
						}
					case !errors.Is(err, portal.ErrNotFound):
						t.Errorf("round %d: Take: %v", round, err)
					}
				})
			}
		}
		close(start)
		wg.Wait()
		require.Equal(t, int32(1), wins[0].Load()+wins[1].Load(), "round %d: Takes that opened a session (replica A %d, B %d)",
			round, wins[0].Load(), wins[1].Load())
	}
}

// PostgreSQL unreachable: a stalled server costs the caller's deadline and a cut one an error at
// once, never ErrNotFound (which would read as an unknown link, not a store that failed), and a
// Take that failed before it reached the server has not spent the link.
func TestPortalStoreFaults(t *testing.T) {
	direct, _, schema := newPortalStore(t)
	pool, proxy := idemProxiedPool(t, schema)
	s := must(pgstore.NewPortalStore(pool, &pgstore.PortalStoreOptions{Schema: schema}))
	ctx := context.Background()
	key, sess := portalKey("link"), portalSession([]string{"webhook_endpoints:read"}, portalT0.Add(time.Hour))
	require.NoError(t, s.Put(ctx, key, sess, portalT0))

	t.Run("stall", func(t *testing.T) {
		proxy.Stall()
		for name, call := range map[string]func(context.Context) error{
			"Get":    func(ctx context.Context) error { _, err := s.Get(ctx, key, portalT0); return err },
			"Take":   func(ctx context.Context) error { _, err := s.Take(ctx, key, portalT0); return err },
			"Put":    func(ctx context.Context) error { return s.Put(ctx, portalKey("other"), sess, portalT0) },
			"Delete": func(ctx context.Context) error { return s.Delete(ctx, key) },
		} {
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			began := time.Now()
			err := call(cctx)
			cancel()
			require.Error(t, err, name)
			require.NotErrorIs(t, err, portal.ErrNotFound, name)
			require.Less(t, time.Since(began), 5*time.Second, "%s returns at the caller's deadline", name)
		}
		proxy.Resume()
		got, err := direct.Get(ctx, key, portalT0)
		require.NoError(t, err, "a statement sent during a stall never ran: the link is still there")
		require.Equal(t, sess, got)
	})

	t.Run("cut", func(t *testing.T) {
		proxy.Cut()
		_, err := s.Take(ctx, key, portalT0)
		require.Error(t, err)
		require.NotErrorIs(t, err, portal.ErrNotFound)
		_, err = s.Get(ctx, key, portalT0)
		require.Error(t, err)
		require.NotErrorIs(t, err, portal.ErrNotFound)
		proxy.Restore()
		got, err := s.Take(ctx, key, portalT0)
		require.NoError(t, err, "back: the link was not spent by the Take that failed")
		require.Equal(t, sess, got)
		_, err = s.Take(ctx, key, portalT0)
		require.ErrorIs(t, err, portal.ErrNotFound)
	})
}
