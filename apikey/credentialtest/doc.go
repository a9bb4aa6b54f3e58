// Package credentialtest is the conformance suite for apikey.CredentialStore implementations. Every
// implementation runs it under -race, the in-memory store and the PostgreSQL adapter alike.
//
// # Running it against your store
//
// Call Run from a test in your store's module, with a function that returns a fresh, empty store on
// every call (the suite's credentials have fixed IDs and hashes):
//
//	package mystore_test
//
//	import (
//		"testing"
//
//		"github.com/svcplatform/conventions/apikey"
//		"github.com/svcplatform/conventions/apikey/credentialtest"
//
//		"example.com/mystore"
//	)
//
//	func TestCredentialStore(t *testing.T) {
//		credentialtest.Run(t, func(t *testing.T) apikey.CredentialStore {
//			return mystore.NewCredentialStore(connect(t)) // connect: a fresh schema per call
//		})
//	}
//
// and then
//
//	go test -race ./...
//
// Each check is a subtest (TestCredentialStore/ConcurrentRevoke, …), and a failure is reported under
// its name, saying what was wanted and what came. The suite needs nothing but the standard library: it
// is written on package testing alone, so importing it adds no assertion library or other dependency
// to your module beyond this one. Credential and RequireSame are exported for a store's own further
// tests.
//
// # What it checks
//
// Put then Get round-trips every field (a zero ExpiresAt stays zero); unknown hashes and IDs are
// ErrCredentialNotFound; a duplicate ID or hash is ErrDuplicateCredential and stores nothing; an
// invalid credential is ErrInvalidCredential; Revoke and RevokeAll keep the earliest revocation
// instant and refuse the zero time; racing Puts of one ID have one winner and racing Revokes keep the
// earliest instant; a cancelled context is an error that never reads as an unknown key.
//
// The suite passes times truncated to microseconds, the precision PostgreSQL keeps, and compares them
// with time.Time.Equal, so a store may return them in any location. It never reads the clock.
package credentialtest
