package producer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// groupCommit gathers the settlements that workers have ready at the same moment into one
// Settler.Settle call. There is no background goroutine and no timer: the first caller to find no call
// running makes one for everything queued, and keeps making them while more queue up behind it; the
// others wait for their answer. Under light load every settlement is its own call, as without it;
// under heavy load one call carries as many as arrived during the previous one, up to maxSettleBatch.
type groupCommit struct {
	mu      sync.Mutex
	queue   []*pendingSettle
	running bool
}

// maxSettleBatch bounds one Settle call.
const maxSettleBatch = 500

type pendingSettle struct {
	s    driver.Settlement
	ctx  context.Context
	err  error
	done chan struct{}
}

func (g *groupCommit) do(ctx context.Context, st driver.Settler, s driver.Settlement) error {
	p := &pendingSettle{s: s, ctx: ctx, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, p)
	if g.running {
		g.mu.Unlock()
		select {
		case <-p.done:
			return p.err
		case <-ctx.Done():
			// Our deadline passed while others' call ran; the outcome may still be recorded by it,
			// and a retry of an already recorded outcome is ErrLeaseLost, which record accepts.
			return ctx.Err()
		}
	}
	g.running = true
	g.mu.Unlock()
	g.drain(st, p)
	return p.err
}

// drain makes Settle calls for the queue until mine is answered (nil: until the queue is empty). A
// caller that became the leader leaves as soon as its own settlement is done, handing what queued up
// meanwhile to a goroutine, so that a steady stream of others' settlements never holds its endpoint up.
func (g *groupCommit) drain(st driver.Settler, mine *pendingSettle) {
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		if mine != nil && isDone(mine) {
			g.mu.Unlock()
			go g.drain(st, nil)
			return
		}
		n := min(len(g.queue), maxSettleBatch)
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		g.mu.Unlock()
		g.run(st, batch)
	}
}

func isDone(p *pendingSettle) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// run makes one Settle call under the deadline of its latest-ending caller, so that no caller's
// budget is cut short by another's.
func (g *groupCommit) run(st driver.Settler, batch []*pendingSettle) {
	ss := make([]driver.Settlement, len(batch))
	deadline, bounded := time.Time{}, true
	for i, p := range batch {
		ss[i] = p.s
		dl, ok := p.ctx.Deadline()
		if !ok {
			bounded = false
		} else if dl.After(deadline) {
			deadline = dl
		}
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if bounded {
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	errs := st.Settle(ctx, ss)
	cancel()
	for i, p := range batch {
		if i < len(errs) {
			p.err = errs[i]
		} else {
			p.err = errors.New("producer: Settle returned fewer answers than settlements")
		}
		close(p.done)
	}
}
