package redisstore_test

import (
	"fmt"
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/redisstore"
)

// Every replica runs the same code against the same Redis (a single node, sentinel or a cluster: the
// store takes any UniversalClient): an Idempotency-Key is honoured whichever replica each retry
// reaches. Each claim, completion and replay is one round trip.
func ExampleNewIdempotencyStore() {
	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
	defer client.Close() // the application owns the client; the store never closes it
	store := redisstore.NewIdempotencyStore(client, &redisstore.IdempotencyOptions{Prefix: "orders-api:"})
	mw := idempotency.New(&idempotency.Options{Store: store})

	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprint(w, `{"id":"ord_1"}`)
	})
	http.Handle("POST /v1/orders", mw.Handler(createOrder))
	log.Fatal(http.ListenAndServe(":8080", nil))
}
