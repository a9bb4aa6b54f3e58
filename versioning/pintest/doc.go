// Package pintest is the conformance suite of versioning.PinStore: the PinStore contract written as
// tests. Every implementation runs it, the in-memory store and the PostgreSQL adapter alike, under
// -race.
//
// # Running it against your store
//
// Call Run from a test in your store's module, with a function that returns the store for one subtest
// (a fresh one, or the same one every time: the suite's licensees never meet):
//
//	package mystore_test
//
//	import (
//		"testing"
//
//		"github.com/svcplatform/conventions/versioning"
//		"github.com/svcplatform/conventions/versioning/pintest"
//
//		"example.com/mystore"
//	)
//
//	func TestPinStore(t *testing.T) {
//		pintest.Run(t, func(t *testing.T) versioning.PinStore {
//			return mystore.NewPinStore(connect(t)) // connect: your test's own database
//		})
//	}
//
// and then
//
//	go test -race ./...
//
// Each check is a subtest (TestPinStore/SetIfAbsentRace, …), and a failure is reported under its name,
// saying what was wanted and what came. The suite needs nothing but the standard library: it is
// written on package testing alone, so importing it adds no assertion library or other dependency to
// your module beyond this one.
//
// # What it checks
//
// An unpinned licensee is ErrNotPinned; SetIfAbsent creates exactly once, also when many goroutines
// race on one licensee, and otherwise returns the pin in force unchanged; CompareAndSwap moves a pin
// only from the expected version (ErrPinConflict otherwise, ErrNotPinned for none), exactly once under
// a race; a pin's Previous is "" until it moves, then the version its last move came from, in the
// swap's result and in every Get and List after it, kept by a swap to the same version, a conflict
// and SetIfAbsent, and forgotten by Delete; Delete removes (and is a no-op when there is nothing); List filters by version and pages by
// licensee in byte order with an exclusive cursor; licensees that differ only in case, accents, or LIKE
// and separator characters never see each other's pins; a cancelled context is an error and stores
// nothing. The suite calls a store only as the Router does (see versioning.PinStore): a store need
// not check its arguments, and the suite does not ask it to.
//
// The suite is safe against shared, long-lived stores: every test uses licensees with a random
// prefix, and the List tests use a random version number, so other data never shows up in what a
// test checks. Times are a base near the real clock (truncated to the millisecond) plus fixed
// offsets, compared with a millisecond's tolerance. newStore is called once per subtest. Subtests run
// in parallel.
package pintest
