package redisstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/storetest"
	"github.com/svcplatform/conventions/redisstore"
	"github.com/svcplatform/conventions/redisstore/internal/redistest"
)

// TestIdempotencyCluster runs the Store contract and the quota through a Redis Cluster of three
// masters of the test's own: every script touches a record, its scope's counter and its quota set,
// which only works because all three share the scope's hash tag (a cluster refuses a script whose
// keys span slots). It also shows that NewIdempotencyStore checks every master's eviction policy.
func TestIdempotencyCluster(t *testing.T) {
	nodes := redistest.StartCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 64})
	t.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()

	t.Run("conformance", func(t *testing.T) {
		s := mustIdemStore(t, client, nil)
		storetest.Run(t, func(*testing.T) driver.Store { return s })
	})
	t.Run("quota", func(t *testing.T) {
		storetest.RunQuota(t, idemQuota, func(t *testing.T) driver.Store {
			return mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: "quota:", MaxRecordsPerScope: idemQuota})
		})
	})
	t.Run("scopes spread over the masters", func(t *testing.T) {
		// Enough scopes that every master holds some, so the suites above ran on all three.
		s := mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: "spread:", MaxRecordsPerScope: idemQuota})
		for i := range 64 {
			k := driver.Key{Scope: "tenant-" + strconv.Itoa(i), Key: "k"}
			require.Equal(t, driver.Claimed, idemClaim(t, s, k, idemFP1, idemT0).Status)
		}
		for _, n := range nodes {
			c := redis.NewClient(&redis.Options{Addr: n.Addr})
			size, err := c.DBSize(ctx).Result()
			_ = c.Close()
			require.NoError(t, err)
			require.Positive(t, size, "master %s holds no keys", n.Addr)
		}
	})

	// Not parallel with the suites above: it changes the masters' policy.
	t.Run("every master is checked", func(t *testing.T) {
		setPolicy := func(addr, policy string) {
			c := redis.NewClient(&redis.Options{Addr: addr})
			defer c.Close()
			require.NoError(t, c.ConfigSet(ctx, "maxmemory-policy", policy).Err())
		}
		for _, bad := range nodes {
			setPolicy(bad.Addr, "volatile-lru")
			_, err := redisstore.NewIdempotencyStore(ctx, client, nil)
			require.ErrorIs(t, err, redisstore.ErrEvictionPolicy, "master %s", bad.Addr)
			require.ErrorContains(t, err, bad.Addr)
			require.ErrorContains(t, err, "volatile-lru")
			for _, good := range nodes {
				if good != bad {
					require.NotContains(t, err.Error(), good.Addr)
				}
			}
			setPolicy(bad.Addr, "noeviction")
		}
		// Two at once: one start-up names both.
		setPolicy(nodes[0].Addr, "allkeys-lru")
		setPolicy(nodes[2].Addr, "allkeys-lfu")
		_, err := redisstore.NewIdempotencyStore(ctx, client, nil)
		require.ErrorContains(t, err, nodes[0].Addr+" db:0> runs with maxmemory-policy allkeys-lru")
		require.ErrorContains(t, err, nodes[2].Addr+" db:0> runs with maxmemory-policy allkeys-lfu")
		_, err = redisstore.NewIdempotencyStore(ctx, client, &redisstore.IdempotencyStoreOptions{AllowEviction: true})
		require.NoError(t, err)
	})
}
