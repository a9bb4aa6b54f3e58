package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/svcplatform/conventions/idempotency/storetest"
	"github.com/svcplatform/conventions/internal/testkit/faultproxy"
	"github.com/svcplatform/conventions/redisstore"
	"github.com/svcplatform/conventions/redisstore/internal/redistest"
)

// TestIdempotencyOutageBetweenClaimAndComplete: Redis becomes unreachable between the claim and the completion (a proxy
// cuts every connection), shorter and longer than the lease, and stalls: the handler runs once, the
// response is stored when Redis is back, and a stalled Redis costs a 503 after StoreTimeout.
func TestIdempotencyOutageBetweenClaimAndComplete(t *testing.T) {
	storetest.RunOutage(t, func(t *testing.T) storetest.OutageBackend {
		direct, prefix := redistest.Client(t)
		proxy := faultproxy.Start(t, direct.Options().Addr)
		opts := *direct.Options()
		opts.Addr = proxy.Addr()
		opts.MaxRetries = -1 // every failure reaches the store, as it would after go-redis's retries
		client := redis.NewClient(&opts)
		t.Cleanup(func() { _ = client.Close() })
		return storetest.OutageBackend{
			Store:   mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix}),
			Cut:     proxy.Cut,
			Stall:   proxy.Stall,
			Restore: func() { proxy.Resume(); proxy.Restore() },
		}
	})
}
