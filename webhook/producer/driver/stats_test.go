package driver_test

import (
	"math"
	"testing"
	"time"

	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

func TestLatencyBucket(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    time.Duration
		want int
	}{
		{"negative", -time.Second, 0},
		{"zero", 0, 0},
		{"just below 1 ms", time.Millisecond - time.Nanosecond, 0},
		{"1 ms", time.Millisecond, 1},
		{"below 2^(1/4) ms", 1188 * time.Microsecond, 1},
		{"2^(1/4) ms, rounded", 1189 * time.Microsecond, 2},
		{"2 ms", 2 * time.Millisecond, 5},
		{"just below 2 ms", 1999 * time.Microsecond, 4},
		{"10 s (the default timeout)", 10 * time.Second, 54},
		{"just below the last bound", 46340949 * time.Microsecond, 62},
		{"the last bound", 46340950 * time.Microsecond, 63},
		{"an hour", time.Hour, 63},
		{"the longest duration", math.MaxInt64, 63},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check.Equal(t, tc.want, driver.LatencyBucket(tc.d))
		})
	}
	// Every bucket is 2^(1/4) times as wide as the one before: the bounds rise by that ratio.
	prev := driver.LatencyBucket(time.Millisecond)
	for us := int64(1000); us < 46_400_000; us = us*1001/1000 + 1 {
		b := driver.LatencyBucket(time.Duration(us) * time.Microsecond)
		check.True(t, b == prev || b == prev+1, "%d µs: bucket %d after %d", us, b, prev)
		lo := 1000 * math.Exp2(float64(b-1)/4)
		check.True(t, float64(us) >= math.Round(lo) && (b == 63 || float64(us) < math.Round(lo*math.Exp2(0.25))),
			"%d µs in bucket %d, which spans [%.0f, %.0f) µs", us, b, lo, lo*math.Exp2(0.25))
		prev = b
	}
}

func TestLatencyHistogram(t *testing.T) {
	var h driver.LatencyHistogram
	check.Equal(t, int64(0), h.Count())
	check.Equal(t, time.Duration(0), h.Quantile(0.5), "an empty histogram")
	for _, ms := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 100} {
		h.Add(time.Duration(ms) * time.Millisecond)
	}
	check.Equal(t, int64(10), h.Count())
	for _, tc := range []struct {
		q    float64
		want time.Duration // the true quantile: the answer is its bucket's upper bound
	}{
		{0, time.Millisecond}, {-1, time.Millisecond}, {0.1, time.Millisecond}, {0.5, 5 * time.Millisecond},
		{0.9, 9 * time.Millisecond}, {0.91, 100 * time.Millisecond}, {1, 100 * time.Millisecond},
		{2, 100 * time.Millisecond}, {math.NaN(), 100 * time.Millisecond},
	} {
		got := h.Quantile(tc.q)
		check.True(t, got > tc.want && float64(got) <= 1.19*float64(tc.want)+1000 &&
			driver.LatencyBucket(got-time.Microsecond) == driver.LatencyBucket(tc.want),
			"Quantile(%v) = %v: want the upper bound of %v's bucket", tc.q, got, tc.want)
	}

	var slow driver.LatencyHistogram
	slow.Add(time.Minute)
	check.Equal(t, 46340950*time.Microsecond, slow.Quantile(0.5), "the last bucket answers its lower bound")

	var both driver.LatencyHistogram
	both.Merge(h)
	both.Merge(slow)
	check.Equal(t, int64(11), both.Count())
	check.Equal(t, h[1]+slow[1], both[1])
	check.Equal(t, int64(1), both[63])
}

func TestStreamStatsAddBucket(t *testing.T) {
	now := time.Unix(1767225600+30*60+30, 0) // half past midnight and 30 s
	w := driver.WindowStats{Delivered: 1}
	for _, tc := range []struct {
		name            string
		start           time.Time
		span            time.Duration
		hour, day, week int
	}{
		{"the current minute", now.Truncate(time.Minute), time.Minute, 1, 0, 0},
		{"59 minutes back", now.Truncate(time.Minute).Add(-59 * time.Minute), time.Minute, 1, 0, 0},
		{"60 minutes back", now.Truncate(time.Minute).Add(-60 * time.Minute), time.Minute, 0, 0, 0},
		{"a minute ahead", now.Truncate(time.Minute).Add(time.Minute), time.Minute, 0, 0, 0},
		{"the current hour", now.Truncate(time.Hour), time.Hour, 0, 1, 1},
		{"23 hours back", now.Truncate(time.Hour).Add(-23 * time.Hour), time.Hour, 0, 1, 1},
		{"24 hours back", now.Truncate(time.Hour).Add(-24 * time.Hour), time.Hour, 0, 0, 1},
		{"167 hours back", now.Truncate(time.Hour).Add(-167 * time.Hour), time.Hour, 0, 0, 1},
		{"168 hours back", now.Truncate(time.Hour).Add(-168 * time.Hour), time.Hour, 0, 0, 0},
		{"an hour ahead", now.Truncate(time.Hour).Add(time.Hour), time.Hour, 0, 0, 0},
		{"another span", now.Truncate(time.Hour), time.Second, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s driver.StreamStats
			s.AddBucket(now, tc.start, tc.span, w)
			check.Equal(t, []int{tc.hour, tc.day, tc.week}, []int{s.Hour.Delivered, s.Day.Delivered, s.Week.Delivered})
		})
	}
}

// TestStreamStatsHourly: an hour's bucket lands in Hourly at 23 minus its hours back from now's
// hour, at the window's edges too, and the 24 add up to Day.
func TestStreamStatsHourly(t *testing.T) {
	midnight := time.Unix(1767225600, 0) // 2026-01-01T00:00:00Z, an hour's start
	for _, tc := range []struct {
		name  string
		now   time.Time
		back  int // the bucket starts this many hours before now's hour
		index int // -1: in no hour
	}{
		{"the current hour, now at its start", midnight, 0, 23},
		{"the current hour, now at its last instant", midnight.Add(time.Hour - time.Nanosecond), 0, 23},
		{"the hour before", midnight.Add(30 * time.Minute), 1, 22},
		{"23 hours back, now at the hour's start", midnight, 23, 0},
		{"23 hours back, now at the hour's last instant", midnight.Add(time.Hour - time.Nanosecond), 23, 0},
		{"24 hours back, now at the hour's start", midnight, 24, -1},
		{"24 hours back, now at the hour's last instant", midnight.Add(time.Hour - time.Nanosecond), 24, -1},
		{"the next hour", midnight.Add(time.Hour - time.Nanosecond), -1, -1},
		{"before 1970", time.Unix(-3600*5-1, 0), 3, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := tc.now.Truncate(time.Hour).Add(-time.Duration(tc.back) * time.Hour)
			var s driver.StreamStats
			s.AddBucket(tc.now, start, time.Hour, driver.WindowStats{Delivered: 1, Failed: 2})
			var want [24]driver.WindowStats
			if tc.index >= 0 {
				want[tc.index] = driver.WindowStats{Delivered: 1, Failed: 2}
			}
			check.Equal(t, want, s.Hourly)
			var sum driver.WindowStats
			for _, w := range s.Hourly {
				sum.Add(w)
			}
			check.Equal(t, s.Day, sum, "the hours add up to Day")
		})
	}

	// A minute's bucket counts in Hour, never in an hour of Hourly.
	var s driver.StreamStats
	s.AddBucket(midnight, midnight, time.Minute, driver.WindowStats{Delivered: 1})
	check.Equal(t, [24]driver.WindowStats{}, s.Hourly, "a minute's bucket")

	// A day of buckets, each hour its own count, read half-way through the last: oldest first.
	now := midnight.Add(90 * time.Minute)
	s = driver.StreamStats{}
	for back := range 30 {
		s.AddBucket(now, now.Truncate(time.Hour).Add(-time.Duration(back)*time.Hour), time.Hour, driver.WindowStats{Delivered: back})
	}
	for i, w := range s.Hourly {
		check.Equal(t, 23-i, w.Delivered, "Hourly[%d]", i)
	}
	check.Equal(t, 23*24/2, s.Day.Delivered)
}

func TestWindowStatsRate(t *testing.T) {
	check.Equal(t, 0.0, driver.WindowStats{}.SuccessRate(), "no attempts")
	w := driver.WindowStats{Delivered: 3, Failed: 1}
	w.Add(driver.WindowStats{Abandoned: 4})
	check.Equal(t, 8, w.Attempts())
	check.Equal(t, 0.375, w.SuccessRate())
}
