package producer

import (
	"context"
	"sync"

	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/webhook"
)

// DeferredMemoryLog is a MemoryLog that numbers events the way pgstore.EventLog does: Append stores
// the event without a sequence, and Sequence numbers it later (a Sequencing log). Until then the event
// is invisible to Range, Claim and Status. Use it to test code that must work with a Log whose Append
// returns Sequence 0 — the same code then runs unchanged on PostgreSQL. A Dispatcher on it starts a
// Sequencer itself.
//
// The zero value is not usable: call NewDeferredMemoryLog. It is safe for concurrent use.
type DeferredMemoryLog struct {
	*MemoryLog

	mu      sync.Mutex // held across a whole Sequence call: one numbers at a time
	pending []pendingEvent
}

type pendingEvent struct {
	stream string
	ev     webhook.Event
}

var (
	_ Sequencing    = (*DeferredMemoryLog)(nil)
	_ Settler       = (*DeferredMemoryLog)(nil)
	_ BatchAppender = (*DeferredMemoryLog)(nil)
)

// NewDeferredMemoryLog returns an empty DeferredMemoryLog.
func NewDeferredMemoryLog() *DeferredMemoryLog { return &DeferredMemoryLog{MemoryLog: NewMemoryLog()} }

// Append implements Log: the event is stored unnumbered and returned with Sequence 0.
func (m *DeferredMemoryLog) Append(ctx context.Context, stream string, ev webhook.Event) (webhook.Event, error) {
	out, err := m.AppendBatch(ctx, []StreamEvent{{Stream: stream, Event: ev}})
	if err != nil {
		return webhook.Event{}, err
	}
	return out[0], nil
}

// AppendBatch implements BatchAppender: the events are stored unnumbered, all or none, and returned
// with Sequence 0.
func (m *DeferredMemoryLog) AppendBatch(ctx context.Context, events []StreamEvent) ([]webhook.Event, error) {
	return appendBatch(ctx, &m.mu, events, func(se StreamEvent) webhook.Event {
		ev := se.Event
		if ev.ID == "" {
			ev.ID = randid.New("evt_")
		}
		ev.Sequence = 0
		ev.Data = append([]byte(nil), ev.Data...)
		m.pending = append(m.pending, pendingEvent{stream: se.Stream, ev: ev})
		out := ev
		out.Data = append([]byte(nil), ev.Data...)
		return out
	})
}

// Sequence implements Sequencing.
func (m *DeferredMemoryLog) Sequence(ctx context.Context, limit int) ([]SequencedRun, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := min(max(limit, 0), len(m.pending))
	if n == 0 {
		return nil, nil
	}
	var (
		runs  []SequencedRun
		index = map[string]int{} // stream → its run
	)
	for _, p := range m.pending[:n] {
		e, err := m.MemoryLog.Append(context.WithoutCancel(ctx), p.stream, p.ev)
		if err != nil { // cannot happen: the event was checked at Append
			return runs, err
		}
		i, ok := index[p.stream]
		if !ok {
			i = len(runs)
			index[p.stream] = i
			runs = append(runs, SequencedRun{Stream: p.stream, First: e.Sequence})
		}
		runs[i].IDs = append(runs[i].IDs, e.ID)
	}
	clear(m.pending[:n])
	m.pending = m.pending[n:]
	return runs, nil
}

// Unsequenced reports how many appended events wait to be numbered.
func (m *DeferredMemoryLog) Unsequenced() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}
