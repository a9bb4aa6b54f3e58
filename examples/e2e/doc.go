// Package e2e holds the examples' end-to-end tests: they build the real orderserver and consumer
// binaries, start them as processes on loopback, and check the reference server's HTTP contract with
// a plain net/http client — statuses, problem bodies, idempotent replays, tenant isolation, sandbox
// controls, signed range retrieval, and webhook delivery with gap recovery under injected faults.
// With SVC_TEST_POSTGRES_DSN (and SVC_TEST_REDIS_URL) set, they also run two replicas on a shared
// PostgreSQL (and Redis) and check that each recognises the other's keys and idempotency records.
package e2e
