package pgstore_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
)

// idemQueryCounter counts the statements a pool sends; with pgx's statement cache warm, each is one
// round trip.
type idemQueryCounter struct{ n atomic.Int64 }

func (c *idemQueryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *idemQueryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A batch is one round trip, whatever it carries.
func (c *idemQueryCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *idemQueryCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *idemQueryCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestIdempotencyRoundTrips pins the cost of each operation: one statement per store call, and two
// round trips for a transactional claim and completion on a pool (BEGIN travels with the claim, the
// completion with the COMMIT).
func TestIdempotencyRoundTrips(t *testing.T) {
	_, schema := pgtest.Pool(t)
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	counter := &idemQueryCounter{}
	cfg.ConnConfig.Tracer = counter
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 1 // one connection, so the warm-up fills the statement cache every step uses
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ctx := context.Background()
	opts := &pgstore.IdempotencyStoreOptions{Table: "idem"}
	require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	s := must(pgstore.NewIdempotencyStore(pool, opts))
	tr := must(pgstore.NewTransactor(pool, opts))
	resp := driver.Response{Status: http.StatusCreated, Body: []byte(`{"id":"ord_1"}`)}
	now := time.Now()
	claim := func(k driver.Key) driver.Claim {
		c, err := s.Claim(ctx, k, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
		require.NoError(t, err)
		return c
	}
	inTx := func(k driver.Key) {
		require.NoError(t, tr.InTx(ctx, func(ctx context.Context, ts driver.Store) error {
			c, err := ts.Claim(ctx, k, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
			require.NoError(t, err)
			require.Equal(t, driver.Claimed, c.Status)
			return ts.Complete(ctx, k, c.Token, resp, now.Add(idemRetention))
		}))
	}
	// Warm the statement cache.
	w := driver.Key{Scope: "s", Key: "warm"}
	c := claim(w)
	require.NoError(t, s.Renew(ctx, w, c.Token, now.Add(time.Hour)))
	require.NoError(t, s.Complete(ctx, w, c.Token, resp, now.Add(idemRetention)))
	claim(w)
	_, err = s.Lookup(ctx, w, now)
	require.NoError(t, err)
	c = claim(driver.Key{Scope: "s", Key: "warm2"})
	require.NoError(t, s.Release(ctx, driver.Key{Scope: "s", Key: "warm2"}, c.Token))
	inTx(driver.Key{Scope: "s", Key: "warm3"})

	k := driver.Key{Scope: "s", Key: "k"}
	stale := driver.Key{Scope: "s", Key: "stale"}
	claim(stale) // its lease ends before the mark step, the extra lease before the take-over step
	steps := []struct {
		name string
		want int64
		run  func(t *testing.T)
	}{
		{"claim", 1, func(t *testing.T) { c = claim(k) }},
		{"in flight", 1, func(t *testing.T) { require.Equal(t, driver.InFlight, claim(k).Status) }},
		{"renew", 1, func(t *testing.T) { require.NoError(t, s.Renew(ctx, k, c.Token, now.Add(time.Hour))) }},
		{"complete", 1, func(t *testing.T) { require.NoError(t, s.Complete(ctx, k, c.Token, resp, now.Add(idemRetention))) }},
		{"replay", 1, func(t *testing.T) { require.Equal(t, driver.Completed, claim(k).Status) }},
		{"lookup", 1, func(t *testing.T) {
			_, err := s.Lookup(ctx, k, now)
			require.NoError(t, err)
		}},
		{"mark", 1, func(t *testing.T) {
			later := now.Add(idemLease)
			c2, err := s.Claim(ctx, stale, idemFP1, later, later.Add(idemLease), later.Add(idemRetention))
			require.NoError(t, err)
			require.Equal(t, driver.InFlight, c2.Status)
		}},
		{"take-over", 1, func(t *testing.T) {
			later := now.Add(2 * idemLease)
			c2, err := s.Claim(ctx, stale, idemFP1, later, later.Add(idemLease), later.Add(idemRetention))
			require.NoError(t, err)
			require.Equal(t, driver.Claimed, c2.Status)
		}},
		{"transactional claim and complete", 2, func(t *testing.T) { inTx(driver.Key{Scope: "s", Key: "tx"}) }},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := counter.n.Load()
			st.run(t)
			require.Equal(t, st.want, counter.n.Load()-before, "round trips")
		})
	}
}
