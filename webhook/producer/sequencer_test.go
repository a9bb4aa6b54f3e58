package producer_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

func rangeSeqs(t *testing.T, l driver.Log, stream string) []uint64 {
	t.Helper()
	evs, _, err := l.Range(context.Background(), stream, 1, math.MaxUint64, producer.MaxRangeLimit)
	require.NoError(t, err)
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Sequence
	}
	return out
}

func appendIDs(t *testing.T, l driver.Log, stream string, n int) []string {
	t.Helper()
	return appendAt(t, l, stream, n, t0)
}

func appendAt(t *testing.T, l driver.Log, stream string, n int, created time.Time) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		e, err := l.Append(context.Background(), driver.StreamEvent{Stream: stream, Event: webhook.Event{Type: "order.created", Created: created.Unix(),
			APIVersion: "v1", Data: []byte(fmt.Sprintf(`{"n":%d}`, i))}})
		require.NoError(t, err)
		require.Zero(t, e.Sequence, "a deferred log numbers after the append")
		ids[i] = e.ID
	}
	return ids
}

func TestDeferredMemoryLogNumbersOnlyWhenSequenced(t *testing.T) {
	ctx := context.Background()
	l := memstore.NewDeferredLog()
	a := appendIDs(t, l, "we_a", 3)
	b := appendIDs(t, l, "we_b", 1)
	a = append(a, appendIDs(t, l, "we_a", 1)...)
	require.Equal(t, 5, l.Unsequenced())

	require.Empty(t, rangeSeqs(t, l, "we_a"), "unnumbered events are invisible to Range")
	got, err := l.Claim(ctx, driver.ClaimRequest{Now: t0.Add(time.Hour), LeaseUntil: t0.Add(2 * time.Hour), Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got, "and to Claim")
	_, err = l.Status(ctx, "we_a", 1)
	require.ErrorIs(t, err, driver.ErrNotFound, "and to Status")

	runs, err := l.Sequence(ctx, 4)
	require.NoError(t, err)
	require.Equal(t, []driver.SequencedRun{
		{Stream: "we_a", First: 1, IDs: a[:3]},
		{Stream: "we_b", First: 1, IDs: b},
	}, runs, "the oldest 4, by stream, in append order")
	require.Equal(t, []uint64{1, 2, 3}, rangeSeqs(t, l, "we_a"))
	require.Equal(t, uint64(3), runs[0].Last())

	runs, err = l.Sequence(ctx, 4)
	require.NoError(t, err)
	require.Equal(t, []driver.SequencedRun{{Stream: "we_a", First: 4, IDs: a[3:]}}, runs)
	runs, err = l.Sequence(ctx, 4)
	require.NoError(t, err)
	require.Nil(t, runs, "nothing left")
	evs, _, err := l.Range(ctx, "we_a", 1, 4, 10)
	require.NoError(t, err)
	for i, e := range evs {
		require.Equal(t, a[i], e.ID, "sequence %d", e.Sequence)
	}
}

func TestSequencerWakesAndPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memstore.NewDeferredLog()
		var seen atomic.Int64
		s, err := producer.NewSequencer(l, &producer.SequencerOptions{PollInterval: time.Minute,
			OnSequenced: func(runs []driver.SequencedRun) {
				for _, r := range runs {
					seen.Add(int64(len(r.IDs)))
				}
			}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		synctest.Wait() // the first look, at once, found nothing

		start := time.Now()
		appendIDs(t, l, "we_a", 3)
		s.Wake()
		synctest.Wait()
		require.Equal(t, []uint64{1, 2, 3}, rangeSeqs(t, l, "we_a"), "woken: numbered at once")
		require.Equal(t, start, time.Now(), "without waiting for the poll")
		require.Equal(t, int64(3), seen.Load())

		appendIDs(t, l, "we_a", 2) // nobody wakes it: the poll finds them
		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		require.Len(t, rangeSeqs(t, l, "we_a"), 3, "not before the poll")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.Equal(t, []uint64{1, 2, 3, 4, 5}, rangeSeqs(t, l, "we_a"), "the poll is the fallback")

		cancel()
		require.NoError(t, <-done)
	})
}

func TestSequencerRunsBackToBackWhileThereIsWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memstore.NewDeferredLog()
		appendIDs(t, l, "we_a", 25)
		var calls atomic.Int64
		s, err := producer.NewSequencer(l, &producer.SequencerOptions{Batch: 10, PollInterval: time.Hour,
			OnSequenced: func([]driver.SequencedRun) { calls.Add(1) }})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- s.Run(ctx) }()
		synctest.Wait()
		require.Len(t, rangeSeqs(t, l, "we_a"), 25)
		require.Equal(t, int64(3), calls.Load(), "10 + 10 + 5, one after the other")
		require.Equal(t, start, time.Now(), "no poll interval waited between batches")
		cancel()
		require.NoError(t, <-done)
	})
}

// flakySequencing fails the Sequence calls its fail function picks, recording when each call came.
type flakySequencing struct {
	*memstore.DeferredLog
	mu    sync.Mutex
	calls []time.Time
	fail  func(n int) bool
}

func (f *flakySequencing) Sequence(ctx context.Context, limit int) ([]driver.SequencedRun, error) {
	f.mu.Lock()
	f.calls = append(f.calls, time.Now())
	n := len(f.calls)
	f.mu.Unlock()
	if f.fail(n) {
		return nil, errors.New("connection reset by peer")
	}
	return f.DeferredLog.Sequence(ctx, limit)
}

func TestSequencerBacksOffOnErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flakySequencing{DeferredLog: memstore.NewDeferredLog(), fail: func(n int) bool { return n <= 4 }}
		appendIDs(t, f, "we_a", 2)
		s, err := producer.NewSequencer(f, &producer.SequencerOptions{PollInterval: time.Second})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- s.Run(ctx) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, []uint64{1, 2}, rangeSeqs(t, f, "we_a"), "numbered once the store is back")
		f.mu.Lock()
		var gaps []time.Duration
		for i, c := range f.calls[:6] {
			gaps = append(gaps, c.Sub(start))
			start = f.calls[i]
		}
		f.mu.Unlock()
		// Four failures: pauses of 1, 2, 4 and then 5 s (the cap, not 8); the fifth call numbers, the
		// sixth (at once, since the fifth numbered something) finds nothing.
		require.Equal(t, []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 0}, gaps)
		cancel()
		require.NoError(t, <-done)
	})
}

func TestSequencerOptions(t *testing.T) {
	_, err := producer.NewSequencer(nil, nil)
	require.Error(t, err)
	_, err = producer.NewSequencer(memstore.NewDeferredLog(), &producer.SequencerOptions{Batch: -1})
	require.Error(t, err)
	_, err = producer.NewSequencer(memstore.NewDeferredLog(), &producer.SequencerOptions{PollInterval: -1})
	require.Error(t, err)
	_, err = producer.NewDispatcher(memstore.NewDeferredLog(), mustEndpoints(t),
		&producer.DispatcherOptions{Sequencer: &producer.SequencerOptions{Batch: -1}})
	require.Error(t, err, "the dispatcher checks its sequencer's options")
}

func TestDispatcherNumbersADeferredLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var delivered atomic.Int64
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			delivered.Add(1)
			return respond(r, http.StatusOK), nil
		})}
		eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
		l := memstore.NewDeferredLog()
		var numbered atomic.Int64
		d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: client, PollInterval: time.Hour,
			Sequencer: &producer.SequencerOptions{PollInterval: time.Hour, OnSequenced: func(runs []driver.SequencedRun) {
				numbered.Add(int64(len(runs[0].IDs)))
			}}})

		// DeliverDue numbers first.
		appendAt(t, l, "we_a", 2, time.Now())
		st, err := d.DeliverDue(context.Background())
		require.NoError(t, err)
		require.Equal(t, 2, st.Delivered)

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		synctest.Wait()
		start := time.Now()
		appendAt(t, l, "we_a", 3, time.Now())
		d.Wake() // as after a commit: numbered, then claimed and delivered, with no poll waited
		synctest.Wait()
		require.Equal(t, int64(5), delivered.Load())
		require.Equal(t, int64(5), numbered.Load(), "the user's OnSequenced still runs")
		require.Equal(t, start, time.Now())
		require.Equal(t, driver.Delivered, status(t, l, "we_a", 5).State)
		cancel()
		require.NoError(t, <-done)
	})
}
