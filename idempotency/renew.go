package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcplatform/conventions/idempotency/driver"
)

// renewer renews the leases of a middleware's in-flight claims. One goroutine serves them all: it
// starts with the first claim and exits at the first tick that finds none in flight, so an idle
// Middleware runs nothing, and a claim costs a list insertion instead of a runtime timer (a timer per
// request cost more than the rest of the middleware together).
//
// The goroutine ticks every renewEvery/2 and renews each claim every second tick after the one it
// registered in, so a claim is renewed at most renewEvery (Lease/3) after it was taken or last renewed:
// two renewals fit before the lease lapses even if one fails, and a claim whose renewal failed is
// tried again at every tick until one lands. Each renewal runs on a goroutine of its own with its own
// deadline, and the loop never waits for them: a renewal that hangs on a stalled connection delays no
// other key's, and the next tick skips only that key while its call is still out.
type renewer struct {
	mu      sync.Mutex
	head    *renewal // in-flight claims, an intrusive list
	ticks   uint64
	running bool
}

// renewal is one claim's renewal state. The middleware reuses it (it lives in the pooled per-request
// state), so it is never overwritten wholesale: its claim is set and cleared under mu, which a Renew
// holds. A renewal the loop collected for an earlier claim therefore either finds it stopped or acts
// for the current claim of the same struct — a renewal of a live claim, which is harmless.
type renewal struct {
	prev, next *renewal
	linked     bool
	born       uint64 // the renewer's tick count at registration

	mu      sync.Mutex // held during a Renew, so that stop waits for it
	stopped bool

	busy  atomic.Bool // a renewal of this claim is under way: the loop does not start another
	retry atomic.Bool // the last renewal failed: try again at the next tick

	m      *Middleware
	store  driver.Store
	key    driver.Key
	token  uint64
	ctx    context.Context // the attempt's: its values are passed to the store, its cancellation is not
	cancel context.CancelCauseFunc
}

// start registers a's claim for renewal, in rn when it is not nil.
func (rw *renewer) start(m *Middleware, a *Attempt, rn *renewal) *renewal {
	if rn == nil {
		rn = new(renewal)
	}
	rn.mu.Lock()
	rn.stopped = false
	rn.retry.Store(false)
	rn.m, rn.store, rn.key, rn.token, rn.ctx, rn.cancel = m, a.store, a.Key, a.Token, a.ctx, a.cancel
	rn.mu.Unlock()
	rw.mu.Lock()
	rn.born = rw.ticks
	rn.next = rw.head
	if rw.head != nil {
		rw.head.prev = rn
	}
	rw.head = rn
	rn.linked = true
	if !rw.running {
		rw.running = true
		go rw.loop(m)
	}
	rw.mu.Unlock()
	return rn
}

// stop ends the renewal of rn and waits for a Renew in progress, so that no Renew follows Complete.
func (rw *renewer) stop(rn *renewal) {
	rn.mu.Lock()
	rn.stopped = true
	rn.m, rn.store, rn.key, rn.ctx, rn.cancel = nil, nil, driver.Key{}, nil, nil
	rn.mu.Unlock()
	rw.mu.Lock()
	rw.unlink(rn)
	rw.mu.Unlock()
}

func (rw *renewer) unlink(rn *renewal) {
	if !rn.linked {
		return
	}
	if rn.prev != nil {
		rn.prev.next = rn.next
	} else {
		rw.head = rn.next
	}
	if rn.next != nil {
		rn.next.prev = rn.prev
	}
	rn.prev, rn.next, rn.linked = nil, nil, false
}

// hold holds off rn's renewal for a Complete of its claim; it reports false, holding nothing, when
// renewal already found the claim lost. Every hold is followed by a release.
func (rw *renewer) hold(rn *renewal) bool {
	rn.mu.Lock()
	if rn.stopped {
		rn.mu.Unlock()
		return false
	}
	return true
}

// release ends a hold. When err says the Complete stored the response (nil) or found the claim lost,
// the renewal ends; after any other error (the store failed) the renewal goes on, so that the caller
// keeps its claim while it tries again.
func (rw *renewer) release(rn *renewal, err error) {
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		rn.mu.Unlock()
		return
	}
	rn.stopped = true
	rn.m, rn.store, rn.key, rn.ctx, rn.cancel = nil, nil, driver.Key{}, nil, nil
	// Unlinked under rn.mu, for the reason renew gives.
	rw.mu.Lock()
	rw.unlink(rn)
	rw.mu.Unlock()
	rn.mu.Unlock()
}

func (rw *renewer) loop(m *Middleware) {
	t := time.NewTimer(m.renewEvery / 2)
	defer t.Stop()
	var due []*renewal
	for {
		<-t.C
		rw.mu.Lock()
		if rw.head == nil {
			rw.running = false
			rw.mu.Unlock()
			return
		}
		rw.ticks++
		due = due[:0]
		for rn := rw.head; rn != nil; rn = rn.next {
			age := rw.ticks - rn.born
			if (age > 0 && age%2 == 0 || rn.retry.Load()) && rn.busy.CompareAndSwap(false, true) {
				due = append(due, rn)
			}
		}
		rw.mu.Unlock()
		// Each on its own goroutine, not waited for: a Renew that hangs until its deadline delays
		// neither the other keys' renewals nor the next tick.
		for _, rn := range due {
			go func() {
				defer rn.busy.Store(false)
				rn.renew(rw)
			}()
		}
		clear(due)
		due = due[:0]
		t.Reset(m.renewEvery / 2)
	}
}

// renew extends the lease once; it reports whether the claim is lost, in which case it has already
// taken rn off rw's list.
func (rn *renewal) renew(rw *renewer) (lost bool) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.stopped {
		return false
	}
	m := rn.m
	octx, call, start := m.storeStart(context.WithoutCancel(rn.ctx), OpRenew, backendOf(rn.store), time.Time{})
	ctx, cancel := context.WithTimeout(octx, min(m.renewEvery, m.storeTimeout))
	err := rn.store.Renew(ctx, rn.key, rn.token, m.now().Add(m.lease))
	cancel()
	m.storeEnd(octx, call, start, err)
	switch {
	case err == nil:
		rn.retry.Store(false)
		m.stats.renewals.Add(1)
		return false
	case errors.Is(err, ErrLeaseLost):
		// Another claim owns the key now: whatever this handler does will not be stored. Tell it.
		m.stats.leaseLost.Add(1)
		m.log.LogAttrs(rn.ctx, slog.LevelWarn, "idempotency: lease lost while the handler runs; its result will not be stored",
			slog.String("idempotency_key", rn.key.Key), slog.Uint64("token", rn.token))
		if rn.cancel != nil {
			rn.cancel(ErrLeaseLost)
		}
		rn.stopped = true
		// Unlinked while rn.mu is still held (lock order rn.mu, then rw.mu; nothing takes them the
		// other way round). Once rn.mu is released the attempt may finish and its pooled renewal be
		// registered again for the next request's claim: an unlink after that point would silently
		// end the renewal of that new claim, whose lease would then lapse under a live handler.
		rw.mu.Lock()
		rw.unlink(rn)
		rw.mu.Unlock()
		return true
	default:
		// Keep trying, at every tick until one lands: another renewal fits in the lease before it
		// lapses, and a lease that lapsed during an outage is only marked (driver.Store.Claim)
		// until then.
		rn.retry.Store(true)
		m.stats.storeErrors.Add(1)
		m.log.LogAttrs(rn.ctx, slog.LevelWarn, "idempotency: lease renewal failed",
			slog.String("idempotency_key", rn.key.Key), slog.Any("error", err))
		return false
	}
}
