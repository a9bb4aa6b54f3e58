package webhook

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTrackerForgetsIdleLocks checks that the per-stream lock table does not grow with every stream
// ever seen: a lock lives only while a delivery holds or awaits it.
func TestTrackerForgetsIdleLocks(t *testing.T) {
	fetch := RangeFetcherFunc(func(_ context.Context, _ string, from, to uint64) ([]Event, error) {
		var evs []Event
		for s := from; s <= to; s++ {
			evs = append(evs, Event{ID: "evt_" + strconv.FormatUint(s, 10), Sequence: s, Type: "t"})
		}
		return evs, nil
	})
	tr, err := NewTracker(&MemoryCursorStore{}, fetch, func(context.Context, Step) error { return nil }, nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := Event{ID: "evt", Sequence: uint64(i%5 + 1), Type: "t"}
			if _, err := tr.Receive(context.Background(), "we_"+strconv.Itoa(i%8), &ev); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	require.Empty(t, tr.locks)
}
