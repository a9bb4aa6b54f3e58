package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/webhooktest"
)

const stream = "we_test"

var epoch = time.Unix(1767225600, 0)

func newSource(t testing.TB, n int) *webhooktest.Source {
	t.Helper()
	src := webhooktest.NewSource(webhook.NewSecret(), "sk_sandbox_test", &webhooktest.SourceOptions{Now: func() time.Time { return epoch }})
	for i := range n {
		src.Emit(stream, "test.event", map[string]int{"i": i + 1})
	}
	return src
}

// recorder is a ProcessFunc that records what it processed and fails on demand.
type recorder struct {
	mu       sync.Mutex
	seqs     []uint64
	fetched  []bool
	inFlight atomic.Int32
	failOn   map[uint64]int // sequence → failures left
}

func (r *recorder) process(_ context.Context, s webhook.Step) error {
	if n := r.inFlight.Add(1); n != 1 {
		r.inFlight.Add(-1)
		return fmt.Errorf("ProcessFunc called concurrently (%d) on one stream", n)
	}
	defer r.inFlight.Add(-1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failOn[s.Event.Sequence] > 0 {
		r.failOn[s.Event.Sequence]--
		return errors.New("injected processing failure")
	}
	if s.From >= s.Event.Sequence {
		return fmt.Errorf("step from %d to %d", s.From, s.Event.Sequence)
	}
	r.seqs = append(r.seqs, s.Event.Sequence)
	r.fetched = append(r.fetched, s.Fetched)
	return nil
}

func (r *recorder) processed() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seqs)
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func cursorOf(t *testing.T, s webhook.CursorStore) uint64 {
	t.Helper()
	c, err := s.Get(context.Background(), stream)
	require.NoError(t, err)
	return c
}

// contractStore is a MemoryCursorStore that holds its caller to the CursorStore contract: a store
// may assume every Advance moves forward, to at most MaxSequence, without checking it, so a call that
// does not fails the test.
type contractStore struct {
	webhook.MemoryCursorStore
	t testing.TB
}

func newContractStore(t testing.TB) *contractStore { return &contractStore{t: t} }

func (s *contractStore) Advance(ctx context.Context, stream string, from, to uint64) error {
	if to <= from || to > webhook.MaxSequence {
		s.t.Errorf("CursorStore.Advance(%q, %d, %d): the contract promises from < to ≤ MaxSequence", stream, from, to)
	}
	return s.MemoryCursorStore.Advance(ctx, stream, from, to)
}

func TestNewTrackerValidates(t *testing.T) {
	store := newContractStore(t)
	src := newSource(t, 0)
	rec := &recorder{}
	cases := []struct {
		name  string
		store webhook.CursorStore
		fetch webhook.RangeFetcher
		proc  webhook.ProcessFunc
		opts  *webhook.TrackerOptions
	}{
		{"no store", nil, src, rec.process, nil},
		{"no fetcher", store, nil, rec.process, nil},
		{"no process", store, src, nil, nil},
		{"unknown start", store, src, rec.process, &webhook.TrackerOptions{Start: 7}},
		{"negative batch", store, src, rec.process, &webhook.TrackerOptions{FetchBatch: -1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := webhook.NewTracker(tc.store, tc.fetch, tc.proc, tc.opts)
			require.Error(t, err)
			require.Nil(t, tr)
		})
	}
}

func TestTrackerRules(t *testing.T) {
	cases := []struct {
		name      string
		start     webhook.Start
		cursor    uint64
		deliver   []uint64
		outcomes  []webhook.Outcome
		processed []uint64
		fetched   []bool
		cursorEnd uint64
		fetches   int
	}{
		{"next", webhook.StartAtBeginning, 4, []uint64{5}, []webhook.Outcome{webhook.Processed}, []uint64{5}, []bool{false}, 5, 0},
		{"duplicate of the last", webhook.StartAtBeginning, 5, []uint64{5}, []webhook.Outcome{webhook.Duplicate}, nil, nil, 5, 0},
		{"duplicate of an old one", webhook.StartAtBeginning, 5, []uint64{2}, []webhook.Outcome{webhook.Duplicate}, nil, nil, 5, 0},
		{"gap", webhook.StartAtBeginning, 4, []uint64{8}, []webhook.Outcome{webhook.Processed}, seqRange(5, 8), []bool{true, true, true, false}, 8, 1},
		{"gap then the missed ones arrive late", webhook.StartAtBeginning, 4, []uint64{8, 6, 5, 7},
			[]webhook.Outcome{webhook.Processed, webhook.Duplicate, webhook.Duplicate, webhook.Duplicate}, seqRange(5, 8), nil, 8, 1},
		{"reversed order", webhook.StartAtBeginning, 0, []uint64{3, 2, 1},
			[]webhook.Outcome{webhook.Processed, webhook.Duplicate, webhook.Duplicate}, seqRange(1, 3), nil, 3, 1},
		{"new stream from the beginning", webhook.StartAtBeginning, 0, []uint64{3}, []webhook.Outcome{webhook.Processed}, seqRange(1, 3), nil, 3, 1},
		{"new stream, first is 1", webhook.StartAtBeginning, 0, []uint64{1}, []webhook.Outcome{webhook.Processed}, []uint64{1}, nil, 1, 0},
		{"new stream from the first seen", webhook.StartAtFirstSeen, 0, []uint64{3, 2, 4, 6},
			[]webhook.Outcome{webhook.Processed, webhook.Duplicate, webhook.Processed, webhook.Processed}, []uint64{3, 4, 5, 6}, nil, 6, 1},
		{"first seen does not matter once a cursor exists", webhook.StartAtFirstSeen, 2, []uint64{5},
			[]webhook.Outcome{webhook.Processed}, seqRange(3, 5), nil, 5, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := newSource(t, 10)
			store := newContractStore(t)
			if tc.cursor > 0 {
				require.NoError(t, store.Advance(context.Background(), stream, 0, tc.cursor))
			}
			rec := &recorder{}
			tr, err := webhook.NewTracker(store, src, rec.process, &webhook.TrackerOptions{Start: tc.start})
			require.NoError(t, err)
			for i, seq := range tc.deliver {
				ev := src.Event(stream, seq)
				res, err := tr.Receive(context.Background(), stream, &ev)
				require.NoError(t, err)
				require.Equal(t, tc.outcomes[i], res.Outcome, "delivery %d (sequence %d)", i, seq)
				require.Equal(t, seq, res.Sequence)
			}
			require.Equal(t, tc.processed, rec.processed())
			if tc.fetched != nil {
				require.Equal(t, tc.fetched, rec.fetched)
			}
			require.Equal(t, tc.cursorEnd, cursorOf(t, store))
			require.Equal(t, tc.fetches, src.Fetches())
		})
	}
}

func TestTrackerRejectsInvalidDeliveries(t *testing.T) {
	tr, err := webhook.NewTracker(newContractStore(t), newSource(t, 0), (&recorder{}).process, nil)
	require.NoError(t, err)
	for name, ev := range map[string]*webhook.Event{
		"nil":            nil,
		"zero sequence":  {Sequence: 0},
		"above MaxSeq":   {Sequence: webhook.MaxSequence + 1},
		"no stream name": {Sequence: 1},
	} {
		t.Run(name, func(t *testing.T) {
			s := stream
			if name == "no stream name" {
				s = ""
			}
			_, err := tr.Receive(context.Background(), s, ev)
			require.ErrorIs(t, err, webhook.ErrInvalidDelivery)
		})
	}
}

// TestTrackerBadRanges gives the tracker fetch results that must not be trusted: nothing may be
// processed past the cursor, and the next, good fetch recovers everything.
func TestTrackerBadRanges(t *testing.T) {
	src := newSource(t, 10)
	evs := src.Events(stream)
	cases := []struct {
		name   string
		result func() ([]webhook.Event, error)
		want   error
	}{
		{"fetch fails", func() ([]webhook.Event, error) { return nil, errors.New("connection refused") }, webhook.ErrFetch},
		{"empty", func() ([]webhook.Event, error) { return nil, nil }, webhook.ErrRangeIncomplete},
		{"short at the end", func() ([]webhook.Event, error) { return slices.Clone(evs[4:6]), nil }, webhook.ErrRangeIncomplete},
		{"short at the start", func() ([]webhook.Event, error) { return slices.Clone(evs[5:7]), nil }, webhook.ErrRangeIncomplete},
		{"hole in the middle", func() ([]webhook.Event, error) {
			return []webhook.Event{evs[4], evs[6], evs[6]}, nil
		}, webhook.ErrRangeIncomplete},
		{"out of order", func() ([]webhook.Event, error) { return []webhook.Event{evs[5], evs[4], evs[6]}, nil }, webhook.ErrRangeIncomplete},
		{"duplicated event", func() ([]webhook.Event, error) { return []webhook.Event{evs[4], evs[4], evs[5]}, nil }, webhook.ErrRangeIncomplete},
		{"too many", func() ([]webhook.Event, error) { return slices.Clone(evs[4:8]), nil }, webhook.ErrRangeIncomplete},
		{"wrong range", func() ([]webhook.Event, error) { return slices.Clone(evs[0:3]), nil }, webhook.ErrRangeIncomplete},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := newContractStore(t)
			require.NoError(t, store.Advance(context.Background(), stream, 0, 4))
			bad := true
			fetch := webhook.RangeFetcherFunc(func(ctx context.Context, s string, from, to uint64) ([]webhook.Event, error) {
				require.Equal(t, uint64(5), from)
				require.Equal(t, uint64(7), to)
				if bad {
					return tc.result()
				}
				return src.FetchRange(ctx, s, from, to)
			})
			rec := &recorder{}
			tr, err := webhook.NewTracker(store, fetch, rec.process, nil)
			require.NoError(t, err)
			ev := src.Event(stream, 8)
			res, err := tr.Receive(context.Background(), stream, &ev)
			require.ErrorIs(t, err, tc.want)
			require.Zero(t, res.Recovered)
			require.Empty(t, rec.processed(), "nothing is processed from an untrusted range")
			require.Equal(t, uint64(4), cursorOf(t, store), "the cursor stays before the gap")

			bad = false
			res, err = tr.Receive(context.Background(), stream, &ev)
			require.NoError(t, err)
			require.Equal(t, webhook.Processed, res.Outcome)
			require.Equal(t, 3, res.Recovered)
			require.Equal(t, seqRange(5, 8), rec.processed())
		})
	}
}

func TestTrackerProcessFailureKeepsProgress(t *testing.T) {
	src := newSource(t, 10)
	store := newContractStore(t)
	rec := &recorder{failOn: map[uint64]int{3: 1, 5: 1}}
	tr, err := webhook.NewTracker(store, src, rec.process, nil)
	require.NoError(t, err)
	ev := src.Event(stream, 5)

	res, err := tr.Receive(context.Background(), stream, &ev) // 1, 2 recovered; 3 fails
	require.ErrorIs(t, err, webhook.ErrProcess)
	require.ErrorContains(t, err, "injected processing failure")
	require.Equal(t, 2, res.Recovered)
	require.Equal(t, uint64(2), cursorOf(t, store))

	_, err = tr.Receive(context.Background(), stream, &ev) // 3, 4 recovered; the delivered 5 fails
	require.ErrorIs(t, err, webhook.ErrProcess)
	require.Equal(t, uint64(4), cursorOf(t, store))

	res, err = tr.Receive(context.Background(), stream, &ev)
	require.NoError(t, err)
	require.Equal(t, webhook.Processed, res.Outcome)
	require.Zero(t, res.Recovered)
	require.Equal(t, seqRange(1, 5), rec.processed())
}

func TestTrackerFetchesInBatches(t *testing.T) {
	src := newSource(t, 12)
	var mu sync.Mutex
	var asked [][2]uint64
	fail := map[uint64]bool{7: true} // the batch starting at 7 fails once
	fetch := webhook.RangeFetcherFunc(func(ctx context.Context, s string, from, to uint64) ([]webhook.Event, error) {
		mu.Lock()
		asked = append(asked, [2]uint64{from, to})
		f := fail[from]
		delete(fail, from)
		mu.Unlock()
		if f {
			return nil, errors.New("injected")
		}
		return src.FetchRange(ctx, s, from, to)
	})
	store := newContractStore(t)
	rec := &recorder{}
	tr, err := webhook.NewTracker(store, fetch, rec.process, &webhook.TrackerOptions{FetchBatch: 3})
	require.NoError(t, err)
	ev := src.Event(stream, 12)

	res, err := tr.Receive(context.Background(), stream, &ev)
	require.ErrorIs(t, err, webhook.ErrFetch)
	require.Equal(t, 6, res.Recovered, "the batches before the failure stay processed")
	require.Equal(t, uint64(6), cursorOf(t, store))

	res, err = tr.Receive(context.Background(), stream, &ev)
	require.NoError(t, err)
	require.Equal(t, 5, res.Recovered)
	require.Equal(t, seqRange(1, 12), rec.processed())
	require.Equal(t, [][2]uint64{{1, 3}, {4, 6}, {7, 9}, {7, 9}, {10, 11}}, asked)
}

func TestTrackerCatchUp(t *testing.T) {
	src := newSource(t, 2500)
	var calls atomic.Int32
	fetch := webhook.RangeFetcherFunc(func(ctx context.Context, s string, from, to uint64) ([]webhook.Event, error) {
		calls.Add(1)
		return src.FetchRange(ctx, s, from, to)
	})
	store := newContractStore(t)
	require.NoError(t, store.Advance(context.Background(), stream, 0, 3))
	rec := &recorder{}
	tr, err := webhook.NewTracker(store, fetch, rec.process, nil)
	require.NoError(t, err)

	n, err := tr.CatchUp(context.Background(), stream)
	require.NoError(t, err)
	require.Equal(t, 2497, n)
	require.Equal(t, seqRange(4, 2500), rec.processed())
	require.Equal(t, int32(25), calls.Load(), "a page of DefaultPageSize at a time: 24 full, one short")

	n, err = tr.CatchUp(context.Background(), stream)
	require.NoError(t, err)
	require.Zero(t, n)

	// Under StartAtFirstSeen a stream without a cursor has nowhere to start.
	tr2, err := webhook.NewTracker(newContractStore(t), fetch, rec.process, &webhook.TrackerOptions{Start: webhook.StartAtFirstSeen})
	require.NoError(t, err)
	n, err = tr2.CatchUp(context.Background(), stream)
	require.NoError(t, err)
	require.Zero(t, n)

	// A failing fetch is reported.
	failing := webhook.RangeFetcherFunc(func(context.Context, string, uint64, uint64) ([]webhook.Event, error) {
		return nil, errors.New("down")
	})
	tr3, err := webhook.NewTracker(newContractStore(t), failing, rec.process, nil)
	require.NoError(t, err)
	_, err = tr3.CatchUp(context.Background(), stream)
	require.ErrorIs(t, err, webhook.ErrFetch)
}

// racingStore simulates another process that processes the same event first: the first Advance of
// each target finds the cursor already moved there.
type racingStore struct {
	webhook.MemoryCursorStore
	stolen    map[uint64]bool
	conflicts int
	always    bool
}

func (s *racingStore) Advance(ctx context.Context, stream string, from, to uint64) error {
	if s.always || !s.stolen[to] {
		if s.stolen == nil {
			s.stolen = map[uint64]bool{}
		}
		s.stolen[to] = true
		s.conflicts++
		if !s.always {
			if err := s.MemoryCursorStore.Advance(ctx, stream, from, to); err != nil {
				return err
			}
		}
		return webhook.ErrCursorConflict
	}
	return s.MemoryCursorStore.Advance(ctx, stream, from, to)
}

func TestTrackerCursorConflict(t *testing.T) {
	src := newSource(t, 5)
	t.Run("another process won: the delivery becomes a duplicate", func(t *testing.T) {
		store := &racingStore{}
		rec := &recorder{}
		tr, err := webhook.NewTracker(store, src, rec.process, nil)
		require.NoError(t, err)
		ev := src.Event(stream, 1)
		res, err := tr.Receive(context.Background(), stream, &ev)
		require.NoError(t, err)
		require.Equal(t, webhook.Duplicate, res.Outcome)
		require.Equal(t, 1, store.conflicts)
	})
	t.Run("endless conflicts give up", func(t *testing.T) {
		store := &racingStore{always: true}
		tr, err := webhook.NewTracker(store, src, (&recorder{}).process, nil)
		require.NoError(t, err)
		ev := src.Event(stream, 1)
		_, err = tr.Receive(context.Background(), stream, &ev)
		require.ErrorIs(t, err, webhook.ErrCursorConflict)
		require.Greater(t, store.conflicts, 1)
	})
}

type failingStore struct{ getErr, advErr error }

func (s failingStore) Get(context.Context, string) (uint64, error) { return 0, s.getErr }
func (s failingStore) Advance(context.Context, string, uint64, uint64) error {
	return s.advErr
}

func TestTrackerStoreFailure(t *testing.T) {
	src := newSource(t, 3)
	ev := src.Event(stream, 1)
	for name, store := range map[string]failingStore{
		"get":     {getErr: errors.New("db down")},
		"advance": {advErr: errors.New("db down")},
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := webhook.NewTracker(store, src, (&recorder{}).process, nil)
			require.NoError(t, err)
			_, err = tr.Receive(context.Background(), stream, &ev)
			require.ErrorIs(t, err, webhook.ErrCursorStore)
		})
	}
}

func TestTrackerProcessAdvances(t *testing.T) {
	src := newSource(t, 5)
	t.Run("process advances the cursor itself", func(t *testing.T) {
		store := newContractStore(t)
		var got []uint64
		proc := func(ctx context.Context, s webhook.Step) error {
			got = append(got, s.Event.Sequence)
			return store.Advance(ctx, s.Stream, s.From, s.Event.Sequence) // stands in for AdvanceTx
		}
		tr, err := webhook.NewTracker(store, src, proc, &webhook.TrackerOptions{ProcessAdvances: true})
		require.NoError(t, err)
		ev := src.Event(stream, 3)
		res, err := tr.Receive(context.Background(), stream, &ev)
		require.NoError(t, err)
		require.Equal(t, webhook.Processed, res.Outcome)
		require.Equal(t, seqRange(1, 3), got)
		require.Equal(t, uint64(3), cursorOf(t, store))
	})
	t.Run("process forgets to advance", func(t *testing.T) {
		store := newContractStore(t)
		tr, err := webhook.NewTracker(store, src, (&recorder{}).process, &webhook.TrackerOptions{ProcessAdvances: true})
		require.NoError(t, err)
		ev := src.Event(stream, 1)
		_, err = tr.Receive(context.Background(), stream, &ev)
		require.ErrorIs(t, err, webhook.ErrNotAdvanced)
	})
	t.Run("process loses the compare-and-set", func(t *testing.T) {
		store := newContractStore(t)
		calls := 0
		proc := func(ctx context.Context, s webhook.Step) error {
			calls++
			if calls == 1 { // another replica commits first; our transaction's advance fails
				require.NoError(t, store.Advance(ctx, s.Stream, s.From, s.Event.Sequence))
				return fmt.Errorf("commit: %w", webhook.ErrCursorConflict)
			}
			return store.Advance(ctx, s.Stream, s.From, s.Event.Sequence)
		}
		tr, err := webhook.NewTracker(store, src, proc, &webhook.TrackerOptions{ProcessAdvances: true})
		require.NoError(t, err)
		ev := src.Event(stream, 1)
		res, err := tr.Receive(context.Background(), stream, &ev)
		require.NoError(t, err)
		require.Equal(t, webhook.Duplicate, res.Outcome)
		require.Equal(t, 1, calls)
	})
}

func TestTrackerCancelledWhileWaiting(t *testing.T) {
	src := newSource(t, 3)
	entered, release := make(chan struct{}), make(chan struct{})
	proc := func(ctx context.Context, s webhook.Step) error {
		if s.Event.Sequence == 1 {
			close(entered)
			<-release
		}
		return nil
	}
	tr, err := webhook.NewTracker(newContractStore(t), src, proc, nil)
	require.NoError(t, err)
	ev1, ev2 := src.Event(stream, 1), src.Event(stream, 2)
	done := make(chan error, 1)
	go func() {
		_, err := tr.Receive(context.Background(), stream, &ev1)
		done <- err
	}()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = tr.Receive(ctx, stream, &ev2)
	require.ErrorIs(t, err, context.Canceled)
	close(release)
	require.NoError(t, <-done)
	res, err := tr.Receive(context.Background(), stream, &ev2)
	require.NoError(t, err)
	require.Equal(t, webhook.Processed, res.Outcome)
}

// TestTrackerUnderFaults is the acceptance test: 10,000 events delivered with drops,
// duplicates and reordering, by concurrent workers, while fetches fail or come back with holes and
// processing fails at random. Failed deliveries are retried later, as the producer does. Every event
// must be processed exactly once, in order.
func TestTrackerUnderFaults(t *testing.T) {
	const n = 10_000
	runFaultSimulation(t, n, 1, 8)
}

// TestTrackerUnderFaultsManyStreams runs the simulation on several streams at once: streams are
// independent, and each one stays serialized.
func TestTrackerUnderFaultsManyStreams(t *testing.T) {
	runFaultSimulation(t, 1_000, 4, 8)
}

func runFaultSimulation(t *testing.T, n, streams, workers int) {
	rng := rand.New(rand.NewPCG(20260101, uint64(n*streams)))
	var rngMu sync.Mutex
	chance := func(p float64) bool {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.Float64() < p
	}

	src := webhooktest.NewSource(webhook.NewSecret(), "sk_sandbox_test", &webhooktest.SourceOptions{Now: func() time.Time { return epoch }})
	names := make([]string, streams)
	for s := range names {
		names[s] = fmt.Sprintf("we_%d", s)
		for i := range n {
			src.Emit(names[s], "test.event", map[string]int{"i": i + 1})
		}
	}

	var fetchFailures, holes, processFailures atomic.Int64
	fetch := webhook.RangeFetcherFunc(func(ctx context.Context, s string, from, to uint64) ([]webhook.Event, error) {
		if chance(0.10) {
			fetchFailures.Add(1)
			return nil, errors.New("injected fetch failure")
		}
		evs, err := src.FetchRange(ctx, s, from, to)
		if err == nil && len(evs) > 1 && chance(0.05) {
			holes.Add(1)
			evs = slices.Delete(evs, len(evs)/2, len(evs)/2+1)
		}
		return evs, err
	})

	var mu sync.Mutex
	processed := make(map[string][]uint64, streams)
	inFlight := make(map[string]*atomic.Int32, streams)
	for _, s := range names {
		inFlight[s] = &atomic.Int32{}
	}
	proc := func(_ context.Context, s webhook.Step) error {
		if c := inFlight[s.Stream].Add(1); c != 1 {
			t.Errorf("stream %s: ProcessFunc running %d times at once", s.Stream, c)
		}
		defer inFlight[s.Stream].Add(-1)
		if chance(0.02) {
			processFailures.Add(1)
			return errors.New("injected processing failure")
		}
		mu.Lock()
		processed[s.Stream] = append(processed[s.Stream], s.Event.Sequence)
		mu.Unlock()
		return nil
	}
	store := newContractStore(t)
	tr, err := webhook.NewTracker(store, fetch, proc, &webhook.TrackerOptions{FetchBatch: 64})
	require.NoError(t, err)

	// The delivery schedule: each event dropped (10%), sent once, or sent two or three times (10%),
	// then shuffled within windows of 10 so that many arrive out of order.
	type delivery struct {
		stream string
		seq    uint64
	}
	var queue []delivery
	var dropped, duplicated int
	for _, s := range names {
		for seq := uint64(1); seq <= uint64(n); seq++ {
			copies := 1
			switch r := rng.Float64(); {
			case r < 0.10:
				copies = 0
				dropped++
			case r < 0.20:
				copies = 2 + rng.IntN(2)
				duplicated++
			}
			for range copies {
				queue = append(queue, delivery{s, seq})
			}
		}
	}
	for i := range queue {
		j := i + rng.IntN(min(10, len(queue)-i))
		queue[i], queue[j] = queue[j], queue[i]
	}

	// Workers deliver concurrently; a failed delivery goes to the back of the queue (the producer's retry).
	var qmu sync.Mutex
	cond := sync.NewCond(&qmu)
	busy := 0
	var outcomes [3]atomic.Int64
	var failures atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				qmu.Lock()
				for len(queue) == 0 && busy > 0 {
					cond.Wait()
				}
				if len(queue) == 0 {
					qmu.Unlock()
					cond.Broadcast()
					return
				}
				d := queue[0]
				queue = queue[1:]
				busy++
				qmu.Unlock()

				ev := src.Event(d.stream, d.seq)
				res, err := tr.Receive(context.Background(), d.stream, &ev)

				qmu.Lock()
				busy--
				if err != nil {
					failures.Add(1)
					queue = append(queue, d)
				} else {
					outcomes[res.Outcome].Add(1)
				}
				qmu.Unlock()
				cond.Broadcast()
			}
		}()
	}
	wg.Wait()

	// Events whose every delivery was dropped at the tail have no later delivery to reveal the gap:
	// catching up fetches them (retrying through the injected failures).
	for _, s := range names {
		for {
			_, err := tr.CatchUp(context.Background(), s)
			if err == nil {
				break
			}
			require.True(t, errors.Is(err, webhook.ErrFetch) || errors.Is(err, webhook.ErrProcess), "%v", err)
		}
	}

	for _, s := range names {
		require.Equal(t, seqRange(1, uint64(n)), processed[s], "stream %s: every event exactly once, in order", s)
		c, err := store.Get(context.Background(), s)
		require.NoError(t, err)
		require.Equal(t, uint64(n), c)
	}
	// The faults really happened.
	require.Positive(t, dropped)
	require.Positive(t, duplicated)
	require.Positive(t, fetchFailures.Load())
	require.Positive(t, holes.Load())
	require.Positive(t, processFailures.Load())
	require.Positive(t, failures.Load())
	require.Positive(t, outcomes[webhook.Duplicate].Load())
	require.Positive(t, outcomes[webhook.Processed].Load())
	t.Logf("%d streams × %d events: %d dropped, %d duplicated; %d fetch failures, %d holes, %d processing failures; %d deliveries retried; %d processed, %d duplicates",
		streams, n, dropped, duplicated, fetchFailures.Load(), holes.Load(), processFailures.Load(), failures.Load(),
		outcomes[webhook.Processed].Load(), outcomes[webhook.Duplicate].Load())
}

// The Tracker asks its store only for moves forward, to at most MaxSequence, which the store may
// then assume (CursorStore): here at the top of the sequence range, from a first delivery under
// StartAtFirstSeen, through a gap filled by fetching, to CatchUp at the last sequence. The stores'
// own tests of these arguments were the conformance suite's InvalidArguments; every other Tracker
// test checks the same promise through contractStore.
func TestTrackerAdvancesOnlyForward(t *testing.T) {
	const top = webhook.MaxSequence
	event := func(seq uint64) webhook.Event {
		return webhook.Event{ID: fmt.Sprintf("evt_%d", seq), Sequence: seq, Type: "test.event", Data: []byte(`{}`)}
	}
	fetch := webhook.RangeFetcherFunc(func(_ context.Context, _ string, from, to uint64) ([]webhook.Event, error) {
		var out []webhook.Event
		for seq := from; seq <= to && seq <= top; seq++ {
			out = append(out, event(seq))
		}
		return out, nil
	})
	ctx := context.Background()
	for name, start := range map[string]webhook.Start{"StartAtBeginning": webhook.StartAtBeginning, "StartAtFirstSeen": webhook.StartAtFirstSeen} {
		t.Run(name, func(t *testing.T) {
			store := newContractStore(t)
			if start == webhook.StartAtBeginning {
				require.NoError(t, store.Advance(ctx, stream, 0, top-4))
			}
			rec := &recorder{}
			tr, err := webhook.NewTracker(store, fetch, rec.process, &webhook.TrackerOptions{Start: start})
			require.NoError(t, err)
			for _, seq := range []uint64{top - 2, top - 3, top - 2, top} {
				ev := event(seq)
				_, err := tr.Receive(ctx, stream, &ev)
				require.NoError(t, err, "sequence %d", seq)
			}
			require.Equal(t, uint64(top), cursorOf(t, store))
			n, err := tr.CatchUp(ctx, stream)
			require.NoError(t, err)
			require.Zero(t, n, "nothing comes after MaxSequence")
			want := seqRange(top-3, top)
			if start == webhook.StartAtFirstSeen {
				want = []uint64{top - 2, top - 1, top}
			}
			require.Equal(t, want, rec.processed())
		})
	}
}
