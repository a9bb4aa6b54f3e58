package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/storetest"
	"github.com/svcplatform/conventions/redisstore"
)

// TestIdempotencyReplicas runs the exactly-once-across-replicas tests (storetest.RunReplicas) on a
// real Redis: every replica's middleware uses an IdempotencyStore under the test's own key prefix.
func TestIdempotencyReplicas(t *testing.T) {
	storetest.RunReplicas(t, storetest.ReplicaConfig{Modes: []storetest.ReplicaMode{{
		Name: "store",
		Setup: func(t *testing.T) storetest.ReplicaBackend {
			store, _ := newIdemStore(t)
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
			return &idempotency.Options{Store: mustIdemStore(t, client, &redisstore.IdempotencyOptions{AllowEviction: true})}
		},
	}}})
}
