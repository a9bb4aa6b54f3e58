// Package storetest is the conformance suite of driver.Store (package idempotency/driver): the Store
// contract written as tests. Every implementation runs it, the in-memory store and the PostgreSQL and
// Redis adapters alike, and so should yours.
//
// # Running it against your store
//
// Call Run from a test in your store's module, with a function that returns the store for one subtest
// (a fresh one, or the same one every time: the suite's keys never meet):
//
//	package mystore_test
//
//	import (
//		"testing"
//
//		"github.com/svcplatform/conventions/idempotency/driver"
//		"github.com/svcplatform/conventions/idempotency/storetest"
//
//		"example.com/mystore"
//	)
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) driver.Store {
//			return mystore.New(connect(t)) // connect: your test's own database or key prefix
//		})
//	}
//
//	func BenchmarkStore(b *testing.B) {
//		storetest.RunBenchmarks(b, func(b *testing.B) driver.Store {
//			return mystore.New(connect(b))
//		})
//	}
//
// and then
//
//	go test -race ./...
//
// Each check is a subtest of TestConformance (TestConformance/ClaimRace, …): go test -run selects
// them, and a failure is reported under the subtest's name, saying what was wanted and what came.
// The suite needs nothing but the standard library: it is written on package testing alone, so
// importing it adds no assertion library or other dependency to your module beyond this one, which a
// Store implementation imports anyway.
//
// More suites cover what not every store offers: RunExact (the contract at the backend's full time
// resolution, with exact comparisons), RunRacingClaims, RunQuota (a per-scope record limit),
// RunOutage (a backend cut off between claim and completion) and RunReplicas (several middleware
// replicas sharing a real backend, exactly once).
//
// # What Run checks
//
// Claims are decided atomically (many goroutines racing on one key see exactly one Claimed, also when
// taking over an expired lease); the fingerprint is checked on every path (in flight, expired lease,
// completed) and a mismatch changes nothing; an expired lease is taken over with a new token and the
// old token can no longer Renew, Complete or Release (fencing), nor can a token that completed or
// released; a lapsed lease is first only marked suspected and extended once (its owner may only have
// been cut off from the store), and a renewal clears the mark; records whose ExpiresAt <= now are
// absent to Claim and Lookup; Release frees a key at once; status, headers and bodies up to 1 MiB
// round-trip; a cancelled context or a passed deadline yields an error and no claim; scopes never see
// each other's records.
//
// The suite is safe against shared, long-lived servers: every test uses scopes and keys that are
// random per run, times are a base near the real clock (truncated to the millisecond) plus fixed
// offsets, and no test relies on the backend's own clock or TTLs: retention is checked by passing a
// later now. Times are compared with a millisecond's tolerance, so a backend may store them at
// millisecond precision or finer. newStore is called once per subtest. Subtests run in parallel.
package storetest
