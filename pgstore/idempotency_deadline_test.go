package pgstore_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/pgstore"
)

// idemStoreCall is one store method run under ctx.
type idemStoreCall struct {
	name string
	run  func(ctx context.Context) error
}

// idemStoreCalls returns every store method on s: Claim of fresh, and Renew, Complete, Release and
// Lookup of owned, which owner's token holds.
func idemStoreCalls(s *pgstore.IdempotencyStore, fresh, owned driver.Key, owner uint64, now time.Time) []idemStoreCall {
	resp := driver.Response{Status: http.StatusCreated, Body: []byte(`{"id":"ord_1"}`)}
	return []idemStoreCall{
		{"Claim", func(ctx context.Context) error {
			_, err := s.Claim(ctx, fresh, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
			return err
		}},
		{"Renew", func(ctx context.Context) error { return s.Renew(ctx, owned, owner, now.Add(time.Hour)) }},
		{"Complete", func(ctx context.Context) error { return s.Complete(ctx, owned, owner, resp, now.Add(idemRetention)) }},
		{"Release", func(ctx context.Context) error { return s.Release(ctx, owned, owner) }},
		{"Lookup", func(ctx context.Context) error {
			_, err := s.Lookup(ctx, owned, now)
			return err
		}},
	}
}

// TestIdempotencyStoreDeadlineOnStalledServer: with every byte to and from PostgreSQL stalled (a
// partition, a hung server), each store method returns an error wrapping context.DeadlineExceeded
// once its context's deadline passes, instead of hanging; the middleware's StoreTimeout rests on
// this. The stalled calls changed nothing, and once the network heals new calls work.
func TestIdempotencyStoreDeadlineOnStalledServer(t *testing.T) {
	direct, _, schema := newIdemStore(t)
	pool, proxy := idemProxiedPool(t, schema)
	s := must(pgstore.NewIdempotencyStore(pool, &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}))
	ctx := context.Background()
	now := time.Now().UTC()
	fresh := driver.Key{Scope: "lic_stall", Key: "fresh"}
	owned := driver.Key{Scope: "lic_stall", Key: "owned"}
	owner, err := s.Claim(ctx, owned, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
	require.NoError(t, err, "through the proxy before the stall")
	require.Equal(t, driver.Claimed, owner.Status)

	proxy.Stall()
	t.Cleanup(proxy.Resume) // before the pool closes, should the test fail while stalled
	calls := idemStoreCalls(s, fresh, owned, owner.Token, now)
	// Sequentially on the pool's warm connection, then all at once, so that some run on connections
	// that are still being opened through the stalled network.
	for round, parallel := range []bool{false, true} {
		errs := make([]error, len(calls))
		var wg sync.WaitGroup
		for i, c := range calls {
			run := func() {
				cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- c.run(cctx) }()
				select {
				case errs[i] = <-done:
				case <-time.After(10 * time.Second):
					errs[i] = errors.New("still blocked 10 s after a 200 ms deadline")
					t.Errorf("round %d: %s hangs on a stalled server", round, c.name)
				}
			}
			if parallel {
				wg.Go(run)
			} else {
				run()
			}
		}
		wg.Wait()
		for i, c := range calls {
			require.ErrorIs(t, errs[i], context.DeadlineExceeded, "round %d: %s", round, c.name)
			require.NotErrorIs(t, errs[i], driver.ErrLeaseLost, "round %d: %s", round, c.name)
			require.NotErrorIs(t, errs[i], driver.ErrNotFound, "round %d: %s", round, c.name)
		}
	}
	// Meanwhile a direct connection sees nothing of what the stalled calls sent.
	_, err = direct.Lookup(ctx, fresh, now)
	require.ErrorIs(t, err, driver.ErrNotFound, "the stalled Claim claimed nothing")
	rec, err := direct.Lookup(ctx, owned, now)
	require.NoError(t, err)
	require.Equal(t, driver.InFlight, rec.Status, "the stalled Complete and Release did nothing")
	require.WithinDuration(t, owner.LeaseUntil, rec.LeaseUntil, time.Microsecond, "the stalled Renew did nothing")

	proxy.Resume()
	// The stall is over; broken connections are discarded by the pool, and new calls work.
	require.NoError(t, s.Renew(ctx, owned, owner.Token, now.Add(time.Hour)))
	require.NoError(t, s.Complete(ctx, owned, owner.Token, driver.Response{Status: http.StatusCreated}, now.Add(idemRetention)))
	c, err := s.Claim(ctx, fresh, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
	require.NoError(t, err)
	require.Equal(t, driver.Claimed, c.Status)
	rec, err = direct.Lookup(ctx, owned, now)
	require.NoError(t, err)
	require.Equal(t, driver.Completed, rec.Status)
}

// TestIdempotencyStoreConnectionsCut: with every connection to PostgreSQL cut and new ones refused
// (a restart, a failover), store calls fail at once with an error, never a verdict (not ErrLeaseLost,
// not ErrNotFound, not a claim); once the server is back, they work.
func TestIdempotencyStoreConnectionsCut(t *testing.T) {
	_, _, schema := newIdemStore(t)
	pool, proxy := idemProxiedPool(t, schema)
	s := must(pgstore.NewIdempotencyStore(pool, &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}))
	ctx := context.Background()
	now := time.Now().UTC()
	fresh := driver.Key{Scope: "lic_cut", Key: "fresh"}
	owned := driver.Key{Scope: "lic_cut", Key: "owned"}
	owner, err := s.Claim(ctx, owned, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
	require.NoError(t, err)
	require.Equal(t, driver.Claimed, owner.Status)

	proxy.Cut()
	for _, c := range idemStoreCalls(s, fresh, owned, owner.Token, now) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.run(cctx)
		cancel()
		require.Error(t, err, c.name)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "%s: fails at once, it does not wait out its deadline", c.name)
		require.NotErrorIs(t, err, driver.ErrLeaseLost, c.name)
		require.NotErrorIs(t, err, driver.ErrNotFound, c.name)
	}
	proxy.Restore()
	require.NoError(t, s.Renew(ctx, owned, owner.Token, now.Add(time.Hour)))
	c, err := s.Claim(ctx, fresh, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
	require.NoError(t, err)
	require.Equal(t, driver.Claimed, c.Status)
}
