package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// DeferredLog is a Log that numbers events the way pgstore.EventLog does: Append stores
// the event without a sequence, and Sequence numbers it later (a driver.Sequencing log). Until then the event
// is invisible to Range, Claim and Status. Use it to test code that must work with a driver.Log whose Append
// returns Sequence 0 — the same code then runs unchanged on PostgreSQL. A Dispatcher on it starts a
// Sequencer itself.
//
// The zero value is an empty log ready to use. A DeferredLog is safe for concurrent use; it must not
// be copied after first use.
type DeferredLog struct {
	Log

	mu      sync.Mutex // held across a whole Sequence call: one numbers at a time
	pending []pendingEvent
	waiting map[string]int // the unnumbered events of each stream
}

type pendingEvent = driver.StreamEvent

var (
	_ driver.Sequencing    = (*DeferredLog)(nil)
	_ driver.Settler       = (*DeferredLog)(nil)
	_ driver.BatchAppender = (*DeferredLog)(nil)
	_ driver.Backlogger    = (*DeferredLog)(nil)
	_ driver.ByteRanger    = (*DeferredLog)(nil)
	_ driver.StatsReader   = (*DeferredLog)(nil)
	_ driver.Redeliverer   = (*DeferredLog)(nil)
)

// NewDeferredLog returns an empty DeferredLog. Its MaxStreamEvents (the embedded
// Log's, set before first use) bounds each stream's events, numbered or not.
func NewDeferredLog() *DeferredLog { return &DeferredLog{} }

// Append implements driver.Log: the event is stored unnumbered and returned with Sequence 0.
func (m *DeferredLog) Append(ctx context.Context, e driver.StreamEvent) (webhook.Event, error) {
	out, err := m.AppendBatch(ctx, []driver.StreamEvent{e})
	if err != nil {
		return webhook.Event{}, err
	}
	return out[0], nil
}

// AppendBatch implements driver.BatchAppender: the events are stored unnumbered, all or none, and returned
// with Sequence 0.
func (m *DeferredLog) AppendBatch(ctx context.Context, events []driver.StreamEvent) ([]webhook.Event, error) {
	// Lock order as in Sequence: the pending queue's (held by appendBatch), then the log's.
	room := func() error {
		m.Log.mu.Lock()
		defer m.Log.mu.Unlock()
		return m.Log.roomLocked(perStream(events), m.waiting)
	}
	return appendBatch(ctx, &m.mu, events, room, func(se driver.StreamEvent) webhook.Event {
		if m.waiting == nil {
			m.waiting = make(map[string]int)
		}
		m.waiting[se.Stream]++
		ev := se.Event
		if ev.ID == "" {
			ev.ID = randid.New("evt_")
		}
		ev.Sequence = 0
		ev.Data = append([]byte(nil), ev.Data...)
		se.Event = ev
		m.pending = append(m.pending, se)
		out := ev
		out.Data = append([]byte(nil), ev.Data...)
		return out
	})
}

// Sequence implements driver.Sequencing.
func (m *DeferredLog) Sequence(ctx context.Context, limit int) ([]driver.SequencedRun, error) {
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
		runs  []driver.SequencedRun
		index = map[string]int{} // stream → its run
	)
	// The events were checked, and counted against the stream's bound, when they were appended.
	m.Log.mu.Lock()
	defer m.Log.mu.Unlock()
	for _, p := range m.pending[:n] {
		e := m.Log.appendLocked(p)
		if m.waiting[p.Stream]--; m.waiting[p.Stream] <= 0 {
			delete(m.waiting, p.Stream)
		}
		i, ok := index[p.Stream]
		if !ok {
			i = len(runs)
			index[p.Stream] = i
			runs = append(runs, driver.SequencedRun{Stream: p.Stream, First: e.Sequence})
		}
		runs[i].IDs = append(runs[i].IDs, e.ID)
	}
	clear(m.pending[:n])
	m.pending = m.pending[n:]
	return runs, nil
}

// Unsequenced reports how many appended events wait to be numbered.
func (m *DeferredLog) Unsequenced() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}

// Backlog implements driver.Backlogger: the numbered events not yet delivered and the unnumbered ones.
func (m *DeferredLog) Backlog(ctx context.Context) ([]driver.Backlog, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Lock order as in Sequence: the pending queue's, then the log's.
	m.mu.Lock()
	defer m.mu.Unlock()
	extra := make(map[string]driver.Backlog)
	for _, p := range m.pending {
		b := extra[p.Stream]
		created := time.Unix(p.Event.Created, 0)
		if b.Events == 0 || created.Before(b.Oldest) {
			b.Oldest = created
		}
		b.Stream = p.Stream
		b.Events++
		extra[p.Stream] = b
	}
	m.Log.mu.Lock()
	defer m.Log.mu.Unlock()
	return m.Log.backlogLocked(extra), nil
}
