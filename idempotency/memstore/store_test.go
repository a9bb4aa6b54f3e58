package memstore_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
	"github.com/svcplatform/conventions/idempotency/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) driver.Store { return memstore.New(nil) })
}

func TestConformanceOneShard(t *testing.T) {
	// A single shard puts every key under one lock: the races are at their tightest.
	storetest.Run(t, func(*testing.T) driver.Store {
		return memstore.New(&memstore.Options{Shards: 1})
	})
}

func BenchmarkStore(b *testing.B) {
	// The write benchmarks keep about 20,000 records of one scope: the quota is raised above them, so
	// that the benchmark measures the quota's bookkeeping, not its refusals.
	storetest.RunBenchmarks(b, func(*testing.B) driver.Store {
		return memstore.New(&memstore.Options{MaxRecordsPerScope: 50_000})
	})
}

func TestBounds(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fp := driver.Fingerprint{1}
	key := func(i int) driver.Key { return driver.Key{Scope: "s", Key: strconv.Itoa(i)} }

	t.Run("records: full refuses, never evicts a live record", func(t *testing.T) {
		s := memstore.New(&memstore.Options{MaxRecords: 4, MaxRecordsPerScope: -1, Shards: 1})
		for i := range 4 {
			c, err := s.Claim(ctx, key(i), fp, base, base.Add(time.Minute), base.Add(time.Hour))
			require.NoError(t, err)
			require.Equal(t, driver.Claimed, c.Status)
		}
		_, err := s.Claim(ctx, key(4), fp, base, base.Add(time.Minute), base.Add(time.Hour))
		require.ErrorIs(t, err, memstore.ErrStoreFull)
		for i := range 4 {
			_, err := s.Lookup(ctx, key(i), base)
			require.NoError(t, err, "record %d must survive", i)
		}
		// Known keys still answer while full.
		c, err := s.Claim(ctx, key(0), fp, base, base.Add(time.Minute), base.Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, driver.InFlight, c.Status)
		// Once records expire, a full shard sweeps them out and accepts new claims.
		later := base.Add(2 * time.Hour)
		c, err = s.Claim(ctx, key(4), fp, later, later.Add(time.Minute), later.Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, driver.Claimed, c.Status)
		require.Equal(t, 1, s.Len())
	})

	t.Run("bytes: a large response over budget is refused, a small one accepted", func(t *testing.T) {
		s := memstore.New(&memstore.Options{MaxBytes: 8 << 10, Shards: 1})
		big := driver.Response{Status: 200, Body: make([]byte, 6<<10)}
		c0, err := s.Claim(ctx, key(0), fp, base, base.Add(time.Minute), base.Add(time.Hour))
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, key(0), c0.Token, big, base.Add(time.Hour)))
		c1, err := s.Claim(ctx, key(1), fp, base, base.Add(time.Minute), base.Add(time.Hour))
		require.NoError(t, err)
		require.ErrorIs(t, s.Complete(ctx, key(1), c1.Token, big, base.Add(time.Hour)), memstore.ErrStoreFull)
		// The claim is still owned: the caller can finish it with a short response.
		small := driver.Response{Status: 500, Header: http.Header{"Content-Type": {"application/problem+json"}}, Body: make([]byte, 200)}
		require.NoError(t, s.Complete(ctx, key(1), c1.Token, small, base.Add(time.Hour)))
		rec, err := s.Lookup(ctx, key(1), base)
		require.NoError(t, err)
		require.Equal(t, 500, rec.Response.Status)
		// Releasing the budget: after key 0 expires, a large response fits again.
		later := base.Add(2 * time.Hour)
		c2, err := s.Claim(ctx, key(2), fp, later, later.Add(time.Minute), later.Add(time.Hour))
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, key(2), c2.Token, big, later.Add(time.Hour)))
	})

	t.Run("claims drop expired records from the expiry queue", func(t *testing.T) {
		s := memstore.New(&memstore.Options{Shards: 1})
		for i := range 100 {
			c, err := s.Claim(ctx, key(i), fp, base, base.Add(time.Second), base.Add(time.Minute))
			require.NoError(t, err)
			require.NoError(t, s.Complete(ctx, key(i), c.Token, driver.Response{Status: 200}, base.Add(time.Minute)))
		}
		require.Equal(t, 100, s.Len())
		later := base.Add(2 * time.Minute)
		// Each claim drops a few: 25 new claims are enough to retire all 100 expired records.
		for i := range 25 {
			_, err := s.Claim(ctx, key(1000+i), fp, later, later.Add(time.Second), later.Add(time.Minute))
			require.NoError(t, err)
		}
		require.Equal(t, 25, s.Len())
	})

	t.Run("a record whose retention grew is requeued, not dropped", func(t *testing.T) {
		s := memstore.New(&memstore.Options{Shards: 1})
		// Claimed with a short retention, completed with a long one.
		c, err := s.Claim(ctx, key(0), fp, base, base.Add(time.Second), base.Add(time.Minute))
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, key(0), c.Token, driver.Response{Status: 201}, base.Add(time.Hour)))
		later := base.Add(2 * time.Minute)
		for i := range 10 {
			_, err := s.Claim(ctx, key(1+i), fp, later, later.Add(time.Second), later.Add(time.Minute))
			require.NoError(t, err)
		}
		rec, err := s.Lookup(ctx, key(0), later)
		require.NoError(t, err)
		require.Equal(t, 201, rec.Response.Status)
		// Once its own retention ends it goes, when the queue reaches it again.
		end := base.Add(2 * time.Hour)
		for i := range 10 {
			_, err := s.Claim(ctx, key(100+i), fp, end, end.Add(time.Second), end.Add(time.Minute))
			require.NoError(t, err)
		}
		require.Equal(t, 10, s.Len())
	})
}

// TestRecordHeap measures what a record costs the heap, so that the Store's docs state
// the real figure: 50,000 in-flight records with 36-byte keys under one 64-byte scope.
func TestRecordHeap(t *testing.T) {
	const n = 50_000
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	scope := strings.Repeat("s", 64)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%036d", i) // the size of a UUID key
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := memstore.New(&memstore.Options{MaxRecordsPerScope: -1})
	for _, k := range keys {
		_, err := s.Claim(ctx, driver.Key{Scope: scope, Key: k}, driver.Fingerprint{1}, now, now.Add(time.Minute), now.Add(time.Hour))
		require.NoError(t, err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perRecord := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("heap per in-flight record: %.0f B (keys and scope are the caller's strings)", perRecord)
	require.Equal(t, n, s.Len())
	require.Less(t, perRecord, 300.0, "the docs say about 200 B per record")
	runtime.KeepAlive(s)
}
