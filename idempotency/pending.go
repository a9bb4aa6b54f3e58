package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// Backoff of a completion that the store refused: from the first delay, doubling, up to the cap.
// The cap is short because the first try after the store recovers must land well within the extra
// lease that a suspecting claim grants (see driver.Store.Claim).
const (
	pendingFirstDelay = 50 * time.Millisecond
	pendingMaxDelay   = time.Second
)

// pending tracks the completions that failed and are being retried in the background. Each keeps its
// claim (the lease is renewed throughout), so that while the process lives no retry of the request
// can run the handler a second time: duplicates find the key in flight until the response is stored.
type pending struct {
	mu     sync.Mutex
	n      int
	idle   chan struct{} // closed when n drops to 0; nil while n is 0
	stop   context.Context
	cancel context.CancelFunc
}

func (p *pending) init() { p.stop, p.cancel = context.WithCancel(context.Background()) }

func (p *pending) add() {
	p.mu.Lock()
	if p.n == 0 {
		p.idle = make(chan struct{})
	}
	p.n++
	p.mu.Unlock()
}

func (p *pending) done() {
	p.mu.Lock()
	p.n--
	if p.n == 0 {
		close(p.idle)
		p.idle = nil
	}
	p.mu.Unlock()
}

// defer_ takes over x (not pooled until the completion ends) and retries completing a with resp.
func (p *pending) defer_(m *Middleware, ctx context.Context, x *exchange, a *Attempt, resp Response) {
	x.retained = true
	x.rec.release() // the ResponseWriter is the finished request's: drop it
	if m.sealer != nil {
		resp = m.seal(a.Key, resp)
	}
	p.add()
	m.stats.pending.Add(1)
	go func() {
		defer func() {
			m.stats.pending.Add(-1)
			x.retained = false
			m.putExchange(x)
			p.done()
		}()
		delay := pendingFirstDelay
		t := time.NewTimer(jitter(delay))
		defer t.Stop()
		for tries := 1; ; tries++ {
			select {
			case <-t.C:
			case <-p.stop.Done():
				a.stop()
				m.outcome(ctx, OutcomeStoreError)
				m.log.LogAttrs(ctx, slog.LevelError, "idempotency: gave up storing a response at Close: the key stays in flight until its lease and one more lapse, and a retry after that runs the handler again",
					slog.String("idempotency_key", a.Key.Key), slog.Int("tries", tries-1))
				return
			}
			m.stats.completionRetries.Add(1)
			err := a.complete(ctx, &completion{resp: resp})
			switch {
			case err == nil:
				m.log.LogAttrs(ctx, slog.LevelInfo, "idempotency: response stored after the store recovered",
					slog.String("idempotency_key", a.Key.Key), slog.Int("tries", tries))
				return
			case errors.Is(err, ErrLeaseLost):
				m.completionFailed(ctx, a, err, "complete")
				return
			}
			delay = min(2*delay, pendingMaxDelay)
			t.Reset(jitter(delay))
		}
	}()
}

// jitter spreads d over [d/2, d), so that many pending completions do not hit a recovering store at
// once.
func jitter(d time.Duration) time.Duration { return d/2 + rand.N(d/2+1) }

// Close ends the middleware's background work for a graceful shutdown; call it after the server has
// stopped serving (http.Server.Shutdown). Responses whose completion the store refused are still
// being retried, each holding its key in flight: Close waits until they are stored, or until ctx is
// done, and then stops retrying them, logs each key it gave up, and returns an error saying how many.
// A key given up stays in flight for its lease and one more, after which a retry runs the handler
// again: give Close as long as the shutdown allows. Renewal needs no Close: it stops by itself when
// no request is in flight.
//
// The middleware keeps serving after Close, but a completion that fails after it is not retried.
func (m *Middleware) Close(ctx context.Context) error {
	if m == nil || m.store == nil {
		return ErrNotBuilt
	}
	p := &m.pending
	p.mu.Lock()
	idle, n := p.idle, p.n
	p.mu.Unlock()
	if n == 0 {
		p.cancel()
		return nil
	}
	select {
	case <-idle:
		p.cancel()
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	n = p.n
	p.mu.Unlock()
	p.cancel()
	<-idle
	if n == 0 {
		return nil
	}
	return fmt.Errorf("idempotency: gave up %d responses the store had not stored: %w", n, context.Cause(ctx))
}
