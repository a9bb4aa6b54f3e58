package memstore

// Redeliveries: settled events queued to be pushed again (driver.Redeliverer), in a per-stream queue
// beside the events, so that an event's own delivery state never changes once it is settled.

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// memRedelivery is a settled event queued to be delivered again.
type memRedelivery struct {
	seq uint64
	// due is when it may be claimed; attempts counts the failed attempts of this redelivery.
	due      time.Time
	attempts int
	// token is the claim that holds it (the event's token when it was claimed); 0: none.
	token      uint64
	leaseUntil time.Time
}

// Redeliver implements driver.Redeliverer: each settled event of the range that is not queued yet
// joins the stream's queue, due at at. It takes time in proportion to the range and the queue.
func (m *Log) Redeliver(ctx context.Context, stream string, from, to uint64, at time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.streams[stream]
	if s == nil {
		return 0, nil
	}
	if from < s.first {
		return 0, &driver.PrunedError{Stream: stream, FirstRetained: s.first}
	}
	if from > s.last {
		return 0, nil
	}
	to = min(to, s.last)
	n := len(s.redo)
	for seq := from; seq <= to; seq++ {
		if s.events[seq-s.first].status.State == driver.Pending || s.queued(seq, n) {
			continue
		}
		s.redo = append(s.redo, memRedelivery{seq: seq, due: at})
	}
	added := len(s.redo) - n
	if added > 0 && n > 0 {
		slices.SortFunc(s.redo, func(a, b memRedelivery) int { return cmp.Compare(a.seq, b.seq) })
	}
	return added, nil
}

// queued reports whether seq is among the first n of the stream's queued redeliveries (which are in
// sequence order).
func (s *memStream) queued(seq uint64, n int) bool {
	_, found := slices.BinarySearchFunc(s.redo[:n], seq, func(r memRedelivery, seq uint64) int { return cmp.Compare(r.seq, seq) })
	return found
}

// redoHeld reports whether one of the stream's redeliveries is under a live lease at now: the stream
// then has its holder, and nothing else of it is claimed.
func (s *memStream) redoHeld(now time.Time) bool {
	for i := range s.redo {
		if s.redo[i].token != 0 && s.redo[i].leaseUntil.After(now) {
			return true
		}
	}
	return false
}

// leasedRedelivery returns the stream and the index of the queued redelivery the lease names, when
// the lease is its latest claim; -1 otherwise. The caller holds m.mu.
func (m *Log) leasedRedelivery(l driver.Lease) (*memStream, int) {
	s := m.streams[l.Stream]
	if s == nil || l.Token == 0 || l.Sequence < s.first || l.Sequence > s.last {
		return nil, -1
	}
	i, found := slices.BinarySearchFunc(s.redo, l.Sequence, func(r memRedelivery, seq uint64) int { return cmp.Compare(r.seq, seq) })
	if !found || s.redo[i].token != l.Token {
		return nil, -1
	}
	return s, i
}

// settleRedelivery records an attempt of the queued redelivery the lease holds, as Delivered (ok) or
// Failed would: delivered or abandoned, it leaves the queue; failed with a retry, it stays, due
// then. The event's own state does not change. ErrLeaseLost when the lease holds no redelivery. The
// caller holds m.mu.
func (m *Log) settleRedelivery(l driver.Lease, ok bool, a driver.Attempt) error {
	s, i := m.leasedRedelivery(l)
	if s == nil {
		return driver.ErrLeaseLost
	}
	e := &s.events[l.Sequence-s.first]
	m.record(l, e, ok, a)
	if ok || a.RetryAt.IsZero() {
		s.redo = slices.Delete(s.redo, i, i+1)
		return nil
	}
	rd := &s.redo[i]
	rd.attempts++
	rd.due, rd.token, rd.leaseUntil = a.RetryAt, 0, time.Time{}
	e.token++ // the lease is spent: a repeated settlement under it is ErrLeaseLost
	return nil
}

// releaseRedelivery gives the queued redelivery the lease holds back, due at retryAt, counting
// nothing. ErrLeaseLost when the lease holds no redelivery. The caller holds m.mu.
func (m *Log) releaseRedelivery(l driver.Lease, retryAt time.Time) error {
	s, i := m.leasedRedelivery(l)
	if s == nil {
		return driver.ErrLeaseLost
	}
	rd := &s.redo[i]
	rd.due, rd.token, rd.leaseUntil = retryAt, 0, time.Time{}
	s.events[l.Sequence-s.first].token++ // the lease is spent
	return nil
}
