package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/redisstore"
)

// Every replica runs the same code against the same Redis (a single node, sentinel or a cluster: the
// store takes any UniversalClient): an Idempotency-Key is honoured whichever replica each retry
// reaches. Each claim, completion and replay is one round trip. The Redis must run with
// maxmemory-policy noeviction and, to survive a restart, with AOF (see IdempotencyStore).
func ExampleNewIdempotencyStore() {
	ctx := context.Background()
	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
	defer client.Close() // the application owns the client; the store never closes it
	store, err := redisstore.NewIdempotencyStore(ctx, client, &redisstore.IdempotencyStoreOptions{
		Prefix:             "orders-api:",
		MaxRecordsPerScope: 100_000, // tenants share this Redis: none may fill it for the others
	})
	if err != nil {
		// For instance: the Redis may evict records (maxmemory-policy allkeys-lru). Fix the server;
		// running on it would let evicted keys run twice.
		log.Fatal(err)
	}
	mw, err := idempotency.New(&idempotency.Options{Store: store})
	if err != nil {
		log.Fatal(err)
	}

	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprint(w, `{"id":"ord_1"}`)
	})
	http.Handle("POST /v1/orders", mw.Handler(createOrder))
	log.Fatal(http.ListenAndServe(":8080", nil))
}
