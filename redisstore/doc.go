// Package redisstore implements the library's storage interfaces on Redis with go-redis v9, for teams
// that run several replicas:
//
//   - IdempotencyStore (idempotency/driver.Store): one round trip to claim (a Lua script issuing a
//     fencing token), one to complete, one for a replay; lease renewal and release only by the owner;
//     a lapsed lease taken over only after one extra lease; an optional per-scope quota
//     (IdempotencyStoreOptions.MaxRecordsPerScope) that a Redis shared by tenants should set.
//   - CursorStore (webhook.CursorStore): a consumer's per-stream position, advanced atomically.
//   - PortalStore (portal.Store): the webhook portal's one-time links and browser sessions, each a
//     key with Redis's TTL, read back only before its ExpiresAt; a link is taken with GETDEL (Redis
//     6.2 or later), so it opens one session whichever replicas race for it.
//
// Stores take a redis.UniversalClient the caller owns (single node, sentinel or cluster) and never
// close it. Keys carry a configurable prefix and a hash tag so that the keys of one scope stay in one
// cluster slot; expiry is Redis's own TTL. No store reads the clock.
//
// # What the Redis must promise
//
// An idempotency record is only as durable as the Redis that holds it, and a record that is lost lets
// a retry of its request run the handler again. So:
//
//   - Eviction. NewIdempotencyStore reads maxmemory-policy (CONFIG GET, on every master of a
//     cluster) and returns an error unless it is noeviction: under any other policy Redis deletes
//     records when memory runs short, and an evicted completed record lets a retry run its handler a
//     second time. Fix the server (CONFIG SET maxmemory-policy noeviction, and the same line in
//     redis.conf), or accept the risk explicitly with IdempotencyStoreOptions.AllowEviction, which is also
//     the way past a managed Redis that refuses CONFIG once its policy is confirmed another way.
//   - A full Redis. Under noeviction a Redis out of memory answers OOM errors instead of dropping
//     data: new keys cannot be claimed and completions fail, while completed records still replay.
//     The middleware answers 503 (with Retry-After) to new requests and keeps retrying the
//     completions it holds, so nothing runs twice; MaxRecordsPerScope keeps one tenant from being
//     the cause.
//   - Persistence. With AOF (appendonly yes) a restarted Redis keeps its records: appendfsync
//     everysec loses at most about the last second of writes in a crash, appendfsync always none
//     that were acknowledged. A Redis restarted without persistence has forgotten every record, so
//     every key that was in flight or completed before the restart runs its handler again when it is
//     retried. Run the store on Redis with AOF, or keep idempotency records in PostgreSQL
//     (pgstore).
//
// A PortalStore asks less: a link or a session Redis forgets costs a visitor a new link, never access
// (see PortalStore for what a failover costs).
//
// # Example
//
//	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs})
//	store, err := redisstore.NewIdempotencyStore(ctx, rdb, &redisstore.IdempotencyStoreOptions{
//		MaxRecordsPerScope: 100_000, // tenants share this Redis
//	})
//	if err != nil {
//		return err // e.g. maxmemory-policy allkeys-lru: fix the server, do not run on it
//	}
//	mw, err := idempotency.New(&idempotency.Options{Store: store})
//	if err != nil {
//		return err
//	}
//	mux.Handle("POST /v1/orders", mw.Handler(createOrder))
package redisstore
