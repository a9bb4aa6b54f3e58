package drivertest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// runStats checks a driver.StatsReader: the windows' counts by outcome, the day hour by hour, the
// rings' reuse, the latency histograms, the one-stream backlog, and exact totals under racing settlements.
func runStats(t *testing.T, newLog func(t *testing.T) driver.Log) {
	t.Run("Stats/Windows", func(t *testing.T) { testStatsWindows(t, newLog(t)) })
	t.Run("Stats/ConcurrentSettlementsAreExact", func(t *testing.T) { testStatsConcurrent(t, newLog(t)) })
}

// statsNow is the instant the stats checks read at: eight days and half a minute past the half hour
// after t0, so that an attempt a week and a day earlier lands in the hour slot one a day earlier
// reuses, and one 61 minutes earlier in the minute slot one a minute earlier reuses.
func statsNow() time.Time { return t0().Add(8*24*time.Hour + 30*time.Minute + 30*time.Second) }

// windowCounts is a WindowStats without its histogram, for comparing.
type windowCounts struct{ delivered, failed, abandoned int }

func countsOf(w driver.WindowStats) windowCounts {
	return windowCounts{w.Delivered, w.Failed, w.Abandoned}
}

// testStatsWindows: a known sequence of attempts at chosen times, read back per window, after the
// windows moved on, for another stream and for an unknown one; with the one-stream backlog.
func testStatsWindows(t *testing.T, l driver.Log) {
	ctx := context.Background()
	sr := l.(driver.StatsReader)
	now := statsNow()

	zero, err := sr.StreamStats(ctx, "we_a", now)
	check.NoError(t, err)
	check.Equal(t, driver.StreamStats{}, zero, "an empty log: zero statistics")

	appendN(t, l, "we_a", 9, func(i int) time.Time { return t0().Add(time.Duration(i) * time.Second) })
	appendN(t, l, "we_b", 1, at(time.Hour)) // due after all of we_a's
	numberAll(t, l)

	never := now.Add(1000 * time.Hour) // a retry that never comes in this test
	type attempt struct {
		at      time.Time
		outcome driver.Outcome
		latency time.Duration
	}
	// Each attempt settles the next event of we_a, in this order (the history's order).
	attempts := []attempt{
		{now.Add(-8 * 24 * time.Hour), driver.OutcomeDelivered, 5 * time.Millisecond}, // no window; its hour slot is reused by the next
		{now.Add(-24 * time.Hour), driver.OutcomeFailed, 100 * time.Millisecond},      // Week only: its hour started 24h30m before now
		{now.Add(-2 * time.Hour), driver.OutcomeAbandoned, 10 * time.Second},          // Day and Week
		{now.Add(-61 * time.Minute), driver.OutcomeDelivered, 7 * time.Millisecond},   // Day and Week; its minute slot is reused at -60s
		{now.Add(-30 * time.Minute), driver.OutcomeDelivered, 20 * time.Millisecond},  // every window
		{now.Add(-60 * time.Second), driver.OutcomeFailed, 2 * time.Millisecond},      // every window
		{now, driver.OutcomeDelivered, 3 * time.Millisecond},                          // every window
	}
	for i, a := range attempts {
		d := claimOne(t, l, now, time.Minute)
		check.Equal(t, "we_a", d.Stream)
		check.Equal(t, uint64(i+1), d.Sequence, "attempt %d claims event %d", i, i+1)
		rec := driver.Attempt{At: a.at, Latency: a.latency}
		switch a.outcome {
		case driver.OutcomeDelivered:
			rec.StatusCode = 204
			check.NoError(t, l.Delivered(ctx, d.Lease, rec))
		case driver.OutcomeFailed:
			rec.StatusCode, rec.Class, rec.Reason, rec.RetryAt = 503, producer.ClassStatus, "status 503", never
			check.NoError(t, l.Failed(ctx, d.Lease, rec))
		case driver.OutcomeAbandoned:
			rec.StatusCode, rec.Class, rec.Reason = 410, producer.ClassStatus, "status 410"
			check.NoError(t, l.Failed(ctx, d.Lease, rec))
		}
	}
	// we_b: one delivery slower than the histogram's last bound. A claim that loses its lease and a
	// release count nothing.
	claimB := func() driver.Delivery {
		t.Helper()
		ds, err := l.Claim(ctx, driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 1, Skip: []string{"we_a"}})
		check.NoError(t, err)
		check.Len(t, ds, 1)
		return ds[0]
	}
	b := claimB()
	check.NoError(t, l.Release(ctx, b.Lease, now))
	stale := b.Lease
	b = claimB()
	check.ErrorIs(t, l.Delivered(ctx, stale, driver.Attempt{At: now, Latency: time.Millisecond}), driver.ErrLeaseLost)
	check.NoError(t, l.Delivered(ctx, b.Lease, driver.Attempt{At: now, Latency: time.Minute, StatusCode: 200}))

	got, err := sr.StreamStats(ctx, "we_a", now)
	check.NoError(t, err)
	check.Equal(t, windowCounts{2, 1, 0}, countsOf(got.Hour), "Hour: the last 60 one-minute buckets")
	check.Equal(t, windowCounts{3, 1, 1}, countsOf(got.Day), "Day: the last 24 one-hour buckets")
	check.Equal(t, windowCounts{3, 2, 1}, countsOf(got.Week), "Week: the last 168 one-hour buckets, the reused slot reset")
	check.Equal(t, int64(3), got.Hour.Latency.Count(), "Hour latencies")
	check.Equal(t, int64(5), got.Day.Latency.Count(), "Day latencies")
	check.Equal(t, int64(6), got.Week.Latency.Count(), "Week latencies")
	// Now is 30 min 30 s into its hour: the attempt 2 h back is in the hour two before, the one
	// 61 min back in the hour before, the last three in now's.
	checkHourly(t, got, map[int]windowCounts{21: {0, 0, 1}, 22: {1, 0, 0}, 23: {2, 1, 0}}, "Hourly")
	check.Equal(t, int64(3), got.Hourly[23].Latency.Count(), "Hourly[23] latencies")
	inBucket := func(q time.Duration, want time.Duration, what string) {
		t.Helper()
		// The quantile is the upper bound of want's bucket: at or above want, within 19 %, and in
		// want's bucket when taken a microsecond lower.
		check.True(t, q >= want && float64(q) <= 1.19*float64(want) && driver.LatencyBucket(q-time.Microsecond) == driver.LatencyBucket(want),
			"%s: got %v, want the upper bound of %v's bucket", what, q, want)
	}
	inBucket(got.Hour.Latency.Quantile(0.5), 3*time.Millisecond, "Hour p50 of 2, 3 and 20 ms")
	inBucket(got.Hour.Latency.Quantile(0.99), 20*time.Millisecond, "Hour p99 of 2, 3 and 20 ms")
	inBucket(got.Week.Latency.Quantile(0.99), 10*time.Second, "Week p99")
	inBucket(got.Week.Latency.Quantile(0), 2*time.Millisecond, "Week p0")
	check.Equal(t, 0.5, got.Week.SuccessRate(), "Week success rate: 3 of 6")

	// Undelivered: event 2 and 6 (failed, retrying later), 8 and 9 (never claimed).
	check.Equal(t, 4, got.Backlog, "we_a backlog")
	check.Instant(t, t0().Add(time.Second), got.Oldest, "we_a oldest undelivered")
	wantBacklog, wantOldest := 4, t0().Add(time.Second)
	if sq, ok := l.(driver.Sequencing); ok {
		// Appended and not numbered yet: undelivered all the same, and the stream's alone.
		_, err := sq.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: ev("order.created", t0().Add(-time.Minute), `{}`)})
		check.NoError(t, err)
		_, err = sq.Append(ctx, driver.StreamEvent{Stream: "we_c", Event: ev("order.created", t0().Add(time.Hour), `{}`)})
		check.NoError(t, err)
		wantBacklog, wantOldest = 5, t0().Add(-time.Minute)
		c, err := sr.StreamStats(ctx, "we_c", now)
		check.NoError(t, err)
		check.Equal(t, 1, c.Backlog, "we_c: its one unnumbered event")
		check.Instant(t, t0().Add(time.Hour), c.Oldest, "we_c: oldest undelivered")
		check.Equal(t, driver.WindowStats{}, c.Week, "we_c: no attempt")
	}
	got, err = sr.StreamStats(ctx, "we_a", now)
	check.NoError(t, err)
	check.Equal(t, wantBacklog, got.Backlog, "we_a backlog")
	check.Instant(t, wantOldest, got.Oldest, "we_a oldest undelivered")

	bs, err := sr.StreamStats(ctx, "we_b", now)
	check.NoError(t, err)
	check.Equal(t, windowCounts{1, 0, 0}, countsOf(bs.Hour), "we_b Hour: the lost lease and the release count nothing")
	check.Equal(t, 0, bs.Backlog, "we_b has nothing to deliver")
	check.Instant(t, time.Time{}, bs.Oldest, "we_b oldest undelivered: none")
	check.True(t, bs.Hour.Latency.Quantile(0.5) >= 46*time.Second, "a minute's latency is in the last bucket: got p50 %v", bs.Hour.Latency.Quantile(0.5))

	none, err := sr.StreamStats(ctx, "we_none", now)
	check.NoError(t, err)
	check.Equal(t, driver.StreamStats{}, none, "an unknown stream: zero statistics")

	// The windows move on: an hour later the minutes are empty and the hours still count; a week
	// later nothing counts. Before the attempts, an attempt after now is not counted.
	later, err := sr.StreamStats(ctx, "we_a", now.Add(time.Hour))
	check.NoError(t, err)
	check.Equal(t, windowCounts{}, countsOf(later.Hour), "Hour, an hour later")
	check.Equal(t, windowCounts{3, 1, 1}, countsOf(later.Day), "Day, an hour later")
	check.Equal(t, windowCounts{3, 2, 1}, countsOf(later.Week), "Week, an hour later")
	checkHourly(t, later, map[int]windowCounts{20: {0, 0, 1}, 21: {1, 0, 0}, 22: {2, 1, 0}}, "Hourly, an hour later")
	later, err = sr.StreamStats(ctx, "we_a", now.Add(23*time.Hour))
	check.NoError(t, err)
	check.Equal(t, windowCounts{2, 1, 0}, countsOf(later.Day), "Day, 23 hours later: the attempts of now's hour")
	checkHourly(t, later, map[int]windowCounts{0: {2, 1, 0}}, "Hourly, 23 hours later: now's hour the oldest")
	later, err = sr.StreamStats(ctx, "we_a", now.Add(24*time.Hour))
	check.NoError(t, err)
	checkHourly(t, later, nil, "Hourly, 24 hours later")
	later, err = sr.StreamStats(ctx, "we_a", now.Add(7*24*time.Hour))
	check.NoError(t, err)
	check.Equal(t, windowCounts{}, countsOf(later.Week), "Week, a week later")
	check.Equal(t, int64(0), later.Week.Latency.Count(), "Week latencies, a week later")
	earlier, err := sr.StreamStats(ctx, "we_a", now.Add(-45*time.Second))
	check.NoError(t, err)
	check.Equal(t, windowCounts{1, 1, 0}, countsOf(earlier.Hour), "Hour, 45 s before now: the attempt at now is in the future")

	// Retention removes events and their attempts, not the statistics.
	for {
		n, err := l.Cleanup(ctx, now, 100)
		check.NoError(t, err)
		if n == 0 {
			break
		}
	}
	bs, err = sr.StreamStats(ctx, "we_b", now)
	check.NoError(t, err)
	check.Equal(t, windowCounts{1, 0, 0}, countsOf(bs.Hour), "we_b Hour after retention")
	got, err = sr.StreamStats(ctx, "we_a", now)
	check.NoError(t, err)
	check.Equal(t, windowCounts{3, 2, 1}, countsOf(got.Week), "we_a Week after retention")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = sr.StreamStats(cctx, "we_a", now)
	check.True(t, err != nil, "a cancelled context fails")
}

// checkHourly checks the counts of each of st.Hourly's buckets — want's by index, zero elsewhere —
// and that they add up to st.Day.
func checkHourly(t *testing.T, st driver.StreamStats, want map[int]windowCounts, what string) {
	t.Helper()
	var sum driver.WindowStats
	for i, w := range st.Hourly {
		check.Equal(t, want[i], countsOf(w), "%s[%d]", what, i)
		sum.Add(w)
	}
	check.Equal(t, st.Day, sum, "%s: the hours add up to Day", what)
}

// testStatsConcurrent: racing claimers settle (through Settle when the log has it) deliveries of
// several streams at the same moment, some failing and retrying at once, some abandoned; every
// stream's statistics count every attempt exactly once.
func testStatsConcurrent(t *testing.T, l driver.Log) {
	ctx := context.Background()
	sr := l.(driver.StatsReader)
	now := statsNow()
	const streams, per, racers = 4, 30, 8
	for s := range streams {
		appendN(t, l, fmt.Sprintf("we_%d", s), per, at(0))
	}
	numberAll(t, l)
	settler, batch := l.(driver.Settler)
	var (
		settled atomic.Int64 // deliveries settled for good
		wg      sync.WaitGroup
		errs    = make(chan error, racers)
	)
	for range racers {
		wg.Go(func() {
			for idle := 0; settled.Load() < streams*per; {
				ds, err := l.Claim(ctx, driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Hour), Limit: 3, PerStream: 1})
				if err != nil {
					errs <- err
					return
				}
				if len(ds) == 0 {
					if idle++; idle > 1_000_000 {
						errs <- fmt.Errorf("no delivery claimable, %d settled", settled.Load())
						return
					}
					runtime.Gosched()
					continue
				}
				ss := make([]driver.Settlement, len(ds))
				final := 0
				for i, d := range ds {
					a := driver.Attempt{At: now, Latency: time.Duration(d.Sequence) * time.Millisecond}
					switch {
					case d.Sequence%5 == 0: // abandoned
						a.Reason = "status 410"
					case d.Sequence%5 == 1 && d.Attempts == 0: // failed, due again at once
						a.Reason, a.RetryAt = "status 503", now
						final--
					default:
						ss[i].Delivered = true
					}
					ss[i].Lease, ss[i].Attempt = d.Lease, a
					final++
				}
				var results []error
				if batch {
					results = settler.Settle(ctx, ss)
				} else {
					for _, s := range ss {
						if s.Delivered {
							results = append(results, l.Delivered(ctx, s.Lease, s.Attempt))
						} else {
							results = append(results, l.Failed(ctx, s.Lease, s.Attempt))
						}
					}
				}
				for _, err := range results {
					if err != nil {
						errs <- err
						return
					}
				}
				settled.Add(int64(final))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		check.NoError(t, err)
	}
	// Per stream of 30: 6 abandoned (5, 10, …), 6 failed once then delivered (1, 6, …), 18 delivered
	// at once.
	want := windowCounts{delivered: 24, failed: 6, abandoned: 6}
	for s := range streams {
		stream := fmt.Sprintf("we_%d", s)
		got, err := sr.StreamStats(ctx, stream, now)
		check.NoError(t, err)
		for name, w := range map[string]driver.WindowStats{"Hour": got.Hour, "Day": got.Day, "Week": got.Week, "Hourly[23]": got.Hourly[23]} {
			check.Equal(t, want, countsOf(w), "%s %s", stream, name)
			check.Equal(t, int64(36), w.Latency.Count(), "%s %s latencies", stream, name)
		}
		var wantHist driver.LatencyHistogram
		for seq := 1; seq <= per; seq++ {
			wantHist.Add(time.Duration(seq) * time.Millisecond)
			if seq%5 == 1 { // failed once first
				wantHist.Add(time.Duration(seq) * time.Millisecond)
			}
		}
		check.Equal(t, wantHist, got.Hour.Latency, "%s Hour latency histogram", stream)
		check.Equal(t, 0, got.Backlog, "%s backlog", stream)
	}
}
