package drivertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// SequencerRacers is how many goroutines call Sequence at once in the racing subtest, while Racers
// goroutines append PerRacer events each.
const SequencerRacers = 3

func runSequencing(t *testing.T, newLog func(t *testing.T) driver.Sequencing) {
	t.Run("Sequencing/UnnumberedEventsAreInvisible", func(t *testing.T) { testUnnumberedInvisible(t, newLog(t)) })
	t.Run("Sequencing/OldestFirstWithinLimit", func(t *testing.T) { testSequenceOrder(t, newLog(t)) })
	t.Run("Sequencing/RacingAppendersAndSequencers", func(t *testing.T) { testRacingSequencers(t, newLog(t)) })
	t.Run("Sequencing/NumbersContinueAfterRetention", func(t *testing.T) { testSequenceAfterRetention(t, newLog(t)) })
	t.Run("Sequencing/CancelledContext", func(t *testing.T) { testSequenceCancelled(t, newLog(t)) })
}

// appendRaw appends without numbering and returns the IDs, checking that Append left the sequence 0.
func appendRaw(t *testing.T, l driver.Log, stream string, n int, created time.Time) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		e, err := l.Append(context.Background(), driver.StreamEvent{Stream: stream, Event: ev("order.created", created, fmt.Sprintf(`{"n":%d}`, i))})
		check.NoError(t, err)
		check.Equal(t, 0, e.Sequence, "a Sequencing log's Append does not number")
		check.True(t, e.ID != "", "Append returned an event without an ID")
		ids[i] = e.ID
	}
	return ids
}

func rangeAll(t *testing.T, l driver.Log, stream string) []webhook.Event {
	t.Helper()
	var out []webhook.Event
	for from := uint64(1); ; {
		page, more, err := l.Range(context.Background(), stream, from, math.MaxUint64, producer.MaxRangeLimit)
		var pe *driver.PrunedError
		if errors.As(err, &pe) {
			from = pe.FirstRetained
			continue
		}
		check.NoError(t, err)
		out = append(out, page...)
		if !more {
			return out
		}
		from = page[len(page)-1].Sequence + 1
	}
}

func ids(evs []webhook.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func testUnnumberedInvisible(t *testing.T, l driver.Sequencing) {
	ctx := context.Background()
	a := appendRaw(t, l, "we_a", 3, t0())
	check.Len(t, rangeAll(t, l, "we_a"), 0, "Range does not see unnumbered events")
	got, err := l.Claim(ctx, req(t0().Add(time.Hour), t0().Add(2*time.Hour), 10))
	check.NoError(t, err)
	check.Len(t, got, 0, "Claim does not see them")
	_, err = l.Status(ctx, "we_a", 1)
	check.ErrorIs(t, err, driver.ErrNotFound, "Status does not see them")

	runs, err := l.Sequence(ctx, 10)
	check.NoError(t, err)
	check.Equal(t, []driver.SequencedRun{{Stream: "we_a", First: 1, IDs: a}}, runs)
	evs := rangeAll(t, l, "we_a")
	check.Equal(t, span(1, 3), seqs(evs, evSeq))
	check.Equal(t, a, ids(evs), "numbered in append order")
	got, err = l.Claim(ctx, req(t0().Add(time.Hour), t0().Add(2*time.Hour), 10))
	check.NoError(t, err)
	check.Equal(t, span(1, 3), seqs(got, dlSeq), "numbered events are due at their creation")

	runs, err = l.Sequence(ctx, 10)
	check.NoError(t, err)
	check.Len(t, runs, 0, "nothing left to number")
	runs, err = l.Sequence(ctx, 0)
	check.NoError(t, err)
	check.Len(t, runs, 0, "limit 0 numbers nothing")
}

func testSequenceOrder(t *testing.T, l driver.Sequencing) {
	ctx := context.Background()
	a1 := appendRaw(t, l, "we_a", 2, t0())
	b1 := appendRaw(t, l, "we_b", 1, t0())
	a2 := appendRaw(t, l, "we_a", 2, t0())
	b2 := appendRaw(t, l, "we_b", 2, t0())

	runs, err := l.Sequence(ctx, 4) // the four oldest: a1, b1 and the first of a2
	check.NoError(t, err)
	slices.SortFunc(runs, func(x, y driver.SequencedRun) int { return cmpString(x.Stream, y.Stream) })
	check.Equal(t, []driver.SequencedRun{
		{Stream: "we_a", First: 1, IDs: append(slices.Clone(a1), a2[0])},
		{Stream: "we_b", First: 1, IDs: b1},
	}, runs)

	runs, err = l.Sequence(ctx, 100)
	check.NoError(t, err)
	slices.SortFunc(runs, func(x, y driver.SequencedRun) int { return cmpString(x.Stream, y.Stream) })
	check.Equal(t, []driver.SequencedRun{
		{Stream: "we_a", First: 4, IDs: a2[1:]},
		{Stream: "we_b", First: 2, IDs: b2},
	}, runs, "the next call continues each stream's numbering")
	check.Equal(t, uint64(3), runs[1].Last())

	wantA := append(append([]string{}, a1...), a2...)
	check.Equal(t, wantA, ids(rangeAll(t, l, "we_a")))
	check.Equal(t, append(b1, b2...), ids(rangeAll(t, l, "we_b")))
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// testRacingSequencers appends from Racers goroutines (PerRacer each, over two streams) while
// SequencerRacers goroutines call Sequence with a small limit: every event is numbered exactly once
// (no call reports a number or an event another did), each stream holds exactly 1..n, and each
// appender's events keep the order it appended them in.
func testRacingSequencers(t *testing.T, l driver.Sequencing) {
	ctx := context.Background()
	var (
		mu       sync.Mutex
		byID     = map[string]uint64{}
		bySeq    = map[string]map[uint64]string{}
		appended = make([][]string, Racers)
	)
	record := func(runs []driver.SequencedRun) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range runs {
			if bySeq[r.Stream] == nil {
				bySeq[r.Stream] = map[uint64]string{}
			}
			for i, id := range r.IDs {
				seq := r.First + uint64(i)
				if prev, dup := byID[id]; dup {
					return fmt.Errorf("event %s numbered twice: %d and %d", id, prev, seq)
				}
				if prev, dup := bySeq[r.Stream][seq]; dup {
					return fmt.Errorf("%s #%d handed out twice: %s and %s", r.Stream, seq, prev, id)
				}
				byID[id], bySeq[r.Stream][seq] = seq, id
			}
		}
		return nil
	}
	var (
		sequencers, appenders sync.WaitGroup
		stop                  = make(chan struct{})
		errs                  = make(chan error, SequencerRacers+Racers)
	)
	for range SequencerRacers {
		sequencers.Go(func() {
			for {
				// Whether the appenders were done is read before the call: an empty answer then
				// means nothing is left. Read after it, an event appended in between would be missed.
				var done bool
				select {
				case <-stop:
					done = true
				default:
				}
				runs, err := l.Sequence(ctx, 50)
				if err == nil {
					err = record(runs)
				}
				if err != nil {
					errs <- err
					return
				}
				if done && len(runs) == 0 {
					return
				}
			}
		})
	}
	for g := range Racers {
		appenders.Go(func() {
			stream := fmt.Sprintf("we_%d", g%2)
			for i := range PerRacer {
				e, err := l.Append(ctx, driver.StreamEvent{Stream: stream, Event: ev("order.created", t0(), fmt.Sprintf(`{"g":%d,"i":%d}`, g, i))})
				if err != nil {
					errs <- err
					return
				}
				appended[g] = append(appended[g], e.ID)
			}
		})
	}
	appenders.Wait()
	close(stop)
	sequencers.Wait()
	close(errs)
	for err := range errs {
		check.NoError(t, err)
	}
	check.Equal(t, Racers*PerRacer, len(byID), "events numbered: want every one")
	for g, evIDs := range appended {
		got := make([]uint64, len(evIDs))
		for i, id := range evIDs {
			got[i] = byID[id]
		}
		check.True(t, slices.IsSorted(got), "appender %d's events were numbered out of its order", g)
	}
	for _, stream := range []string{"we_0", "we_1"} {
		evs := rangeAll(t, l, stream)
		check.Equal(t, span(1, Racers/2*PerRacer), seqs(evs, evSeq), "%s holds exactly 1..n", stream)
		for _, e := range evs {
			check.Equal(t, bySeq[stream][e.Sequence], e.ID, "%s #%d is the event Sequence reported", stream, e.Sequence)
		}
	}
}

func testSequenceAfterRetention(t *testing.T, l driver.Sequencing) {
	ctx := context.Background()
	appendRaw(t, l, "we_a", 3, t0())
	_, err := l.Sequence(ctx, 10)
	check.NoError(t, err)
	late := appendRaw(t, l, "we_a", 2, t0()) // unnumbered while the cleanup runs
	for {
		n, err := l.Cleanup(ctx, t0().Add(time.Hour), 100)
		check.NoError(t, err)
		if n == 0 {
			break
		}
	}
	runs, err := l.Sequence(ctx, 10)
	check.NoError(t, err)
	check.Equal(t, []driver.SequencedRun{{Stream: "we_a", First: 4, IDs: late}}, runs, "retention removed 1..3 and never takes an unnumbered event; numbering goes on after 3")
	var pe *driver.PrunedError
	_, _, err = l.Range(ctx, "we_a", 1, 10, 10)
	if !errors.As(err, &pe) {
		t.Fatalf("got error %v, want a *driver.PrunedError", err)
	}
	check.Equal(t, uint64(4), pe.FirstRetained)
}

func testSequenceCancelled(t *testing.T, l driver.Sequencing) {
	appendRaw(t, l, "we_a", 2, t0())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.Sequence(ctx, 10)
	check.Error(t, err)
	check.Len(t, rangeAll(t, l, "we_a"), 0, "a cancelled call numbers nothing")
	runs, err := l.Sequence(context.Background(), 10)
	check.NoError(t, err)
	check.Len(t, runs, 1)
	check.Equal(t, uint64(1), runs[0].First)
}

// numbered shows a Sequencing log as one that numbers at Append: Append calls Sequence until the
// appended event has its number (a concurrent Append's Sequence call may have numbered it, which is
// why the numbers all calls report are kept).
type numbered struct {
	driver.Sequencing
	mu    sync.Mutex
	seqOf map[string]uint64
}

func newNumbered(l driver.Sequencing) *numbered {
	return &numbered{Sequencing: l, seqOf: map[string]uint64{}}
}

func (n *numbered) Append(ctx context.Context, e driver.StreamEvent) (webhook.Event, error) {
	out, err := n.Sequencing.Append(ctx, e)
	if err != nil {
		return out, err
	}
	for idle := 0; ; idle++ {
		n.mu.Lock()
		seq, ok := n.seqOf[out.ID]
		n.mu.Unlock()
		if ok {
			out.Sequence = seq
			return out, nil
		}
		runs, err := n.Sequencing.Sequence(ctx, 100)
		if err != nil {
			return webhook.Event{}, err
		}
		n.mu.Lock()
		for _, r := range runs {
			for i, id := range r.IDs {
				n.seqOf[id] = r.First + uint64(i)
			}
		}
		n.mu.Unlock()
		if len(runs) == 0 && idle > 0 {
			// Another caller holds the stream's numbering right now; it will report ours.
			time.Sleep(time.Millisecond)
		}
	}
}
