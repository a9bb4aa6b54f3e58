package idempotency

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

// lostStore is a Store whose Renew always finds the lease lost.
type lostStore struct{ driver.Store }

func (lostStore) Renew(context.Context, driver.Key, uint64, time.Time) error { return ErrLeaseLost }

// TestRenewalLostUnlinksBeforeReuse: a renewal that finds its lease lost must leave the renewer's
// list before anyone can reuse it. The middleware pools renewals: once the lost attempt finishes,
// the next request registers the same struct for its own claim. If the renewer unlinked the lost
// renewal only after renew returned (outside the renewal's lock), that unlink could land after the
// re-registration and end the renewal of the new claim, whose lease would then lapse while its
// handler runs, and a retry would run the handler a second time.
func TestRenewalLostUnlinksBeforeReuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := must(New(&Options{Store: lostStore{memstore.New(nil)}, Lease: time.Minute}))
		var rn renewal
		a := &Attempt{Decision: Execute, Key: driver.Key{Scope: "s", Key: "k"}, Token: 1, m: m, store: m.store, ctx: context.Background()}
		m.renewer.start(m, a, &rn)
		require.True(t, rn.renew(&m.renewer), "the lease is lost")
		// Everything the renewer does about the lost claim is done by now: reuse is safe.
		m.renewer.mu.Lock()
		linked := rn.linked
		m.renewer.mu.Unlock()
		require.False(t, linked, "a lost renewal is still on the renewer's list when renew returns")

		// The pooled renewal is reused for the next claim, which stays registered.
		m.renewer.stop(&rn)
		a2 := &Attempt{Decision: Execute, Key: driver.Key{Scope: "s", Key: "k2"}, Token: 2, m: m, store: m.store, ctx: context.Background()}
		m.renewer.start(m, a2, &rn)
		m.renewer.mu.Lock()
		require.True(t, rn.linked)
		m.renewer.mu.Unlock()
		m.renewer.stop(&rn)
		time.Sleep(time.Minute) // fake time: lets the renewer's goroutine see no claims and exit
	})
}
