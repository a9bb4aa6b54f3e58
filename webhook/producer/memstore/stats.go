package memstore

import (
	"context"
	"time"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// The delivery statistics (driver.StatsReader): per stream, a ring of 60 one-minute buckets and one
// of 168 one-hour buckets, fed by record, the one place attempts enter the history. A bucket is
// allocated when its slot is first written and then reused in place, so a stream's statistics take
// at most 228 buckets (about 120 KiB), and about 2 KiB before any.

const (
	minuteSlots = 60
	hourSlots   = 168
)

// statSlot is one bucket of a ring: the counts of the attempts made from start for a minute or an
// hour.
type statSlot struct {
	start int64 // unix seconds
	driver.WindowStats
}

// streamStats holds a stream's rings.
type streamStats struct {
	minutes [minuteSlots]*statSlot
	hours   [hourSlots]*statSlot
}

// floorDiv is a/b rounded down, for times before 1970 too.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// add counts one recorded attempt in its minute's and its hour's bucket.
func (s *streamStats) add(r *driver.AttemptRecord) {
	unix := r.At.Unix()
	m, h := floorDiv(unix, 60), floorDiv(unix, 3600)
	addTo(&s.minutes[m-floorDiv(m, minuteSlots)*minuteSlots], m*60, r)
	addTo(&s.hours[h-floorDiv(h, hourSlots)*hourSlots], h*3600, r)
}

// addTo counts r in the bucket starting at start, which takes *slot: a slot that holds an older
// bucket is reset for it, and one that holds a newer bucket already (r is a ring's length late)
// does not count r.
func addTo(slot **statSlot, start int64, r *driver.AttemptRecord) {
	b := *slot
	switch {
	case b == nil:
		b = &statSlot{start: start}
		*slot = b
	case b.start < start:
		*b = statSlot{start: start}
	case b.start > start:
		return
	}
	switch r.Outcome {
	case driver.OutcomeDelivered:
		b.Delivered++
	case driver.OutcomeFailed:
		b.Failed++
	case driver.OutcomeAbandoned:
		b.Abandoned++
	}
	b.Latency.Add(r.Latency)
}

// StreamStats implements driver.StatsReader: it reads the stream's 228 buckets at most, and its
// events above the settled prefix.
func (m *Log) StreamStats(ctx context.Context, stream string, now time.Time) (driver.StreamStats, error) {
	if err := ctx.Err(); err != nil {
		return driver.StreamStats{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.streamStatsLocked(stream, now, driver.Backlog{}), nil
}

// streamStatsLocked is StreamStats with extra undelivered events (a DeferredLog's unnumbered ones)
// added to the backlog. The caller holds m.mu.
func (m *Log) streamStatsLocked(stream string, now time.Time, extra driver.Backlog) driver.StreamStats {
	out := driver.StreamStats{Backlog: extra.Events, Oldest: extra.Oldest}
	s := m.streams[stream]
	if s == nil {
		return out
	}
	if st := s.stats; st != nil {
		for _, b := range st.minutes {
			if b != nil {
				out.AddBucket(now, time.Unix(b.start, 0), time.Minute, b.WindowStats)
			}
		}
		for _, b := range st.hours {
			if b != nil {
				out.AddBucket(now, time.Unix(b.start, 0), time.Hour, b.WindowStats)
			}
		}
	}
	for s.due < len(s.events) && s.events[s.due].status.State != driver.Pending {
		s.due++
	}
	for i := s.due; i < len(s.events); i++ {
		e := &s.events[i]
		if e.status.State != driver.Pending {
			continue
		}
		created := time.Unix(e.ev.Created, 0)
		if out.Backlog == 0 || created.Before(out.Oldest) {
			out.Oldest = created
		}
		out.Backlog++
	}
	return out
}

// StreamStats implements driver.StatsReader: the Log's, with the stream's unnumbered events in the
// backlog. It reads the queue of unnumbered events only when the stream has some there, and only up
// to the last of them.
func (m *DeferredLog) StreamStats(ctx context.Context, stream string, now time.Time) (driver.StreamStats, error) {
	if err := ctx.Err(); err != nil {
		return driver.StreamStats{}, err
	}
	// Lock order as in Sequence: the pending queue's, then the log's.
	m.mu.Lock()
	defer m.mu.Unlock()
	var extra driver.Backlog
	for i := 0; extra.Events < m.waiting[stream]; i++ {
		p := &m.pending[i]
		if p.Stream != stream {
			continue
		}
		created := time.Unix(p.Event.Created, 0)
		if extra.Events == 0 || created.Before(extra.Oldest) {
			extra.Oldest = created
		}
		extra.Events++
	}
	m.Log.mu.Lock()
	defer m.Log.mu.Unlock()
	return m.Log.streamStatsLocked(stream, now, extra), nil
}
