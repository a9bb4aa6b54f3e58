package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/storetest"
	"github.com/svcplatform/conventions/redisstore"
	"github.com/svcplatform/conventions/redisstore/internal/redistest"
)

// patience is how long a wait may last in a test that asserts counts, not speed: most of what is left
// before the test binary's -timeout, or an hour without one.
func patience(t *testing.T) time.Duration {
	if deadline, ok := t.Deadline(); ok {
		return max(time.Until(deadline)*9/10, time.Second)
	}
	return time.Hour
}

// TestIdempotencyReplicas runs the exactly-once-across-replicas tests (storetest.RunReplicas) on a
// real Redis: every replica's middleware uses an IdempotencyStore under the test's own key prefix.
func TestIdempotencyReplicas(t *testing.T) {
	storetest.RunReplicas(t, storetest.ReplicaConfig{Modes: []storetest.ReplicaMode{{
		Name: "store",
		Setup: func(t *testing.T) storetest.ReplicaBackend {
			direct, prefix := redistest.Client(t)
			// 500 requests share the pool: on a busy machine a wait for a connection or a reply can
			// pass go-redis's few seconds and turn into a 503 that fails a count. The test asserts
			// counts, so no wait here has a deadline short of the test binary's -timeout.
			opts := *direct.Options()
			opts.PoolTimeout = patience(t)
			opts.ReadTimeout, opts.WriteTimeout = opts.PoolTimeout, opts.PoolTimeout
			client := redis.NewClient(&opts)
			t.Cleanup(func() { _ = client.Close() })
			store := mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix})
			return storetest.ReplicaBackend{
				Options: func() *idempotency.Options { return &idempotency.Options{Store: store} },
				Store:   store,
			}
		},
		// The shared server is left alone: the client points at a closed port.
		Unreachable: func(t *testing.T) *idempotency.Options {
			client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second,
				DialerRetries: 1, DialerRetryTimeout: time.Microsecond})
			t.Cleanup(func() { _ = client.Close() })
			// Nothing answers to check the eviction policy of; the point is the methods' failures.
			return &idempotency.Options{Store: mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{AllowEviction: true})}
		},
	}}})
}
