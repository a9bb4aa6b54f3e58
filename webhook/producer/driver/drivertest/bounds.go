package drivertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// QuotaRacers append at once to one stream in RunStreamQuota's race, QuotaPerRacer events each.
const (
	QuotaRacers   = 8
	QuotaPerRacer = 20
)

// RunStreamQuota checks a log's bound on the events of one stream (memstore.Log.MaxStreamEvents,
// pgstore.EventLogOptions.MaxStreamEvents). newLog must return an empty log that keeps at most max
// events per stream. overshoot is how many events past max racing appenders may store (0 for a log
// that checks and appends under one lock); the race runs QuotaRacers appenders.
//
// It checks: an append past the bound fails with ErrStreamFull and appends nothing, other streams
// are untouched; events appended and not yet numbered (a Sequencing log) count; a batch that would
// take one of its streams past the bound appends none of its events; Cleanup frees room, and the
// stream's numbers go on without reuse; and racing appenders store every event they were told was
// appended, none they were refused, and at most max+overshoot in all.
func RunStreamQuota(t *testing.T, newLog func(t *testing.T, max int) driver.Log, overshoot int) {
	t.Run("AppendPastTheBoundIsRefused", func(t *testing.T) { testQuotaAppend(t, newLog(t, 5)) })
	if _, ok := newLog(t, 5).(driver.BatchAppender); ok {
		t.Run("BatchPastTheBoundAppendsNothing", func(t *testing.T) { testQuotaBatch(t, newLog(t, 5)) })
	}
	t.Run("CleanupFreesRoom", func(t *testing.T) { testQuotaCleanup(t, newLog(t, 5)) })
	t.Run("RacingAppenders", func(t *testing.T) { testQuotaRace(t, newLog(t, 50), 50, overshoot) })
}

func appendOne(l driver.Log, stream string, created time.Time) error {
	_, err := l.Append(context.Background(), driver.StreamEvent{Stream: stream, Event: ev("order.created", created, `{}`)})
	return err
}

func testQuotaAppend(t *testing.T, l driver.Log) {
	for i := range 3 {
		check.NoError(t, appendOne(l, "we_a", t0()), "append %d", i+1)
	}
	numberAll(t, l)
	for i := 3; i < 5; i++ { // unnumbered ones count too, on a Sequencing log
		check.NoError(t, appendOne(l, "we_a", t0()), "append %d", i+1)
	}
	err := appendOne(l, "we_a", t0())
	check.ErrorIs(t, err, producer.ErrStreamFull, "the sixth event of a stream that keeps five")
	check.True(t, strings.HasPrefix(err.Error(), "producer: ") || strings.Contains(err.Error(), ": producer: "),
		"the error %q says where it comes from", err)
	numberAll(t, l)
	check.ErrorIs(t, appendOne(l, "we_a", t0()), producer.ErrStreamFull, "still full once numbered")
	check.Equal(t, span(1, 5), seqs(rangeAll(t, l, "we_a"), evSeq), "a refused append appends nothing")
	for i := range 5 {
		check.NoError(t, appendOne(l, "we_b", t0()), "another stream has its own room: append %d", i+1)
	}
}

func testQuotaBatch(t *testing.T, l driver.Log) {
	ba := l.(driver.BatchAppender)
	for range 4 {
		check.NoError(t, appendOne(l, "we_a", t0()))
	}
	batch := func(streams ...string) []driver.StreamEvent {
		out := make([]driver.StreamEvent, len(streams))
		for i, s := range streams {
			out[i] = driver.StreamEvent{Stream: s, Event: ev("order.created", t0(), `{}`)}
		}
		return out
	}
	_, err := ba.AppendBatch(context.Background(), batch("we_b", "we_a", "we_a"))
	check.ErrorIs(t, err, producer.ErrStreamFull, "two more events on a stream with room for one")
	numberAll(t, l)
	check.Len(t, rangeAll(t, l, "we_a"), 4, "a refused batch appends nothing")
	check.Len(t, rangeAll(t, l, "we_b"), 0, "a refused batch appends nothing, on its other streams neither")
	_, err = ba.AppendBatch(context.Background(), batch("we_b", "we_a", "we_b"))
	check.NoError(t, err, "a batch that fits")
	numberAll(t, l)
	check.Len(t, rangeAll(t, l, "we_a"), 5)
	check.Len(t, rangeAll(t, l, "we_b"), 2)
}

func testQuotaCleanup(t *testing.T, l driver.Log) {
	ctx := context.Background()
	for i := range 5 {
		check.NoError(t, appendOne(l, "we_a", t0().Add(time.Duration(i)*time.Second)))
	}
	numberAll(t, l)
	check.ErrorIs(t, appendOne(l, "we_a", t0()), producer.ErrStreamFull)
	n, err := l.Cleanup(ctx, t0().Add(2*time.Second), 100)
	check.NoError(t, err)
	check.Equal(t, 2, n)
	check.NoError(t, appendOne(l, "we_a", t0().Add(time.Hour)), "retention freed room")
	check.NoError(t, appendOne(l, "we_a", t0().Add(time.Hour)))
	check.ErrorIs(t, appendOne(l, "we_a", t0().Add(time.Hour)), producer.ErrStreamFull, "as much room as retention freed")
	numberAll(t, l)
	check.Equal(t, span(3, 7), seqs(rangeAll(t, l, "we_a"), evSeq), "numbers go on after retention")
}

func testQuotaRace(t *testing.T, l driver.Log, max, overshoot int) {
	var (
		mu      sync.Mutex
		ok      int
		refused int
		wg      sync.WaitGroup
	)
	for range QuotaRacers {
		wg.Go(func() {
			for range QuotaPerRacer {
				err := appendOne(l, "we_a", t0())
				mu.Lock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, producer.ErrStreamFull):
					refused++
				default:
					t.Errorf("append: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	numberAll(t, l)
	stored := len(rangeAll(t, l, "we_a"))
	check.Equal(t, ok, stored, "every append that succeeded is stored, and no refused one")
	check.Equal(t, QuotaRacers*QuotaPerRacer, ok+refused)
	check.True(t, stored >= max, "refused before the stream was full: %d stored of %d", stored, max)
	check.True(t, stored <= max+overshoot, "%d stored, past the bound of %d by more than %d", stored, max, overshoot)
}

// testRangeBytes checks a ByteRanger: a page ends before its data would pass the budget, holds at
// least one event whatever its size, and says that more follow.
func testRangeBytes(t *testing.T, l driver.Log) {
	ctx := context.Background()
	br := l.(driver.ByteRanger)
	sizes := []int{100, 100, 100, 1000, 100, 100}
	for i, n := range sizes {
		data := fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", n-len(fmt.Sprintf(`{"n":%d,"pad":""}`, i))))
		_, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: ev("order.created", t0(), data)})
		check.NoError(t, err)
	}
	numberAll(t, l)
	for _, tc := range []struct {
		name           string
		from, to       uint64
		limit, budget  int
		want           []uint64
		more           bool
		wantDataLength int
	}{
		{"the budget ends the page", 1, math.MaxUint64, 10, 250, span(1, 2), true, 200},
		{"an exact fit", 1, math.MaxUint64, 10, 300, span(1, 3), true, 300},
		{"one event over the budget comes alone", 4, math.MaxUint64, 10, 250, []uint64{4}, true, 1000},
		{"the limit before the budget", 1, math.MaxUint64, 2, 1 << 20, span(1, 2), true, 200},
		{"everything fits", 1, math.MaxUint64, 10, 1 << 20, span(1, 6), false, 1500},
		{"the end of the range, not of the stream", 5, 6, 10, 200, span(5, 6), false, 200},
		{"the budget ends a page at the range's end", 5, 6, 10, 150, []uint64{5}, true, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, more, err := br.RangeBytes(ctx, "we_a", tc.from, tc.to, tc.limit, tc.budget)
			check.NoError(t, err)
			check.Equal(t, tc.want, seqs(got, evSeq))
			check.Equal(t, tc.more, more, "has_more")
			n := 0
			for _, e := range got {
				n += len(e.Data)
			}
			check.Equal(t, tc.wantDataLength, n, "data bytes")
		})
	}
	got, more, err := br.RangeBytes(ctx, "we_nope", 1, 2, 10, 100)
	check.NoError(t, err)
	check.True(t, len(got) == 0 && !more, "an unknown stream is empty")
}
