package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/internal/randid"
)

// RunQuota checks a store's per-scope quota: newStore must return a store that lets one scope hold at
// most limit live records. A scope over its quota gets ErrQuotaExceeded for new keys only: its
// existing keys still replay, complete and are taken over, other scopes are untouched, and a record
// released or past its retention frees its place.
func RunQuota(t *testing.T, limit int, newStore func(t *testing.T) driver.Store) {
	t.Helper()
	if limit <= 0 {
		t.Fatalf("storetest: RunQuota's limit is %d, want a positive number", limit)
	}
	t.Run("QuotaPerScope", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		e := newEnv(t)
		keys := make([]driver.Key, limit)
		tokens := make([]uint64, limit)
		for i := range keys {
			keys[i] = e.key()
			tokens[i] = e.mustClaim(s, keys[i], fp("a"), 0).Token
		}
		over := e.key()
		_, err := s.Claim(e.ctx, over, fp("a"), e.at(time.Second), e.at(time.Second+lease), e.at(time.Second+retention))
		check.ErrorIs(t, err, driver.ErrQuotaExceeded, "claim %d of a scope limited to %d", limit+1, limit)
		e.absent(s, over, time.Second)

		// Another scope is not affected.
		other := driver.Key{Scope: randid.New("scope_other_"), Key: randid.New("key_")}
		c, err := s.Claim(e.ctx, other, fp("a"), e.at(time.Second), e.at(time.Second+lease), e.at(time.Second+retention))
		check.NoError(t, err)
		check.Equal(t, driver.Claimed, c.Status)

		// The scope's own records still work: in flight, completed and replayed, taken over.
		check.Equal(t, driver.InFlight, e.claim(s, keys[0], fp("a"), time.Second).Status)
		check.NoError(t, s.Complete(e.ctx, keys[0], tokens[0], sample(), e.at(retention)))
		check.Equal(t, driver.Completed, e.claim(s, keys[0], fp("a"), 2*time.Second).Status)
		if limit > 1 {
			e.takeOver(s, keys[1], fp("a"), lease)
		}

		// A release frees a place at once.
		last := limit - 1
		check.NoError(t, s.Release(e.ctx, keys[last], tokens[last]))
		e.mustClaim(s, over, fp("a"), 3*time.Second)
		_, err = s.Claim(e.ctx, keys[last], fp("a"), e.at(4*time.Second), e.at(4*time.Second+lease), e.at(4*time.Second+retention))
		check.ErrorIs(t, err, driver.ErrQuotaExceeded)

		// Past retention every place is free again.
		late := retention + 10*lease
		for i := range limit {
			k := driver.Key{Scope: e.scope, Key: fmt.Sprintf("late-%d-%s", i, randid.New(""))}
			e.mustClaim(s, k, fp("a"), late)
		}
	})
}
