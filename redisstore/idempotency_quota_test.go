package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/storetest"
	"github.com/svcplatform/conventions/redisstore"
	"github.com/svcplatform/conventions/redisstore/internal/redistest"
)

const idemQuota = 5

// newQuotaStore returns a store with a quota of idemQuota under the test's own key prefix.
func newQuotaStore(t *testing.T) (*redisstore.IdempotencyStore, *redis.Client, string) {
	t.Helper()
	client, prefix := redistest.Client(t)
	return mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix, MaxRecordsPerScope: idemQuota}), client, prefix
}

func TestIdempotencyQuotaConformance(t *testing.T) {
	storetest.RunQuota(t, idemQuota, func(t *testing.T) driver.Store {
		s, _, _ := newQuotaStore(t)
		return s
	})
}

// TestIdempotencyQuotaConformanceFull: a store with a quota still keeps the whole Store contract.
func TestIdempotencyQuotaConformanceFull(t *testing.T) {
	client, prefix := redistest.Client(t)
	// Run's scopes are random per subtest and hold a handful of records each; 1000 never binds.
	s := mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix, MaxRecordsPerScope: 1000})
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}

// idemTryClaim claims k at now and returns the error too.
func idemTryClaim(s driver.Store, k driver.Key, fp driver.Fingerprint, now time.Time) (driver.Claim, error) {
	return s.Claim(context.Background(), k, fp, now, now.Add(idemLease), now.Add(idemRetention))
}

// TestIdempotencyQuotaScopesIndependent: a scope at its quota costs other scopes nothing, whatever it
// does next, and refusals in it change nothing.
func TestIdempotencyQuotaScopesIndependent(t *testing.T) {
	s, _, _ := newQuotaStore(t)
	ctx := context.Background()
	fill := func(scope string) []driver.Claim {
		cs := make([]driver.Claim, idemQuota)
		for i := range cs {
			k := driver.Key{Scope: scope, Key: "k" + strconv.Itoa(i)}
			cs[i] = idemClaim(t, s, k, idemFP1, idemT0)
			require.Equal(t, driver.Claimed, cs[i].Status)
		}
		return cs
	}
	a := fill("tenant-a")
	over := driver.Key{Scope: "tenant-a", Key: "over"}
	for range 3 { // refusals are not counted either
		_, err := idemTryClaim(s, over, idemFP1, idemT0)
		require.ErrorIs(t, err, driver.ErrQuotaExceeded)
		require.ErrorContains(t, err, "MaxRecordsPerScope")
	}
	_, err := s.Lookup(ctx, over, idemT0)
	require.ErrorIs(t, err, driver.ErrNotFound, "a refused claim stores nothing")

	// Scope b has its whole quota, and its own limit.
	b := fill("tenant-b")
	_, err = idemTryClaim(s, driver.Key{Scope: "tenant-b", Key: "over"}, idemFP1, idemT0)
	require.ErrorIs(t, err, driver.ErrQuotaExceeded)

	// Completing and replaying in a changes nothing for either; a mismatch in a is a 422, not a 429.
	require.NoError(t, s.Complete(ctx, driver.Key{Scope: "tenant-a", Key: "k0"}, a[0].Token, driver.Response{Status: 200}, idemT0.Add(idemRetention)))
	require.Equal(t, driver.Completed, idemClaim(t, s, driver.Key{Scope: "tenant-a", Key: "k0"}, idemFP1, idemT0).Status)
	m := idemClaim(t, s, driver.Key{Scope: "tenant-a", Key: "k1"}, idemFP2, idemT0)
	require.Equal(t, idemFP1, m.Fingerprint)

	// A release in b frees a place in b only.
	require.NoError(t, s.Release(ctx, driver.Key{Scope: "tenant-b", Key: "k0"}, b[0].Token))
	_, err = idemTryClaim(s, over, idemFP1, idemT0)
	require.ErrorIs(t, err, driver.ErrQuotaExceeded)
	c, err := idemTryClaim(s, driver.Key{Scope: "tenant-b", Key: "over"}, idemFP1, idemT0)
	require.NoError(t, err)
	require.Equal(t, driver.Claimed, c.Status)

	// A third scope never touched either.
	c, err = idemTryClaim(s, driver.Key{Scope: "tenant-c", Key: "k"}, idemFP1, idemT0)
	require.NoError(t, err)
	require.Equal(t, driver.Claimed, c.Status)
}

// TestIdempotencyQuotaFollowsRetention: a record holds its place exactly while it is live (ExpiresAt
// > now), with the retention Complete gave it, not the one it was claimed with; and the quota set
// lives at least as long as its longest member.
func TestIdempotencyQuotaFollowsRetention(t *testing.T) {
	s, client, prefix := newQuotaStore(t)
	ctx := context.Background()
	const scope = "tenant"
	key := func(i int) driver.Key { return driver.Key{Scope: scope, Key: "k" + strconv.Itoa(i)} }
	short := idemT0.Add(time.Minute)
	long := idemT0.Add(48 * time.Hour)
	// k0 is claimed for a minute and completed for 48 h; k1 the other way round; k2..k4 last a minute.
	for i := range idemQuota {
		exp := short
		if i == 1 {
			exp = long
		}
		c, err := s.Claim(ctx, key(i), idemFP1, idemT0, idemT0.Add(idemLease), exp)
		require.NoError(t, err)
		require.Equal(t, driver.Claimed, c.Status)
		switch i {
		case 0:
			require.NoError(t, s.Complete(ctx, key(i), c.Token, driver.Response{Status: 200}, long))
		case 1:
			require.NoError(t, s.Complete(ctx, key(i), c.Token, driver.Response{Status: 200}, short))
		}
	}
	fresh := func(n int) driver.Key { return driver.Key{Scope: scope, Key: "fresh" + strconv.Itoa(n)} }

	// One nanosecond before the minute is over, all five are live.
	_, err := idemTryClaim(s, fresh(0), idemFP1, short.Add(-time.Nanosecond))
	require.ErrorIs(t, err, driver.ErrQuotaExceeded)
	// At the minute, four are gone (ExpiresAt <= now) and only k0, completed for 48 h, counts.
	for i := range idemQuota - 1 {
		c, err := idemTryClaim(s, fresh(i), idemFP1, short)
		require.NoError(t, err, "place %d", i)
		require.Equal(t, driver.Claimed, c.Status)
	}
	_, err = idemTryClaim(s, fresh(idemQuota), idemFP1, short)
	require.ErrorIs(t, err, driver.ErrQuotaExceeded, "k0 holds its place for its completed retention")

	// A key whose record expired is claimed anew as a new record: it needs a place, and there is none.
	_, err = idemTryClaim(s, key(2), idemFP1, short)
	require.ErrorIs(t, err, driver.ErrQuotaExceeded)

	// The set outlives every member: its TTL is at least k0's, the longest.
	base := idemKeyBase(prefix, scope)
	setTTL, err := client.PTTL(ctx, base+"-quota").Result()
	require.NoError(t, err)
	recTTL, err := client.PTTL(ctx, base+":k0").Result()
	require.NoError(t, err)
	require.Greater(t, recTTL, 47*time.Hour)
	require.GreaterOrEqual(t, setTTL, recTTL)
}

// TestIdempotencyQuotaTakeOverNeedsNoPlace: taking over a lapsed lease replaces a record, it does not
// add one, so a scope at its quota still recovers its abandoned keys.
func TestIdempotencyQuotaTakeOverNeedsNoPlace(t *testing.T) {
	s, _, _ := newQuotaStore(t)
	keys := make([]driver.Key, idemQuota)
	for i := range keys {
		keys[i] = driver.Key{Scope: "tenant", Key: "k" + strconv.Itoa(i)}
		require.Equal(t, driver.Claimed, idemClaim(t, s, keys[i], idemFP1, idemT0).Status)
	}
	for _, k := range keys {
		require.Equal(t, driver.InFlight, idemClaim(t, s, k, idemFP1, idemT0.Add(idemLease)).Status, "marked")
		require.Equal(t, driver.Claimed, idemClaim(t, s, k, idemFP1, idemT0.Add(2*idemLease)).Status, "taken over")
	}
	_, err := idemTryClaim(s, driver.Key{Scope: "tenant", Key: "new"}, idemFP1, idemT0.Add(2*idemLease))
	require.ErrorIs(t, err, driver.ErrQuotaExceeded, "take-overs did not free or take places")
}

// TestIdempotencyNoQuotaNoSet: without a quota the store keeps no count, so a store that never asked
// for one pays nothing for it.
func TestIdempotencyNoQuotaNoSet(t *testing.T) {
	client, prefix := redistest.Client(t)
	s := mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix})
	ctx := context.Background()
	k := driver.Key{Scope: "tenant", Key: "k"}
	c := idemClaim(t, s, k, idemFP1, idemT0)
	require.NoError(t, s.Complete(ctx, k, c.Token, driver.Response{Status: 200}, idemT0.Add(idemRetention)))
	n, err := client.Exists(ctx, idemKeyBase(prefix, k.Scope)+"-quota").Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestIdempotencyQuotaSharedAcrossReplicas: replicas configured alike share one count, and one
// without a quota still keeps the count right for the records it completes or releases.
func TestIdempotencyQuotaSharedAcrossReplicas(t *testing.T) {
	client, prefix := redistest.Client(t)
	ctx := context.Background()
	a := mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix, MaxRecordsPerScope: 2})
	b := mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix, MaxRecordsPerScope: 2})
	plain := mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix})
	k := func(name string) driver.Key { return driver.Key{Scope: "tenant", Key: name} }
	c1 := idemClaim(t, a, k("1"), idemFP1, idemT0)
	idemClaim(t, b, k("2"), idemFP1, idemT0)
	_, err := idemTryClaim(a, k("3"), idemFP1, idemT0)
	require.ErrorIs(t, err, driver.ErrQuotaExceeded)
	// A release through the store without a quota gives the place back.
	require.NoError(t, plain.Release(ctx, k("1"), c1.Token))
	c3, err := idemTryClaim(b, k("3"), idemFP1, idemT0)
	require.NoError(t, err)
	// A completion through it moves the record's end: completed for a minute, its place is free after.
	require.NoError(t, plain.Complete(ctx, k("3"), c3.Token, driver.Response{Status: 200}, idemT0.Add(time.Minute)))
	_, err = idemTryClaim(a, k("4"), idemFP1, idemT0.Add(time.Minute-time.Millisecond))
	require.ErrorIs(t, err, driver.ErrQuotaExceeded)
	_, err = idemTryClaim(a, k("4"), idemFP1, idemT0.Add(time.Minute))
	require.NoError(t, err)
}

// BenchmarkIdempotencyStoreQuota: the same operations with the quota's bookkeeping in every claim. The
// benchmarks hold about 20,000 live records in one scope, so a quota of 50,000 counts without binding.
func BenchmarkIdempotencyStoreQuota(b *testing.B) {
	storetest.RunBenchmarks(b, func(b *testing.B) driver.Store {
		client, prefix := redistest.Client(b)
		return mustIdemStore(b, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix, MaxRecordsPerScope: 50_000})
	})
}
