// Package memstore keeps idempotency records in memory. Its Store is the default of idempotency.New,
// and the right choice for a single replica, tests and examples. A service that sizes it itself:
//
//	store := memstore.New(&memstore.Options{
//		MaxRecords:         200_000, // in all: a claim past it gets ErrStoreFull (503), never an eviction
//		MaxRecordsPerScope: 10_000,  // per credential: a claim past it gets 429 idempotency_quota_exceeded
//	})
//	m, err := idempotency.New(&idempotency.Options{Store: store})
//	if err != nil {
//		return err
//	}
//	mux.Handle("POST /v1/orders", m.Handler(http.HandlerFunc(createOrder)))
//
// Without Options.Store, idempotency.New makes a memstore.New(nil) of its own, with the defaults
// (DefaultMaxRecords in all, a tenth of them per scope, DefaultMaxBytes of responses).
//
// Its records live in the process: they are lost when it exits, and replicas that share traffic
// must share a store instead (pgstore.IdempotencyStore, redisstore.IdempotencyStore). Store
// implements driver.Store (package idempotency/driver) and passes its conformance suite
// (idempotency/storetest), which its tests run under -race.
package memstore
