// Package redisstore implements the library's storage interfaces on Redis with go-redis v9, for teams
// that run several replicas:
//
//   - IdempotencyStore (idempotency.Store): one round trip to claim (a Lua script issuing a fencing
//     token), one to complete, one for a replay; lease renewal and release only by the owner.
//   - CursorStore (webhook.CursorStore): a consumer's per-stream position, advanced atomically.
//
// Stores take a redis.UniversalClient the caller owns (single node, sentinel or cluster) and never
// close it. Keys carry a configurable prefix and a hash tag so that the keys of one scope stay in one
// cluster slot; expiry is Redis's own TTL. No store reads the clock.
package redisstore
