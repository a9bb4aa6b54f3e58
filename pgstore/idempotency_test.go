package pgstore_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
)

// newIdemStore migrates a fresh schema and returns a store on it.
func newIdemStore(t testing.TB) (*pgstore.IdempotencyStore, *pgxpool.Pool, string) {
	t.Helper()
	pool, schema := pgtest.Pool(t)
	opts := &pgstore.IdempotencyOptions{Schema: schema, Table: "idem"}
	require.NoError(t, pgstore.MigrateIdempotency(context.Background(), pool, opts))
	return pgstore.NewIdempotencyStore(pool, opts), pool, schema
}

var (
	idemT0  = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idemFP1 = idempotency.Fingerprint(sha256.Sum256([]byte("POST /v1/orders {1}")))
	idemFP2 = idempotency.Fingerprint(sha256.Sum256([]byte("POST /v1/orders {2}")))
)

const (
	idemLease     = 30 * time.Second
	idemRetention = 24 * time.Hour
)

func idemClaim(t *testing.T, s idempotency.Store, k idempotency.Key, fp idempotency.Fingerprint, now time.Time) idempotency.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), k, fp, now, now.Add(idemLease), now.Add(idemRetention))
	require.NoError(t, err)
	return c
}

func TestIdempotencyStoreContract(t *testing.T) {
	ctx := context.Background()
	resp := idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Location": {"/v1/orders/1"}}, Body: []byte(`{"id":"ord_1"}`)}
	cases := []struct {
		name string
		run  func(t *testing.T, s *pgstore.IdempotencyStore, k idempotency.Key)
	}{
		{"claim then in flight", func(t *testing.T, s *pgstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.Equal(t, idempotency.Claimed, c.Status)
			require.NotZero(t, c.Token)
			again := idemClaim(t, s, k, idemFP1, idemT0.Add(time.Second))
			require.Equal(t, idempotency.InFlight, again.Status)
			require.True(t, again.LeaseUntil.Equal(idemT0.Add(idemLease)))
			require.Zero(t, again.Token)
		}},
		{"complete then replay exactly", func(t *testing.T, s *pgstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.NoError(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(idemRetention)))
			r := idemClaim(t, s, k, idemFP1, idemT0.Add(time.Hour))
			require.Equal(t, idempotency.Completed, r.Status)
			require.Equal(t, resp, *r.Response)
			require.Equal(t, idemFP1, r.Fingerprint)
		}},
		{"nil and empty stay distinct", func(t *testing.T, s *pgstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.NoError(t, s.Complete(ctx, k, c.Token, idempotency.Response{Status: 204}, idemT0.Add(idemRetention)))
			r := idemClaim(t, s, k, idemFP1, idemT0)
			require.Nil(t, r.Response.Header)
			require.Nil(t, r.Response.Body)
			k2 := idempotency.Key{Scope: k.Scope, Key: k.Key + "-2"}
			c = idemClaim(t, s, k2, idemFP1, idemT0)
			require.NoError(t, s.Complete(ctx, k2, c.Token, idempotency.Response{Status: 200, Header: http.Header{}, Body: []byte{}}, idemT0.Add(idemRetention)))
			r = idemClaim(t, s, k2, idemFP1, idemT0)
			require.NotNil(t, r.Response.Header)
			require.NotNil(t, r.Response.Body)
			require.Empty(t, r.Response.Body)
		}},
		{"other fingerprint changes nothing", func(t *testing.T, s *pgstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			// Even past the lease a different request may not take the key over.
			m := idemClaim(t, s, k, idemFP2, idemT0.Add(time.Hour))
			require.Equal(t, idemFP1, m.Fingerprint)
			require.Equal(t, idempotency.InFlight, m.Status)
			require.NoError(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(idemRetention)))
			m = idemClaim(t, s, k, idemFP2, idemT0.Add(time.Hour))
			require.Equal(t, idemFP1, m.Fingerprint)
			require.Equal(t, idempotency.Completed, m.Status)
			rec, err := s.Lookup(ctx, k, idemT0.Add(time.Hour))
			require.NoError(t, err)
			require.Equal(t, idemFP1, rec.Fingerprint)
		}},
		{"ended lease is taken over and the stale owner fenced", func(t *testing.T, s *pgstore.IdempotencyStore, k idempotency.Key) {
			old := idemClaim(t, s, k, idemFP1, idemT0)
			at := idemT0.Add(idemLease) // lease_until <= now: ended
			nu := idemClaim(t, s, k, idemFP1, at)
			require.Equal(t, idempotency.Claimed, nu.Status)
			require.Greater(t, nu.Token, old.Token)
			require.ErrorIs(t, s.Complete(ctx, k, old.Token, resp, at.Add(idemRetention)), idempotency.ErrLeaseLost)
			require.ErrorIs(t, s.Renew(ctx, k, old.Token, at.Add(time.Hour)), idempotency.ErrLeaseLost)
			require.ErrorIs(t, s.Release(ctx, k, old.Token), idempotency.ErrLeaseLost)
			require.NoError(t, s.Complete(ctx, k, nu.Token, resp, at.Add(idemRetention)))
		}},
		{"lease one microsecond short is still live", func(t *testing.T, s *pgstore.IdempotencyStore, k idempotency.Key) {
			idemClaim(t, s, k, idemFP1, idemT0)
			c := idemClaim(t, s, k, idemFP1, idemT0.Add(idemLease-time.Microsecond))
			require.Equal(t, idempotency.InFlight, c.Status)
		}},
		{"renew keeps the key", func(t *testing.T, s *pgstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.NoError(t, s.Renew(ctx, k, c.Token, idemT0.Add(2*idemLease)))
			again := idemClaim(t, s, k, idemFP1, idemT0.Add(idemLease+time.Second))
			require.Equal(t, idempotency.InFlight, again.Status)
			require.True(t, again.LeaseUntil.Equal(idemT0.Add(2*idemLease)))
		}},
		{"release frees the key and never reuses a token", func(t *testing.T, s *pgstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.ErrorIs(t, s.Release(ctx, k, c.Token+1000), idempotency.ErrLeaseLost)
			require.NoError(t, s.Release(ctx, k, c.Token))
			_, err := s.Lookup(ctx, k, idemT0)
			require.ErrorIs(t, err, idempotency.ErrNotFound)
			n := idemClaim(t, s, k, idemFP2, idemT0)
			require.Equal(t, idempotency.Claimed, n.Status)
			require.NotEqual(t, c.Token, n.Token)
			require.ErrorIs(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(idemRetention)), idempotency.ErrLeaseLost)
		}},
		{"completed cannot be released or completed twice", func(t *testing.T, s *pgstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.NoError(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(idemRetention)))
			require.ErrorIs(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(idemRetention)), idempotency.ErrLeaseLost)
			require.ErrorIs(t, s.Release(ctx, k, c.Token), idempotency.ErrLeaseLost)
			require.ErrorIs(t, s.Renew(ctx, k, c.Token, idemT0.Add(time.Hour)), idempotency.ErrLeaseLost)
		}},
		{"retention over frees the key for any request", func(t *testing.T, s *pgstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.NoError(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(time.Hour)))
			_, err := s.Lookup(ctx, k, idemT0.Add(time.Hour))
			require.ErrorIs(t, err, idempotency.ErrNotFound)
			n := idemClaim(t, s, k, idemFP2, idemT0.Add(time.Hour))
			require.Equal(t, idempotency.Claimed, n.Status)
			require.Greater(t, n.Token, c.Token)
		}},
		{"lookup reports in flight and completed", func(t *testing.T, s *pgstore.IdempotencyStore, k idempotency.Key) {
			_, err := s.Lookup(ctx, k, idemT0)
			require.ErrorIs(t, err, idempotency.ErrNotFound)
			c := idemClaim(t, s, k, idemFP1, idemT0)
			rec, err := s.Lookup(ctx, k, idemT0)
			require.NoError(t, err)
			require.Equal(t, idempotency.InFlight, rec.Status)
			require.Equal(t, c.Token, rec.Token)
			require.True(t, rec.LeaseUntil.Equal(idemT0.Add(idemLease)))
			require.True(t, rec.ExpiresAt.Equal(idemT0.Add(idemRetention)))
			require.NoError(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(2*idemRetention)))
			rec, err = s.Lookup(ctx, k, idemT0.Add(idemRetention))
			require.NoError(t, err)
			require.Equal(t, idempotency.Completed, rec.Status)
			require.Equal(t, resp, *rec.Response)
			require.True(t, rec.ExpiresAt.Equal(idemT0.Add(2*idemRetention)))
		}},
		{"scopes never share a record", func(t *testing.T, s *pgstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.NoError(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(idemRetention)))
			other := idempotency.Key{Scope: k.Scope + "x", Key: k.Key}
			o := idemClaim(t, s, other, idemFP1, idemT0)
			require.Equal(t, idempotency.Claimed, o.Status)
			_, err := s.Lookup(ctx, idempotency.Key{Scope: "", Key: k.Key}, idemT0)
			require.ErrorIs(t, err, idempotency.ErrNotFound)
		}},
	}
	s, _, _ := newIdemStore(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, s, idempotency.Key{Scope: "lic_1:sandbox", Key: "key-" + string(rune('a'+i))})
		})
	}
}

// TestIdempotencyStoreRacingClaims races claims on fresh keys and on keys whose lease ended (odd
// rounds, a takeover): exactly one wins each round. The takeover race is the one where a claim's
// snapshot can be older than the row it locks, so it exercises Claim's re-read.
func TestIdempotencyStoreRacingClaims(t *testing.T) {
	s, _, _ := newIdemStore(t)
	ctx := context.Background()
	for round := range 10 {
		k := idempotency.Key{Scope: "lic_race", Key: "k" + string(rune('a'+round))}
		now := idemT0
		if round%2 == 1 {
			idemClaim(t, s, k, idemFP1, idemT0)
			now = idemT0.Add(idemLease)
		}
		var claimed, inFlight atomic.Int32
		var wg sync.WaitGroup
		for range 24 {
			wg.Go(func() {
				c, err := s.Claim(ctx, k, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
				if err != nil {
					t.Error(err)
					return
				}
				switch c.Status {
				case idempotency.Claimed:
					claimed.Add(1)
				case idempotency.InFlight:
					inFlight.Add(1)
				default:
					t.Errorf("unexpected status %v", c.Status)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, claimed.Load())
		require.EqualValues(t, 23, inFlight.Load())
	}
}

func TestIdempotencyDeleteExpired(t *testing.T) {
	s, pool, schema := newIdemStore(t)
	ctx := context.Background()
	for i := range 25 {
		k := idempotency.Key{Scope: "lic", Key: "k" + string(rune('a'+i))}
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
	opts := &pgstore.IdempotencyOptions{Schema: schema + "_idem", Table: `odd "name"`}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+schema+`_idem" CASCADE`) })
	sql := pgstore.IdempotencyMigration(opts)
	require.Contains(t, sql, `CREATE SCHEMA IF NOT EXISTS "`+schema+`_idem"`)
	require.Contains(t, sql, `"odd ""name"""`)
	// Concurrent and repeated migrations all succeed.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { require.NoError(t, pgstore.MigrateIdempotency(ctx, pool, opts)) })
	}
	wg.Wait()
	require.NoError(t, pgstore.MigrateIdempotency(ctx, pool, opts))
	s := pgstore.NewIdempotencyStore(pool, opts)
	c, err := s.Claim(ctx, idempotency.Key{Scope: "s", Key: "k"}, idemFP1, idemT0, idemT0.Add(idemLease), idemT0.Add(idemRetention))
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, c.Status)

	// Defaults: the table lands on the search_path (the test schema).
	require.NoError(t, pgstore.MigrateIdempotency(ctx, pool, nil))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM "`+schema+`".idempotency_keys`).Scan(&n))
	require.Zero(t, n)
	require.NotContains(t, pgstore.IdempotencyMigration(nil), "CREATE SCHEMA")
}

func TestIdempotencyStoreWithoutTable(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	s := pgstore.NewIdempotencyStore(pool, &pgstore.IdempotencyOptions{Table: "missing"})
	_, err := s.Claim(context.Background(), idempotency.Key{Scope: "s", Key: "k"}, idemFP1, idemT0, idemT0.Add(idemLease), idemT0.Add(idemRetention))
	require.Error(t, err)
	require.NotErrorIs(t, err, idempotency.ErrNotFound)
	require.Contains(t, err.Error(), "pgstore:")
	require.Panics(t, func() { pgstore.NewIdempotencyStore(nil, nil) })
}

// TestIdempotencyClaimSeesRowNewerThanSnapshot pins down the race Claim's re-read exists for: a
// claim blocks on a row another transaction is changing; when that commits, the claim's upsert sees
// the new row version but its read sees the statement's older snapshot (no row at all, or a lease
// that had ended). The answer must still be "in flight", never a second owner or an error.
func TestIdempotencyClaimSeesRowNewerThanSnapshot(t *testing.T) {
	s, pool, schema := newIdemStore(t)
	ctx := context.Background()
	opts := &pgstore.IdempotencyOptions{Schema: schema, Table: "idem"}
	cases := []struct {
		name  string
		setup func(k idempotency.Key) time.Time // returns the instant both claims use
	}{
		{"row inserted meanwhile", func(idempotency.Key) time.Time { return idemT0 }},
		{"lease taken over meanwhile", func(k idempotency.Key) time.Time {
			idemClaim(t, s, k, idemFP1, idemT0)
			return idemT0.Add(idemLease)
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := idempotency.Key{Scope: "lic_snap", Key: "k" + string(rune('a'+i))}
			now := tc.setup(k)
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			first, err := pgstore.NewIdempotencyStore(tx, opts).Claim(ctx, k, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
			require.NoError(t, err)
			require.Equal(t, idempotency.Claimed, first.Status)

			type result struct {
				c   idempotency.Claim
				err error
			}
			done := make(chan result, 1)
			go func() {
				c, err := s.Claim(ctx, k, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
				done <- result{c, err}
			}()
			// Commit only once the second claim waits on the row lock, so its snapshot predates the commit.
			deadline := time.Now().Add(10 * time.Second)
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
			require.Equal(t, idempotency.InFlight, r.c.Status)
			require.True(t, r.c.LeaseUntil.Equal(now.Add(idemLease)))
		})
	}
}
