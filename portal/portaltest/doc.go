// Package portaltest is the conformance suite for portal.Store implementations. Every store — the
// in-memory portal.MemoryStore, pgstore.PortalStore, redisstore.PortalStore, or your own — runs it
// under -race.
//
// # Running it against your store
//
// Call Run from a test in your store's module, with a function that returns a store for each
// subtest:
//
//	package mystore_test
//
//	import (
//		"testing"
//
//		"github.com/svcplatform/conventions/portal"
//		"github.com/svcplatform/conventions/portal/portaltest"
//
//		"example.com/mystore"
//	)
//
//	func TestPortalStore(t *testing.T) {
//		portaltest.Run(t, func(t *testing.T) portal.Store {
//			return mystore.NewPortalStore(connect(t)) // connect: a schema or key prefix of the test's own
//		})
//	}
//
// and then
//
//	go test -race ./...
//
// Each check is a subtest (TestPortalStore/ConcurrentTake, …), and a failure is reported under its
// name, saying what was wanted and what came. Every subtest uses keys of its own, drawn afresh at
// each Run, so newStore may return a fresh store or the same one each time. The suite needs nothing
// but the standard library: it is written on package testing alone, so importing it adds no
// assertion library or other dependency to your module beyond this one.
//
// # What it checks
//
// Put then Get, and Put then Take, round-trip every field of a Session, in both environments;
// Permissions keep their nil-ness: nil (the full key's permissions) comes back nil, and an empty,
// non-nil slice (no permission at all) comes back empty and non-nil — a store that turned it into
// nil would give a key with no permission every permission. The store keeps its own copy of the
// permissions, and hands out copies. Put replaces everything a key held, its expiry included; Get
// and Take of a key that holds nothing are portal.ErrNotFound, Delete of one is no error. An entry
// has expired when now is at or after its ExpiresAt: Get and Take then return ErrNotFound, to the
// microsecond, and an entry Put with an ExpiresAt at or before the Put's now (the zero time too) is
// never found. Take removes what it returns; of many goroutines that Take one key at once exactly
// one gets the session and the others ErrNotFound. Keys that differ in one digit are apart. A
// cancelled or expired context makes every method return an error, promptly, and changes nothing;
// for Get and Take the error is never ErrNotFound, which would read as an unknown link rather than
// a store that failed.
//
// # Keys and time
//
// Keys are what a Portal passes: 64 lowercase hexadecimal digits (a SHA-256). The suite uses no other
// shape, so a store may rely on it (and keep keys as 32 bytes, say).
//
// The suite never sleeps. Each subtest reads the real clock once, truncated to the microsecond (the
// precision PostgreSQL keeps; times are compared with time.Time.Equal, so a store may return them in
// any location), and passes instants relative to it as now. Entries meant to live expire an hour or
// more after it, so a store that also expires entries by a clock of its own — Redis's TTL, computed
// from ExpiresAt − now at Put — keeps them for the whole subtest; entries meant to have expired on
// arrival expire at now, a microsecond or a day before it, or at the zero time, which no clock
// mistakes for the future. Expiry at an exact instant is checked by passing a later now to Get and
// Take, never by waiting: a store must compare ExpiresAt with the now it is given, whatever else
// (a TTL) it also keeps.
package portaltest
