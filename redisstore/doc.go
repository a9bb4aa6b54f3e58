// Package redisstore implements the library's storage interfaces on Redis with go-redis v9, for teams
// that run several replicas. Stores take a redis.UniversalClient the caller owns (single node, sentinel
// or cluster) and never close it. Keys carry a configurable prefix and a hash tag so that the keys of
// one scope stay in one cluster slot; expiry is Redis's own TTL. No store reads the clock.
package redisstore
