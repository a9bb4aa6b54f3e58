package memstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
)

// TestQueueBounded: records that leave the store before their retention ends (released,
// or found expired by Claim or Lookup) must not pile up in the expiry queue behind a live head, or a
// store with few live records grows without bound.
func TestQueueBounded(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fp := driver.Fingerprint{1}
	s := New(&Options{MaxRecords: 64, Shards: 1})
	// A live record at the head of the queue, kept for a day.
	_, err := s.Claim(ctx, driver.Key{Scope: "s", Key: "head"}, fp, base, base.Add(time.Minute), base.Add(24*time.Hour))
	require.NoError(t, err)
	// Then many claims that are released (a panicking handler, ReleaseServerErrors): never more than
	// two records live at once.
	for i := range 10_000 {
		k := driver.Key{Scope: "s", Key: strconv.Itoa(i)}
		c, err := s.Claim(ctx, k, fp, base, base.Add(time.Minute), base.Add(24*time.Hour))
		require.NoError(t, err)
		require.NoError(t, s.Release(ctx, k, c.Token))
	}
	require.Equal(t, 1, s.Len())
	sh := &s.shards[0]
	sh.mu.Lock()
	queued := len(sh.queue) - sh.head
	sh.mu.Unlock()
	require.LessOrEqual(t, queued, compactAt+expireBatch, "expiry queue holds %d entries for 1 live record", queued)
}
