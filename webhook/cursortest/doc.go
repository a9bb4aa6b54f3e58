// Package cursortest is the conformance suite for webhook.CursorStore implementations. Every store —
// the in-memory one, PostgreSQL, Redis, or your own — runs it under -race.
//
// # Running it against your store
//
// Call Run from a test in your store's module, with a function that returns a fresh, empty store for
// each subtest (a new schema, key prefix or instance):
//
//	package mystore_test
//
//	import (
//		"testing"
//
//		"github.com/svcplatform/conventions/webhook"
//		"github.com/svcplatform/conventions/webhook/cursortest"
//
//		"example.com/mystore"
//	)
//
//	func TestCursorStore(t *testing.T) {
//		cursortest.Run(t, func(t *testing.T) webhook.CursorStore {
//			return mystore.NewCursorStore(connect(t)) // connect: a fresh schema or key prefix per call
//		})
//	}
//
// and then
//
//	go test -race ./...
//
// Each check is a subtest (TestCursorStore/NoLostUpdateUnderContention, …), and a failure is reported
// under its name, saying what was wanted and what came. The suite needs nothing but the standard
// library: it is written on package testing alone, so importing it adds no assertion library or other
// dependency to your module beyond this one.
//
// # What it checks
//
// The contract the Tracker relies on: 0 for an unknown stream, a compare-and-set Advance that changes
// nothing on conflict, streams kept apart, the full sequence range, exactly one winner when
// deliveries race, and no lost update under contention. The suite only asks a store for moves
// forward, to at most MaxSequence, as the Tracker does (see webhook.CursorStore): a store need not
// check its arguments, and the suite does not ask it to.
package cursortest
