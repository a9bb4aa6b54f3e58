package pgstore_test

import (
	"context"
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/storetest"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
)

// newIdemStore migrates a fresh schema and returns a store on it.
func newIdemStore(t testing.TB) (*pgstore.IdempotencyStore, *pgxpool.Pool, string) {
	t.Helper()
	pool, schema := pgtest.Pool(t)
	opts := &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}
	require.NoError(t, pgstore.Migrate(context.Background(), pool, opts))
	return must(pgstore.NewIdempotencyStore(pool, opts)), pool, schema
}

var (
	idemT0  = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idemFP1 = driver.Fingerprint(sha256.Sum256([]byte("POST /v1/orders {1}")))
)

const (
	idemLease     = 30 * time.Second
	idemRetention = 24 * time.Hour
)

func idemClaim(t *testing.T, s driver.Store, k driver.Key, fp driver.Fingerprint, now time.Time) driver.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), k, fp, now, now.Add(idemLease), now.Add(idemRetention))
	require.NoError(t, err)
	return c
}

// TestIdempotencyStoreContract checks the Store contract at the store's full time resolution (see
// storetest.RunExact) on a fresh schema.
func TestIdempotencyStoreContract(t *testing.T) {
	s, _, _ := newIdemStore(t)
	storetest.RunExact(t, s, storetest.ExactConfig{Resolution: time.Microsecond})
}

// TestIdempotencyStoreRacingClaims races claims on fresh keys and on keys whose lease ended: exactly
// one wins each round (see storetest.RunRacingClaims).
func TestIdempotencyStoreRacingClaims(t *testing.T) {
	s, _, _ := newIdemStore(t)
	storetest.RunRacingClaims(t, s)
}

func TestIdempotencyDeleteExpired(t *testing.T) {
	s, pool, schema := newIdemStore(t)
	ctx := context.Background()
	for i := range 25 {
		k := driver.Key{Scope: "lic", Key: "k" + string(rune('a'+i))}
		ret := time.Hour
		if i%5 == 0 {
			ret = 3 * time.Hour
		}
		_, err := s.Claim(ctx, k, idemFP1, idemT0, idemT0.Add(idemLease), idemT0.Add(ret))
		require.NoError(t, err)
	}
	_, err := s.DeleteExpired(ctx, idemT0, 0)
	require.Error(t, err)
	n, err := s.DeleteExpired(ctx, idemT0.Add(time.Hour), 1000)
	require.NoError(t, err)
	require.EqualValues(t, 20, n)
	var left int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM "`+schema+`".idem`).Scan(&left))
	require.Equal(t, 5, left)
	// Batches are bounded.
	total := int64(0)
	for {
		n, err := s.DeleteExpired(ctx, idemT0.Add(4*time.Hour), 2)
		require.NoError(t, err)
		require.LessOrEqual(t, n, int64(2))
		total += n
		if n < 2 {
			break
		}
	}
	require.EqualValues(t, 5, total)
}

func TestIdempotencyMigration(t *testing.T) {
	pool, schema := pgtest.Pool(t)
	ctx := context.Background()
	opts := &pgstore.IdempotencyStoreOptions{Schema: schema + "_idem", Table: `odd "name"`}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+schema+`_idem" CASCADE`) })
	sql := must(pgstore.MigrationSQL(opts))
	require.Contains(t, sql, `CREATE SCHEMA IF NOT EXISTS "`+schema+`_idem"`)
	require.Contains(t, sql, `"odd ""name"""`)
	// Concurrent and repeated migrations all succeed.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { require.NoError(t, pgstore.Migrate(ctx, pool, opts)) })
	}
	wg.Wait()
	require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	s := must(pgstore.NewIdempotencyStore(pool, opts))
	c, err := s.Claim(ctx, driver.Key{Scope: "s", Key: "k"}, idemFP1, idemT0, idemT0.Add(idemLease), idemT0.Add(idemRetention))
	require.NoError(t, err)
	require.Equal(t, driver.Claimed, c.Status)

	// Defaults: the table lands on the search_path (the test schema).
	require.NoError(t, pgstore.Migrate(ctx, pool, &pgstore.IdempotencyStoreOptions{}))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM "`+schema+`".idempotency_keys`).Scan(&n))
	require.Zero(t, n)
	require.NotContains(t, must(pgstore.MigrationSQL(&pgstore.IdempotencyStoreOptions{})), "CREATE SCHEMA")
}

func TestIdempotencyStoreWithoutTable(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	s := must(pgstore.NewIdempotencyStore(pool, &pgstore.IdempotencyStoreOptions{Table: "missing"}))
	_, err := s.Claim(context.Background(), driver.Key{Scope: "s", Key: "k"}, idemFP1, idemT0, idemT0.Add(idemLease), idemT0.Add(idemRetention))
	require.Error(t, err)
	require.NotErrorIs(t, err, driver.ErrNotFound)
	require.Contains(t, err.Error(), "pgstore:")
	require.Panics(t, func() { must(pgstore.NewIdempotencyStore(nil, nil)) })
}

// TestIdempotencyClaimSeesRowNewerThanSnapshot pins down the race Claim's re-read exists for: a
// claim blocks on a row another transaction is changing; when that commits, the claim's upsert sees
// the new row version but its read sees the statement's older snapshot (no row at all, or a lease
// that had ended). The answer must still be "in flight", never a second owner, a second mark or an
// error.
func TestIdempotencyClaimSeesRowNewerThanSnapshot(t *testing.T) {
	s, pool, schema := newIdemStore(t)
	ctx := context.Background()
	opts := &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}
	cases := []struct {
		name  string
		setup func(k driver.Key) time.Time // returns the instant both claims use
		first driver.Status                // what the first claim, in the transaction, gets
	}{
		{"row inserted meanwhile", func(driver.Key) time.Time { return idemT0 }, driver.Claimed},
		// Two claims find a lapsed lease: the second re-checks under the row lock, finds the lease
		// the first one's mark extended, and does not mark again.
		{"lease marked meanwhile", func(k driver.Key) time.Time {
			idemClaim(t, s, k, idemFP1, idemT0)
			return idemT0.Add(idemLease)
		}, driver.InFlight},
		{"lease taken over meanwhile", func(k driver.Key) time.Time {
			idemClaim(t, s, k, idemFP1, idemT0)
			require.Equal(t, driver.InFlight, idemClaim(t, s, k, idemFP1, idemT0.Add(idemLease)).Status)
			return idemT0.Add(2 * idemLease)
		}, driver.Claimed},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := driver.Key{Scope: "lic_snap", Key: "k" + string(rune('a'+i))}
			now := tc.setup(k)
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			first, err := must(pgstore.NewIdempotencyStore(tx, opts)).Claim(ctx, k, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
			require.NoError(t, err)
			require.Equal(t, tc.first, first.Status)

			type result struct {
				c   driver.Claim
				err error
			}
			done := make(chan result, 1)
			go func() {
				c, err := s.Claim(ctx, k, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
				done <- result{c, err}
			}()
			// Commit only once the second claim waits on the row lock, so its snapshot predates the commit.
			deadline := time.Now().Add(patience(t))
			for {
				require.True(t, time.Now().Before(deadline), "the second claim never waited on the row lock")
				var waiting int
				require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE wait_event_type = 'Lock' AND query LIKE 'WITH ins AS%' AND strpos(query, $1) > 0`,
					schema).Scan(&waiting))
				if waiting > 0 {
					break
				}
				select {
				case r := <-done:
					t.Fatalf("second claim did not wait for the first transaction: %+v", r)
				default:
				}
			}
			require.NoError(t, tx.Commit(ctx))
			r := <-done
			require.NoError(t, r.err)
			require.Equal(t, driver.InFlight, r.c.Status)
			require.True(t, r.c.LeaseUntil.Equal(now.Add(idemLease)))
		})
	}
}
