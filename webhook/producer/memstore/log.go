package memstore

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// Log is the in-memory driver.Log, the zero-configuration default: right for a single process, for
// tests and for the sandbox, and lost when the process exits (use pgstore.EventLog to keep events and
// delivery state across restarts and replicas).
//
// It pushes settled events again on request (driver.Redeliverer), from a queue per stream beside the
// events, delivered behind the stream's normal deliveries.
//
// The zero value is an empty log ready to use, keeping any number of events. A Log is safe for
// concurrent use; it must not be copied after first use.
type Log struct {
	// MaxStreamEvents bounds the events one stream holds: an Append or AppendBatch that would take a
	// stream past it fails with driver.ErrStreamFull and appends nothing; Cleanup frees room. It is exact,
	// racing appenders included (they hold one lock). Set it before first use; 0 means no bound.
	MaxStreamEvents int

	mu      sync.Mutex
	streams map[string]*memStream
}

var (
	_ driver.Log           = (*Log)(nil)
	_ driver.Settler       = (*Log)(nil)
	_ driver.BatchAppender = (*Log)(nil)
	_ driver.Backlogger    = (*Log)(nil)
	_ driver.ByteRanger    = (*Log)(nil)
	_ driver.StatsReader   = (*Log)(nil)
	_ driver.Redeliverer   = (*Log)(nil)
)

// NewLog returns an empty Log.
func NewLog() *Log { return &Log{} }

type memStream struct {
	// events[i] has sequence first+i; everything below first was removed by Cleanup.
	events []memEvent
	first  uint64
	last   uint64
	// due is a lower bound of the index of the first driver.Pending event, so that Claim skips the settled
	// prefix of a long stream.
	due int
	// attempts is the stream's delivery history, oldest first in the history's order (attemptOrder).
	attempts []driver.AttemptRecord
	// hold is when the stream may be claimed again (driver.Settlement.Hold); zero: not held.
	hold time.Time
	// stats aggregates the history for StreamStats; nil before the first attempt. Cleanup leaves it.
	stats *streamStats
	// redo is the stream's settled events queued to be delivered again (Redeliver), by sequence.
	redo []memRedelivery
}

type memEvent struct {
	ev     webhook.Event
	status driver.DeliveryStatus
	// token is the fencing token of the event's latest claim, normal or redelivery: each claim raises
	// it, so no two claims of the event share one.
	token uint64
	// numbered is the Number of the event's latest attempt in the history (0: none yet).
	numbered int
	// traceParent and traceState are the trace context stored with the event.
	traceParent, traceState string
}

// Append implements driver.Log.
func (m *Log) Append(ctx context.Context, e driver.StreamEvent) (webhook.Event, error) {
	if err := ctx.Err(); err != nil {
		return webhook.Event{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.roomLocked(map[string]int{e.Stream: 1}, nil); err != nil {
		return webhook.Event{}, err
	}
	return m.appendLocked(e), nil
}

// roomLocked checks that every stream of adding can take that many more events, besides the extra
// ones (a DeferredLog's unnumbered events), under MaxStreamEvents. The caller holds m.mu.
func (m *Log) roomLocked(adding, extra map[string]int) error {
	if m.MaxStreamEvents <= 0 {
		return nil
	}
	for stream, n := range adding {
		held := extra[stream]
		if s := m.streams[stream]; s != nil {
			held += len(s.events)
		}
		if held+n > m.MaxStreamEvents {
			return fmt.Errorf("%w: stream %q holds %d of its %d", driver.ErrStreamFull, stream, held, m.MaxStreamEvents)
		}
	}
	return nil
}

// perStream counts a batch's events by stream.
func perStream(events []driver.StreamEvent) map[string]int {
	n := make(map[string]int, 1)
	for _, se := range events {
		n[se.Stream]++
	}
	return n
}

// AppendBatch implements driver.BatchAppender: all events are appended under one lock, so the batch
// is all or nothing and its events of one stream are consecutive.
func (m *Log) AppendBatch(ctx context.Context, events []driver.StreamEvent) ([]webhook.Event, error) {
	return appendBatch(ctx, &m.mu, events, func() error { return m.roomLocked(perStream(events), nil) }, m.appendLocked)
}

// appendBatch is the memory logs' AppendBatch: it checks the context, then, holding mu, checks room
// (the stream bound) and appends each event with add, returning what add returned, in the batch's
// order.
func appendBatch(ctx context.Context, mu *sync.Mutex, events []driver.StreamEvent, room func() error, add func(driver.StreamEvent) webhook.Event) ([]webhook.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]webhook.Event, len(events))
	mu.Lock()
	defer mu.Unlock()
	if err := room(); err != nil {
		return nil, err
	}
	for i, se := range events {
		out[i] = add(se)
	}
	return out, nil
}

// appendLocked numbers and stores an event with its trace context; m.mu is held.
func (m *Log) appendLocked(se driver.StreamEvent) webhook.Event {
	stream, ev := se.Stream, se.Event
	if ev.ID == "" {
		ev.ID = randid.New("evt_")
	}
	// The caller keeps its slice; the log keeps its own copy.
	ev.Data = append([]byte(nil), ev.Data...)
	if m.streams == nil {
		m.streams = make(map[string]*memStream)
	}
	s := m.streams[stream]
	if s == nil {
		s = &memStream{first: 1}
		m.streams[stream] = s
	}
	s.last++
	ev.Sequence = s.last
	s.events = append(s.events, memEvent{ev: ev, status: driver.DeliveryStatus{NextAttempt: time.Unix(ev.Created, 0)},
		traceParent: se.TraceParent, traceState: se.TraceState})
	out := ev
	out.Data = append([]byte(nil), ev.Data...)
	return out
}

// Range implements driver.Log.
func (m *Log) Range(ctx context.Context, stream string, from, to uint64, limit int) ([]webhook.Event, bool, error) {
	return m.rangeBytes(ctx, stream, from, to, limit, math.MaxInt)
}

// RangeBytes implements driver.ByteRanger: only the events returned are copied.
func (m *Log) RangeBytes(ctx context.Context, stream string, from, to uint64, limit, maxBytes int) ([]webhook.Event, bool, error) {
	return m.rangeBytes(ctx, stream, from, to, limit, maxBytes)
}

func (m *Log) rangeBytes(ctx context.Context, stream string, from, to uint64, limit, maxBytes int) ([]webhook.Event, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.streams[stream]
	if s == nil {
		return nil, false, nil
	}
	if from < s.first {
		return nil, false, &driver.PrunedError{Stream: stream, FirstRetained: s.first}
	}
	if from > s.last {
		return nil, false, nil
	}
	end := min(to, s.last) // inclusive
	n := end - from + 1
	more := false
	if n > uint64(limit) {
		n, more = uint64(limit), true
	}
	page := s.events[from-s.first:][:n]
	size := 0
	for i := range page {
		if i > 0 && size+len(page[i].ev.Data) > maxBytes {
			page, more = page[:i], true
			break
		}
		size += len(page[i].ev.Data)
	}
	out := make([]webhook.Event, len(page))
	// One buffer for all the copies; each event's Data is capped so an append cannot spill into the next.
	buf := make([]byte, 0, size)
	for i := range page {
		out[i] = page[i].ev
		start := len(buf)
		buf = append(buf, page[i].ev.Data...)
		out[i].Data = buf[start:len(buf):len(buf)]
	}
	return out, more, nil
}

func copyEvent(ev webhook.Event) webhook.Event {
	ev.Data = append([]byte(nil), ev.Data...)
	return ev
}

// Claim implements driver.Log.
func (m *Log) Claim(ctx context.Context, req driver.ClaimRequest) ([]driver.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.Limit < 1 {
		return nil, nil
	}
	now := req.Now
	m.mu.Lock()
	defer m.mu.Unlock()
	// A candidate is the event at s.events[i]: its normal delivery when r < 0, else its queued
	// redelivery s.redo[r].
	type cand struct {
		stream string
		s      *memStream
		i, r   int
	}
	skip := make(map[string]bool, len(req.Skip))
	for _, name := range req.Skip {
		skip[name] = true
	}
	var cands []cand
streams:
	for name, s := range m.streams {
		if skip[name] || s.hold.After(now) || s.redoHeld(now) {
			continue
		}
		// Advance the settled prefix marker, then collect the due deliveries after it, unless one of
		// the stream's deliveries is held by a live lease.
		for s.due < len(s.events) && s.events[s.due].status.State != driver.Pending {
			s.due++
		}
		n := len(cands)
		for i := s.due; i < len(s.events); i++ {
			st := &s.events[i].status
			if st.State != driver.Pending {
				continue
			}
			if st.LeaseUntil.After(now) {
				cands = cands[:n]
				continue streams
			}
			if !st.NextAttempt.After(now) && (req.PerStream <= 0 || len(cands)-n < req.PerStream) {
				cands = append(cands, cand{name, s, i, -1})
			}
		}
		if len(cands) == n {
			// Nothing of the normal stream is due: the stream's redeliveries go, behind it.
			for r := range s.redo {
				if req.PerStream > 0 && len(cands)-n >= req.PerStream {
					break
				}
				if rd := &s.redo[r]; !rd.due.After(now) {
					cands = append(cands, cand{name, s, int(rd.seq - s.first), r})
				}
			}
		}
	}
	due := func(c cand) time.Time {
		if c.r >= 0 {
			return c.s.redo[c.r].due
		}
		return c.s.events[c.i].status.NextAttempt
	}
	slices.SortFunc(cands, func(a, b cand) int {
		ea, eb := &a.s.events[a.i], &b.s.events[b.i]
		if c := due(a).Compare(due(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.stream, b.stream); c != 0 {
			return c
		}
		return cmp.Compare(ea.ev.Sequence, eb.ev.Sequence)
	})
	if len(cands) > req.Limit {
		cands = cands[:req.Limit]
	}
	out := make([]driver.Delivery, len(cands))
	for k, c := range cands {
		e := &c.s.events[c.i]
		e.token++
		attempts := e.status.Attempts
		if c.r >= 0 {
			rd := &c.s.redo[c.r]
			rd.token, rd.leaseUntil, attempts = e.token, req.LeaseUntil, rd.attempts
		} else {
			e.status.LeaseUntil = req.LeaseUntil
		}
		out[k] = driver.Delivery{
			Lease:       driver.Lease{Stream: c.stream, Sequence: e.ev.Sequence, Token: e.token},
			Event:       copyEvent(e.ev),
			Attempts:    attempts,
			LeaseUntil:  req.LeaseUntil,
			TraceParent: e.traceParent, TraceState: e.traceState,
			Redelivery: c.r >= 0,
		}
	}
	return out, nil
}

// leased returns the event the lease names when the lease is still its latest claim and it is
// pending. The caller holds m.mu.
func (m *Log) leased(l driver.Lease) *memEvent {
	s := m.streams[l.Stream]
	if s == nil || l.Sequence < s.first || l.Sequence > s.last {
		return nil
	}
	e := &s.events[l.Sequence-s.first]
	if e.token != l.Token || e.status.State != driver.Pending || l.Token == 0 {
		return nil
	}
	return e
}

// Delivered implements driver.Log.
func (m *Log) Delivered(ctx context.Context, l driver.Lease, a driver.Attempt) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.deliveredLocked(l, a)
}

func (m *Log) deliveredLocked(l driver.Lease, a driver.Attempt) error {
	e := m.leased(l)
	if e == nil {
		return m.settleRedelivery(l, true, a)
	}
	m.record(l, e, true, a)
	e.status.State = driver.Delivered
	e.status.DeliveredAt = a.At
	e.status.LastAttempt = a.At
	e.status.LeaseUntil = time.Time{}
	e.status.NextAttempt = time.Time{}
	return nil
}

// Failed implements driver.Log.
func (m *Log) Failed(ctx context.Context, l driver.Lease, a driver.Attempt) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failedLocked(l, a)
}

func (m *Log) failedLocked(l driver.Lease, a driver.Attempt) error {
	e := m.leased(l)
	if e == nil {
		return m.settleRedelivery(l, false, a)
	}
	m.record(l, e, false, a)
	e.status.Attempts++
	e.status.LastAttempt = a.At
	e.status.LastError = a.Reason
	e.status.LeaseUntil = time.Time{}
	e.status.NextAttempt = a.RetryAt
	if a.RetryAt.IsZero() {
		e.status.State = driver.Abandoned
	}
	e.token++ // the lease is spent: a repeated settlement under it is ErrLeaseLost
	return nil
}

// Settle implements driver.Settler: each settlement as Delivered, Failed or Release would record it,
// with its hold, under one lock.
func (m *Log) Settle(ctx context.Context, ss []driver.Settlement) []error {
	errs := make([]error, len(ss))
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, s := range ss {
		switch {
		case s.Release:
			errs[i] = m.releaseLocked(s.Lease, s.Attempt.RetryAt)
		case s.Delivered:
			errs[i] = m.deliveredLocked(s.Lease, s.Attempt)
		default:
			errs[i] = m.failedLocked(s.Lease, s.Attempt)
		}
		if st := m.streams[s.Lease.Stream]; errs[i] == nil && st != nil && s.Hold.After(st.hold) {
			st.hold = s.Hold
		}
	}
	return errs
}

// record adds an attempt to the stream's history and to its statistics (every attempt enters the
// history here, so the statistics count them all), under a random ID (a counter would tell each
// tenant how many attempts went to the others) and the event's next Number (its redeliveries'
// attempts continue its numbering). The caller holds m.mu.
func (m *Log) record(l driver.Lease, e *memEvent, ok bool, a driver.Attempt) {
	s := m.streams[l.Stream]
	e.numbered++
	r := driver.AttemptRecord{
		ID: randid.Uint63(), Stream: l.Stream, Sequence: l.Sequence, EventID: e.ev.ID,
		Number: e.numbered, Outcome: outcome(ok, a), Attempt: a,
	}
	// Nearly always at the end: attempts are recorded as they are made.
	i := len(s.attempts)
	for i > 0 && attemptOrder(s.attempts[i-1], r) > 0 {
		i--
	}
	s.attempts = slices.Insert(s.attempts, i, r)
	if s.stats == nil {
		s.stats = new(streamStats)
	}
	s.stats.add(&r)
}

// outcome is the outcome the history records for a settled attempt: delivered when ok, else failed
// or, without a retry, abandoned.
func outcome(ok bool, a driver.Attempt) driver.Outcome {
	switch {
	case ok:
		return driver.OutcomeDelivered
	case a.RetryAt.IsZero():
		return driver.OutcomeAbandoned
	}
	return driver.OutcomeFailed
}

// attemptOrder is the history's order, oldest first: by At, then Sequence, then Number, which
// identify an attempt within its stream. Never by ID, which is random.
func attemptOrder(a, b driver.AttemptRecord) int {
	return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Sequence, b.Sequence), cmp.Compare(a.Number, b.Number))
}

// Attempts implements driver.Log.
func (m *Log) Attempts(ctx context.Context, q driver.AttemptQuery) ([]driver.AttemptRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.streams[q.Stream]
	if s == nil {
		return nil, false, nil
	}
	start := len(s.attempts) - 1
	if q.Before != 0 {
		// The page after the cursor's attempt: those older than it. A cursor no longer held (removed
		// with its event) ends the listing, as everything older went with it.
		start = slices.IndexFunc(s.attempts, func(a driver.AttemptRecord) bool { return a.ID == q.Before }) - 1
	}
	var out []driver.AttemptRecord
	for i := start; i >= 0; i-- {
		a := &s.attempts[i]
		switch {
		case q.Sequence != 0 && a.Sequence != q.Sequence,
			q.Outcome != 0 && a.Outcome != q.Outcome:
			continue
		}
		if len(out) == q.Limit {
			return out, true, nil
		}
		out = append(out, *a)
	}
	return out, false, nil
}

// Release implements driver.Log.
func (m *Log) Release(ctx context.Context, l driver.Lease, retryAt time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.releaseLocked(l, retryAt)
}

func (m *Log) releaseLocked(l driver.Lease, retryAt time.Time) error {
	e := m.leased(l)
	if e == nil {
		return m.releaseRedelivery(l, retryAt)
	}
	e.status.LeaseUntil = time.Time{}
	e.status.NextAttempt = retryAt
	e.token++ // the lease is spent: a repeated settlement under it is ErrLeaseLost
	return nil
}

// Status implements driver.Log.
func (m *Log) Status(ctx context.Context, stream string, seq uint64) (driver.DeliveryStatus, error) {
	if err := ctx.Err(); err != nil {
		return driver.DeliveryStatus{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.streams[stream]
	if s == nil || seq < s.first || seq > s.last {
		return driver.DeliveryStatus{}, driver.ErrNotFound
	}
	return s.events[seq-s.first].status, nil
}

// Cleanup implements driver.Log. An event's attempts, and its queued redelivery, go with it.
func (m *Log) Cleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if limit < 1 {
		return 0, nil
	}
	cutoff := before.Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	type old struct {
		stream  string
		created int64
		seq     uint64
	}
	var olds []old
	for name, s := range m.streams {
		for _, e := range s.events {
			if e.ev.Created < cutoff {
				olds = append(olds, old{name, e.ev.Created, e.ev.Sequence})
			}
		}
	}
	slices.SortFunc(olds, func(a, b old) int {
		if c := cmp.Compare(a.created, b.created); c != 0 {
			return c
		}
		if c := cmp.Compare(a.stream, b.stream); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	if len(olds) > limit {
		olds = olds[:limit]
	}
	through := make(map[string]uint64)
	for _, o := range olds {
		through[o.stream] = max(through[o.stream], o.seq)
	}
	removed := 0
	for name, seq := range through {
		s := m.streams[name]
		n := int(seq - s.first + 1)
		removed += n
		s.events = slices.Delete(s.events, 0, n)
		s.first = seq + 1
		s.due = max(0, s.due-n)
		s.attempts = slices.DeleteFunc(s.attempts, func(a driver.AttemptRecord) bool { return a.Sequence <= seq })
		s.redo = slices.DeleteFunc(s.redo, func(r memRedelivery) bool { return r.seq <= seq })
	}
	return removed, nil
}

// Backlog implements driver.Backlogger.
func (m *Log) Backlog(ctx context.Context) ([]driver.Backlog, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.backlogLocked(nil), nil
}

// backlogLocked adds the streams' undelivered events to extra (a stream's entry may already be
// there) and returns them ordered by stream. The caller holds m.mu.
func (m *Log) backlogLocked(extra map[string]driver.Backlog) []driver.Backlog {
	if extra == nil {
		extra = make(map[string]driver.Backlog)
	}
	for name, s := range m.streams {
		for i := s.due; i < len(s.events); i++ {
			e := &s.events[i]
			if e.status.State != driver.Pending {
				continue
			}
			b := extra[name]
			created := time.Unix(e.ev.Created, 0)
			if b.Events == 0 || created.Before(b.Oldest) {
				b.Oldest = created
			}
			b.Stream = name
			b.Events++
			extra[name] = b
		}
	}
	out := make([]driver.Backlog, 0, len(extra))
	for _, b := range extra {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b driver.Backlog) int { return cmp.Compare(a.Stream, b.Stream) })
	return out
}
