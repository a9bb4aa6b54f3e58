package apikey

import (
	"context"
	"maps"
	"sync"
	"time"
)

// UsageInterval is how often a key's last use is written at most, per key and per process: the
// granularity of Credential.LastUsedAt. Issuer.Run writes at this interval.
const UsageInterval = time.Minute

// usage collects the keys' last uses between two writes. Resolve notes a use at most once per
// UsageInterval per key, behind a read lock in the common case; Run writes what was noted, in one
// call, off every request's path. The zero value is ready to use.
type usage struct {
	mu      sync.RWMutex
	noted   map[string]time.Time // key ID → the last use noted (written or pending)
	pending map[string]time.Time // noted and not yet written
}

// note records that the key id was used at now, unless a use within the last UsageInterval was
// already noted here or stored (stored: the credential's LastUsedAt, which another process may have
// written).
func (u *usage) note(id string, stored, now time.Time) {
	if now.Sub(stored) < UsageInterval {
		return
	}
	u.mu.RLock()
	last, ok := u.noted[id]
	u.mu.RUnlock()
	if ok && now.Sub(last) < UsageInterval {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if last, ok := u.noted[id]; ok && now.Sub(last) < UsageInterval {
		return
	}
	if u.noted == nil {
		u.noted, u.pending = make(map[string]time.Time), make(map[string]time.Time)
	}
	u.noted[id], u.pending[id] = now, now
}

// take returns the pending uses and forgets the noted ones older than UsageInterval, which no longer
// hold a use back.
func (u *usage) take(now time.Time) map[string]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	var batch map[string]time.Time
	if len(u.pending) > 0 {
		batch, u.pending = u.pending, make(map[string]time.Time)
	}
	maps.DeleteFunc(u.noted, func(_ string, t time.Time) bool { return now.Sub(t) >= UsageInterval })
	return batch
}

// putBack returns a batch whose write failed to the pending uses, keeping the later of two.
func (u *usage) putBack(batch map[string]time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pending == nil {
		u.pending = make(map[string]time.Time)
	}
	for id, t := range batch {
		if cur, ok := u.pending[id]; !ok || t.After(cur) {
			u.pending[id] = t
		}
	}
}

// Run writes the keys' last uses (Credential.LastUsedAt) to the store every UsageInterval until ctx
// ends, then writes what is left and returns nil. Resolve only notes a use, at most once per key per
// UsageInterval, so authenticating a request never waits for this write; without Run, LastUsedAt is
// never updated. A failed write is logged and tried again at the next interval. Run one per Issuer,
// next to the server:
//
//	go issuer.Run(ctx)
func (i *Issuer) Run(ctx context.Context) error {
	if i == nil || i.store == nil {
		return errZeroIssuer
	}
	t := time.NewTicker(UsageInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// The last write outlives ctx, briefly: what was noted is not thrown away at shutdown.
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			i.flushUsage(final)
			cancel()
			return nil
		case <-t.C:
			i.flushUsage(ctx)
		}
	}
}

// flushUsage writes the pending uses in one call.
func (i *Issuer) flushUsage(ctx context.Context) {
	batch := i.usage.take(i.now())
	if len(batch) == 0 {
		return
	}
	if err := i.store.MarkUsed(ctx, batch); err != nil {
		i.usage.putBack(batch)
		if i.log != nil {
			i.log.WarnContext(ctx, "apikey: recording when keys were last used failed; retrying at the next interval",
				"keys", len(batch), "error", err)
		}
	}
}
