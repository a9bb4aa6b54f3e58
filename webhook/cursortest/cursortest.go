package cursortest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/webhook"
)

// Run runs the suite. newStore must return a fresh, empty store each time it is called (a new schema,
// key prefix or instance); it is called once per subtest.
func Run(t *testing.T, newStore func(t *testing.T) webhook.CursorStore) {
	t.Helper()
	// The subtests assert values and counts, not speed: the test's context, bounded by go test's
	// -timeout, so that a busy machine makes them slower, never red.
	ctx := func(t *testing.T) context.Context { return t.Context() }

	t.Run("UnknownStreamIsZero", func(t *testing.T) {
		s := newStore(t)
		got, err := s.Get(ctx(t), "we_unknown")
		check.NoError(t, err)
		check.Equal(t, 0, got)
	})

	t.Run("AdvanceFromZeroThenStepByStep", func(t *testing.T) {
		s, c := newStore(t), ctx(t)
		check.NoError(t, s.Advance(c, "we_1", 0, 1))
		for i := uint64(1); i < 20; i++ {
			check.NoError(t, s.Advance(c, "we_1", i, i+1))
		}
		got, err := s.Get(c, "we_1")
		check.NoError(t, err)
		check.Equal(t, uint64(20), got)
	})

	t.Run("AdvanceSkipsForward", func(t *testing.T) {
		// The first event of a StartAtFirstSeen stream moves the cursor from 0 to wherever it is.
		s, c := newStore(t), ctx(t)
		check.NoError(t, s.Advance(c, "we_1", 0, 57))
		check.NoError(t, s.Advance(c, "we_1", 57, 58))
		got, err := s.Get(c, "we_1")
		check.NoError(t, err)
		check.Equal(t, uint64(58), got)
	})

	t.Run("ConflictChangesNothing", func(t *testing.T) {
		s, c := newStore(t), ctx(t)
		check.NoError(t, s.Advance(c, "we_1", 0, 5))
		cases := []struct {
			name     string
			from, to uint64
		}{
			{"from zero on an existing cursor", 0, 6},
			{"from behind", 4, 6},
			{"from ahead", 6, 7},
			{"far ahead", 1000, 1001},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				err := s.Advance(c, "we_1", tc.from, tc.to)
				check.ErrorIs(t, err, webhook.ErrCursorConflict)
				got, err := s.Get(c, "we_1")
				check.NoError(t, err)
				check.Equal(t, uint64(5), got)
			})
		}
	})

	t.Run("ConflictOnMissingStream", func(t *testing.T) {
		s, c := newStore(t), ctx(t)
		check.ErrorIs(t, s.Advance(c, "we_none", 3, 4), webhook.ErrCursorConflict)
		got, err := s.Get(c, "we_none")
		check.NoError(t, err)
		check.Equal(t, 0, got)
	})

	t.Run("MaxSequence", func(t *testing.T) {
		s, c := newStore(t), ctx(t)
		check.NoError(t, s.Advance(c, "we_1", 0, webhook.MaxSequence-1))
		check.NoError(t, s.Advance(c, "we_1", webhook.MaxSequence-1, webhook.MaxSequence))
		got, err := s.Get(c, "we_1")
		check.NoError(t, err)
		check.Equal(t, uint64(webhook.MaxSequence), got)
	})

	t.Run("StreamsAreIndependent", func(t *testing.T) {
		s, c := newStore(t), ctx(t)
		// Names that a careless key or query scheme would confuse with each other.
		names := []string{"we_1", "we_10", "we_1:x", "WE_1", "we_1 ", "we/1", "we{1}", "ünïcødé", "'; DROP TABLE x; --", "*", "we_%"}
		for i, n := range names {
			check.NoError(t, s.Advance(c, n, 0, uint64(i+1)), "stream %q", n)
		}
		for i, n := range names {
			got, err := s.Get(c, n)
			check.NoError(t, err)
			check.Equal(t, uint64(i+1), got, "stream %q", n)
		}
		got, err := s.Get(c, "we_")
		check.NoError(t, err)
		check.Equal(t, 0, got)
	})

	t.Run("LongStreamName", func(t *testing.T) {
		s, c := newStore(t), ctx(t)
		long := make([]byte, 1024)
		for i := range long {
			long[i] = 'a' + byte(i%26)
		}
		check.NoError(t, s.Advance(c, string(long), 0, 3))
		got, err := s.Get(c, string(long))
		check.NoError(t, err)
		check.Equal(t, uint64(3), got)
	})

	t.Run("CancelledContext", func(t *testing.T) {
		s := newStore(t)
		c, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := s.Get(c, "we_1")
		check.Error(t, err)
		check.Error(t, s.Advance(c, "we_1", 0, 1))
		got, err := s.Get(ctx(t), "we_1")
		check.NoError(t, err)
		check.Equal(t, 0, got)
	})

	t.Run("RacingFirstAdvanceHasOneWinner", func(t *testing.T) {
		s, c := newStore(t), ctx(t)
		const n = 16
		var wins, conflicts atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := s.Advance(c, "we_race", 0, uint64(i+1))
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, webhook.ErrCursorConflict):
					conflicts.Add(1)
				default:
					t.Errorf("Advance: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		check.Equal(t, int32(1), wins.Load())
		check.Equal(t, int32(n-1), conflicts.Load())
	})

	t.Run("RacingSameStepHasOneWinner", func(t *testing.T) {
		s, c := newStore(t), ctx(t)
		check.NoError(t, s.Advance(c, "we_race", 0, 41))
		const n = 16
		var wins atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := s.Advance(c, "we_race", 41, 42)
				if err == nil {
					wins.Add(1)
				} else if !errors.Is(err, webhook.ErrCursorConflict) {
					t.Errorf("Advance: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		check.Equal(t, int32(1), wins.Load())
		got, err := s.Get(c, "we_race")
		check.NoError(t, err)
		check.Equal(t, uint64(42), got)
	})

	t.Run("NoLostUpdateUnderContention", func(t *testing.T) {
		// Workers increment shared cursors by read-then-compare-and-set; a store whose Advance is not
		// atomic loses increments here.
		s, c := newStore(t), ctx(t)
		const workers, each, streams = 8, 25, 2
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stream := "we_" + strconv.Itoa(w%streams)
				for done := 0; done < each; {
					cur, err := s.Get(c, stream)
					if err != nil {
						t.Errorf("Get: %v", err)
						return
					}
					err = s.Advance(c, stream, cur, cur+1)
					switch {
					case err == nil:
						done++
					case !errors.Is(err, webhook.ErrCursorConflict):
						t.Errorf("Advance: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		for i := range streams {
			got, err := s.Get(c, "we_"+strconv.Itoa(i))
			check.NoError(t, err)
			check.Equal(t, uint64(workers/streams*each), got)
		}
	})
}
