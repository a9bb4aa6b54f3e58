package producer

import (
	"context"
	"sync"
	"time"

	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/webhook"
)

// DeferredMemoryLog is a MemoryLog that numbers events the way pgstore.EventLog does: Append stores
// the event without a sequence, and Sequence numbers it later (a Sequencing log). Until then the event
// is invisible to Range, Claim and Status. Use it to test code that must work with a Log whose Append
// returns Sequence 0 — the same code then runs unchanged on PostgreSQL. A Dispatcher on it starts a
// Sequencer itself.
//
// The zero value is not usable: every method with an error result returns an error that wraps
// ErrNotBuilt (Settle one per settlement), and Unsequenced is 0. Call NewDeferredMemoryLog. It is safe
// for concurrent use.
type DeferredMemoryLog struct {
	*MemoryLog

	mu      sync.Mutex // held across a whole Sequence call: one numbers at a time
	pending []pendingEvent
	waiting map[string]int // the unnumbered events of each stream
}

type pendingEvent struct {
	stream string
	ev     webhook.Event
	trace  TraceContext
}

var (
	_ Sequencing    = (*DeferredMemoryLog)(nil)
	_ Settler       = (*DeferredMemoryLog)(nil)
	_ BatchAppender = (*DeferredMemoryLog)(nil)
	_ Backlogger    = (*DeferredMemoryLog)(nil)
	_ ByteRanger    = (*DeferredMemoryLog)(nil)
)

// NewDeferredMemoryLog returns an empty DeferredMemoryLog. Its MaxStreamEvents (the embedded
// MemoryLog's, set before first use) bounds each stream's events, numbered or not.
func NewDeferredMemoryLog() *DeferredMemoryLog { return &DeferredMemoryLog{MemoryLog: NewMemoryLog()} }

// Append implements Log: the event is stored unnumbered and returned with Sequence 0.
func (m *DeferredMemoryLog) Append(ctx context.Context, stream string, ev webhook.Event) (webhook.Event, error) {
	if !m.built() {
		return webhook.Event{}, errZeroDeferredLog
	}
	out, err := m.AppendBatch(ctx, []StreamEvent{{Stream: stream, Event: ev}})
	if err != nil {
		return webhook.Event{}, err
	}
	return out[0], nil
}

// AppendBatch implements BatchAppender: the events are stored unnumbered, all or none, and returned
// with Sequence 0.
func (m *DeferredMemoryLog) AppendBatch(ctx context.Context, events []StreamEvent) ([]webhook.Event, error) {
	if !m.built() {
		return nil, errZeroDeferredLog
	}
	tc := TraceContextFrom(ctx)
	// Lock order as in Sequence: the pending queue's (held by appendBatch), then the log's.
	room := func() error {
		m.MemoryLog.mu.Lock()
		defer m.MemoryLog.mu.Unlock()
		return m.MemoryLog.roomLocked(perStream(events), m.waiting)
	}
	return appendBatch(ctx, &m.mu, events, room, func(se StreamEvent) webhook.Event {
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
		m.pending = append(m.pending, pendingEvent{stream: se.Stream, ev: ev, trace: tc})
		out := ev
		out.Data = append([]byte(nil), ev.Data...)
		return out
	})
}

// Sequence implements Sequencing.
func (m *DeferredMemoryLog) Sequence(ctx context.Context, limit int) ([]SequencedRun, error) {
	if !m.built() {
		return nil, errZeroDeferredLog
	}
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
	// The events were checked, and counted against the stream's bound, when they were appended.
	m.MemoryLog.mu.Lock()
	defer m.MemoryLog.mu.Unlock()
	for _, p := range m.pending[:n] {
		e := m.MemoryLog.appendLocked(p.stream, p.ev, p.trace)
		if m.waiting[p.stream]--; m.waiting[p.stream] <= 0 {
			delete(m.waiting, p.stream)
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
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}

// built reports a DeferredMemoryLog that NewDeferredMemoryLog made: the zero value has no MemoryLog
// to number events into.
func (m *DeferredMemoryLog) built() bool { return m != nil && m.MemoryLog != nil }

// The methods below are the embedded MemoryLog's, guarded: on a zero DeferredMemoryLog they would
// run on a nil *MemoryLog.

// Range implements Log.
func (m *DeferredMemoryLog) Range(ctx context.Context, stream string, from, to uint64, limit int) ([]webhook.Event, bool, error) {
	if !m.built() {
		return nil, false, errZeroDeferredLog
	}
	return m.MemoryLog.Range(ctx, stream, from, to, limit)
}

// RangeBytes implements ByteRanger.
func (m *DeferredMemoryLog) RangeBytes(ctx context.Context, stream string, from, to uint64, limit, maxBytes int) ([]webhook.Event, bool, error) {
	if !m.built() {
		return nil, false, errZeroDeferredLog
	}
	return m.MemoryLog.RangeBytes(ctx, stream, from, to, limit, maxBytes)
}

// Claim implements Log.
func (m *DeferredMemoryLog) Claim(ctx context.Context, req ClaimRequest) ([]Delivery, error) {
	if !m.built() {
		return nil, errZeroDeferredLog
	}
	return m.MemoryLog.Claim(ctx, req)
}

// Delivered implements Log.
func (m *DeferredMemoryLog) Delivered(ctx context.Context, l Lease, a Attempt) error {
	if !m.built() {
		return errZeroDeferredLog
	}
	return m.MemoryLog.Delivered(ctx, l, a)
}

// Failed implements Log.
func (m *DeferredMemoryLog) Failed(ctx context.Context, l Lease, a Attempt) error {
	if !m.built() {
		return errZeroDeferredLog
	}
	return m.MemoryLog.Failed(ctx, l, a)
}

// Settle implements Settler.
func (m *DeferredMemoryLog) Settle(ctx context.Context, ss []Settlement) []error {
	if !m.built() {
		errs := make([]error, len(ss))
		for i := range errs {
			errs[i] = errZeroDeferredLog
		}
		return errs
	}
	return m.MemoryLog.Settle(ctx, ss)
}

// Attempts implements Log.
func (m *DeferredMemoryLog) Attempts(ctx context.Context, q AttemptQuery) ([]AttemptRecord, bool, error) {
	if !m.built() {
		return nil, false, errZeroDeferredLog
	}
	return m.MemoryLog.Attempts(ctx, q)
}

// Release implements Log.
func (m *DeferredMemoryLog) Release(ctx context.Context, l Lease, retryAt time.Time) error {
	if !m.built() {
		return errZeroDeferredLog
	}
	return m.MemoryLog.Release(ctx, l, retryAt)
}

// Status implements Log.
func (m *DeferredMemoryLog) Status(ctx context.Context, stream string, seq uint64) (DeliveryStatus, error) {
	if !m.built() {
		return DeliveryStatus{}, errZeroDeferredLog
	}
	return m.MemoryLog.Status(ctx, stream, seq)
}

// Cleanup implements Log.
func (m *DeferredMemoryLog) Cleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	if !m.built() {
		return 0, errZeroDeferredLog
	}
	return m.MemoryLog.Cleanup(ctx, before, limit)
}

// Backlog implements Backlogger: the numbered events not yet delivered and the unnumbered ones.
func (m *DeferredMemoryLog) Backlog(ctx context.Context) ([]StreamBacklog, error) {
	if !m.built() {
		return nil, errZeroDeferredLog
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Lock order as in Sequence: the pending queue's, then the log's.
	m.mu.Lock()
	defer m.mu.Unlock()
	extra := make(map[string]StreamBacklog)
	for _, p := range m.pending {
		b := extra[p.stream]
		created := time.Unix(p.ev.Created, 0)
		if b.Events == 0 || created.Before(b.Oldest) {
			b.Oldest = created
		}
		b.Stream = p.stream
		b.Events++
		extra[p.stream] = b
	}
	m.MemoryLog.mu.Lock()
	defer m.MemoryLog.mu.Unlock()
	return m.MemoryLog.backlogLocked(extra), nil
}
