package memstore

import (
	"hash/maphash"
	"sync"

	"github.com/svcplatform/conventions/idempotency/driver"
)

// scopeStripe counts the records of the scopes that hash to it. Lock order: a shard's mu, then a
// stripe's; nothing takes them the other way round.
type scopeStripe struct {
	mu     sync.Mutex
	counts map[uint64]*scopeCount
	_      [48]byte // keeps neighbouring stripes' locks off one cache line
}

// scopeCount is the number of live records of one scope, guarded by its stripe's mu. Records point
// at theirs, so that a record leaving the store gives its place back without a lookup.
type scopeCount struct {
	n      int
	hash   uint64
	stripe *scopeStripe
}

// reserve takes a place for one more record of scope, in the scope's quota and in the store, and
// returns the scope's count (nil without quotas) for the record to keep.
func (s *Store) reserve(scope string) (*scopeCount, error) {
	var c *scopeCount
	if s.perScope > 0 {
		// Scopes are counted by their seeded 64-bit hash: two scopes would share a quota only if
		// their hashes collided, which nobody can arrange without the seed.
		h := maphash.String(s.seed, scope)
		st := &s.scopes[h&s.mask]
		st.mu.Lock()
		c = st.counts[h]
		if c == nil {
			c = &scopeCount{hash: h, stripe: st}
			st.counts[h] = c
		}
		if c.n >= s.perScope {
			st.mu.Unlock()
			return nil, driver.ErrQuotaExceeded
		}
		c.n++
		st.mu.Unlock()
	}
	for {
		n := s.records.Load()
		if n >= s.maxRecords {
			c.release()
			return nil, ErrStoreFull
		}
		if s.records.CompareAndSwap(n, n+1) {
			return c, nil
		}
	}
}

// release gives back one place of the scope; a scope with no record left is forgotten.
func (c *scopeCount) release() {
	if c == nil {
		return
	}
	st := c.stripe
	st.mu.Lock()
	if c.n--; c.n <= 0 {
		delete(st.counts, c.hash)
	}
	st.mu.Unlock()
}

// forget gives back the places of a record that left the store.
func (s *Store) forget(rec *memRecord) {
	rec.quota.release()
	rec.quota = nil
	s.records.Add(-1)
}
