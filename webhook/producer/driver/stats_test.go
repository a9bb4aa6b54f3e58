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

func TestWindowStatsRate(t *testing.T) {
	check.Equal(t, 0.0, driver.WindowStats{}.SuccessRate(), "no attempts")
	w := driver.WindowStats{Delivered: 3, Failed: 1}
	w.Add(driver.WindowStats{Abandoned: 4})
	check.Equal(t, 8, w.Attempts())
	check.Equal(t, 0.375, w.SuccessRate())
}
