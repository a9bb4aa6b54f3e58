package driver

import (
	"context"
	"math"
	"sort"
	"time"
)

// StatsReader is implemented by Logs that keep running aggregates of their delivery history, so
// that an endpoint's delivery statistics cost the same to read whatever the history holds. The
// producer's stats handler (GET /v1/webhook_endpoints/{id}/stats) reads through it.
//
// What it promises:
//
//   - Every attempt recorded in the history — by Delivered, Failed, Settle, or any other way a Log
//     records one — is counted, by its Outcome, in the bucket that holds its At: a one-minute
//     bucket and a one-hour bucket. Nothing else is counted: a Release, a settlement whose lease
//     was lost.
//   - Hour counts the one-minute buckets whose start is after now−1h and not after now: the current
//     minute and the 59 before it (between 59 and 60 minutes of history). Day and Week count the
//     one-hour buckets whose start is after now−24h (now−168h) and not after now: the current hour
//     and the 23 (167) before it. Buckets are aligned on the Unix epoch, in UTC. An attempt whose
//     At is after now, or older than the window, is not in it.
//   - Hourly splits Day by its buckets, oldest first: Hourly[23−k] counts the one-hour bucket
//     whose start is k hours before the start of the hour that holds now (0 ≤ k ≤ 23), so
//     Hourly[23] is the current hour, Hourly[0] the hour that started 23 hours before it, and the
//     24 add up to Day.
//   - Storage is a ring of 60 minute buckets and one of 168 hour buckets per stream: a bucket is
//     reused, and reset, when its slot comes round again, so the aggregates of a stream never grow
//     and a read costs the same however many attempts were made. An attempt recorded after its
//     slot was reused for a later bucket (one more than a ring's length late) is not counted.
//   - Cleanup leaves the aggregates alone: they are not the history, and they age out of the
//     windows by themselves.
//   - Backlog and Oldest are driver.Backlogger's, for one stream, at a cost bounded by that
//     stream's undelivered events, not by other streams'.
//   - An unknown stream, or one with nothing in a window, has zero statistics, not an error.
//   - No method reads the clock: now is passed in.
type StatsReader interface {
	// StreamStats returns the delivery statistics of stream as of now.
	StreamStats(ctx context.Context, stream string, now time.Time) (StreamStats, error)
}

// StreamStats is one stream's delivery statistics, as StatsReader returns them. It is a plain
// value; the zero value is a stream with no attempts and nothing to deliver.
type StreamStats struct {
	// Hour, Day and Week count the attempts of the last hour, day and week (StatsReader says
	// exactly which buckets each counts).
	Hour, Day, Week WindowStats
	// Hourly is Day hour by hour, oldest first: the 24 one-hour buckets whose start is after
	// now−24h and not after now, aligned on the Unix epoch in UTC. Hourly[23] is the bucket that
	// holds now, which starts at now.Truncate(time.Hour); Hourly[i] starts 23−i hours before it.
	// An hour without attempts is a zero WindowStats.
	Hourly [24]WindowStats
	// Backlog counts the stream's undelivered events: pending, whether due now, waiting for a
	// retry, or not yet numbered by a Sequencing log.
	Backlog int
	// Oldest is the creation time of the oldest undelivered event (Event.Created, to the second);
	// zero when Backlog is 0.
	Oldest time.Time
}

// AddBucket adds w, the counts of one bucket of the history — span long (time.Minute or
// time.Hour: other spans count nowhere) and starting at start — to the windows that count it as of
// now (StatsReader says which), and an hour's bucket of the last day to its place in Hourly. start
// is a multiple of span since the Unix epoch, as the StatsReader's buckets are. A StatsReader
// builds its StreamStats with it, bucket by bucket, so that every Log draws the windows' edges
// alike.
func (s *StreamStats) AddBucket(now, start time.Time, span time.Duration, w WindowStats) {
	if start.After(now) {
		return
	}
	age := now.Sub(start)
	switch span {
	case time.Minute:
		if age < time.Hour {
			s.Hour.Add(w)
		}
	case time.Hour:
		if age < 24*time.Hour {
			s.Day.Add(w)
			// Hours back from now's: 0 to 23 for an aligned start, as start > now−24h. Truncate
			// counts from year 1, a whole number of hours before the epoch, so it aligns on the
			// epoch as the buckets do.
			k := int(now.Truncate(time.Hour).Sub(start.Truncate(time.Hour)) / time.Hour)
			if k >= 0 && k < len(s.Hourly) {
				s.Hourly[len(s.Hourly)-1-k].Add(w)
			}
		}
		if age < 168*time.Hour {
			s.Week.Add(w)
		}
	}
}

// WindowStats counts the recorded attempts of one window by outcome, with their latencies. It is a
// plain value; the zero value is a window without attempts.
type WindowStats struct {
	Delivered, Failed, Abandoned int
	// Latency holds the Attempt.Latency of every attempt counted, whatever its outcome.
	Latency LatencyHistogram
}

// Attempts is how many attempts the window counts.
func (w WindowStats) Attempts() int { return w.Delivered + w.Failed + w.Abandoned }

// SuccessRate is the share of the window's attempts that delivered, from 0 to 1; 0 without
// attempts.
func (w WindowStats) SuccessRate() float64 {
	if n := w.Attempts(); n > 0 {
		return float64(w.Delivered) / float64(n)
	}
	return 0
}

// Add adds o's counts to w's.
func (w *WindowStats) Add(o WindowStats) {
	w.Delivered += o.Delivered
	w.Failed += o.Failed
	w.Abandoned += o.Abandoned
	w.Latency.Merge(o.Latency)
}

// LatencyHistogram counts latencies in 64 fixed buckets on a logarithmic scale: bucket 0 holds
// those below 1 ms; bucket k (1 ≤ k ≤ 62) those from 1 ms·2^((k−1)/4) up to 1 ms·2^(k/4), each
// bound rounded to the microsecond, so that each bucket is 2^(1/4) ≈ 1.19 times as wide as the
// one before; bucket 63 everything from 46.34 s up (the Dispatcher's default timeout is 10 s).
// LatencyBucket says which bucket a latency falls in. Durations are counted to the microsecond,
// truncated. The zero value is an empty histogram; a LatencyHistogram is a plain value, not safe
// for concurrent writes.
type LatencyHistogram [64]int64

// latencyBound is the lower bound, in microseconds, of bucket k+1 of a LatencyHistogram (the upper
// bound of bucket k), for 0 ≤ k ≤ 62: 1 ms·2^(k/4), rounded. pgstore's stats bucket function holds
// the same bounds as literals, and its tests check that the two agree.
func latencyBound(k int) int64 { return int64(math.Round(1000 * math.Exp2(float64(k)/4))) }

// LatencyBucket returns the bucket of a LatencyHistogram that counts d: the number of bucket
// bounds at or below d, from 0 (below 1 ms) to 63 (46.34 s or more). Negative durations go to
// bucket 0.
func LatencyBucket(d time.Duration) int {
	us := d.Microseconds()
	return sort.Search(len(LatencyHistogram{})-1, func(k int) bool { return latencyBound(k) > us })
}

// Add counts one latency.
func (h *LatencyHistogram) Add(d time.Duration) { h[LatencyBucket(d)]++ }

// Merge adds o's counts to h's.
func (h *LatencyHistogram) Merge(o LatencyHistogram) {
	for i, n := range o {
		h[i] += n
	}
}

// Count is how many latencies the histogram counts.
func (h *LatencyHistogram) Count() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile returns an upper bound of the q-quantile (0 ≤ q ≤ 1; 0.5 for the median, 0.99 for p99)
// of the latencies counted: the upper bound of the bucket that holds it — at most 19 % above the
// true value (the buckets' width), never below it — or, when it lies in the last bucket, that
// bucket's lower bound, 46.34 s, which it is at least. q is clamped to [0, 1]; an empty histogram
// returns 0.
func (h *LatencyHistogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	if math.IsNaN(q) {
		q = 1
	}
	rank := max(int64(math.Ceil(q*float64(n))), 1) // the rank-th smallest latency, counted from 1
	var seen int64
	last := len(h) - 1
	for k := range last {
		if seen += h[k]; seen >= rank {
			return time.Duration(latencyBound(k)) * time.Microsecond
		}
	}
	return time.Duration(latencyBound(last-1)) * time.Microsecond
}
