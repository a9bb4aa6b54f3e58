// Package cursortest is the conformance suite for webhook.CursorStore implementations. Every store —
// the in-memory one, PostgreSQL, Redis, or your own — runs it under -race:
//
//	func TestCursorStore(t *testing.T) {
//		cursortest.Run(t, func(t *testing.T) webhook.CursorStore {
//			return mystore.New(…) // a fresh, empty store for each subtest
//		})
//	}
//
// It checks the contract the Tracker relies on: 0 for an unknown stream, a compare-and-set Advance
// that changes nothing on conflict, arguments refused before storage is touched, streams kept apart,
// the full sequence range, exactly one winner when deliveries race, and no lost update under
// contention.
package cursortest
