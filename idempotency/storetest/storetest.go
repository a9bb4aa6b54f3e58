package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/internal/randid"
)

// Offsets from a test's base time.
const (
	lease     = 30 * time.Second
	retention = 24 * time.Hour
	// tolerance is how far a stored time may drift in a round trip.
	tolerance = time.Millisecond
)

// Race sizes: enough goroutines to make a check-then-act window show up under -race on two cores,
// few enough that a real server answers them in well under a second.
const racers = 64

// Run runs the conformance suite against the stores newStore returns.
func Run(t *testing.T, newStore func(t *testing.T) driver.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s driver.Store)
	}{
		{"ClaimNewKey", testClaimNewKey},
		{"InFlightWhileLeaseLive", testInFlight},
		{"LeaseBoundaryIsExpired", testLeaseBoundary},
		{"CompleteThenReplay", testCompleteThenReplay},
		{"FingerprintMismatchInFlight", testMismatchInFlight},
		{"FingerprintMismatchExpiredLease", testMismatchExpiredLease},
		{"FingerprintMismatchCompleted", testMismatchCompleted},
		{"LeaseExpiryTakeOver", testTakeOver},
		{"SuspicionClearedByRenew", testSuspicionClearedByRenew},
		{"SuspectedOwnerCompletes", testSuspectedOwnerCompletes},
		{"ContextDeadline", testContextDeadline},
		{"RenewExtendsLease", testRenew},
		{"FencingAfterTakeOver", testFencingAfterTakeOver},
		{"FencingAfterComplete", testFencingAfterComplete},
		{"FencingAfterRelease", testFencingAfterRelease},
		{"UnknownKeyOrToken", testUnknown},
		{"TokensNeverRepeat", testTokensNeverRepeat},
		{"RetentionCompleted", testRetentionCompleted},
		{"RetentionInFlight", testRetentionInFlight},
		{"CompleteSetsRetention", testCompleteSetsRetention},
		{"Release", testRelease},
		{"LargeBody", testLargeBody},
		{"ResponseRoundTrip", testResponseRoundTrip},
		{"ResponseNotAliased", testResponseNotAliased},
		{"ContextCancelled", testContextCancelled},
		{"ScopesIsolated", testScopesIsolated},
		{"KeysWithSeparators", testKeysWithSeparators},
		{"ClaimRace", testClaimRace},
		{"TakeOverRace", testTakeOverRace},
		{"CompletedRace", testCompletedRace},
		{"ManyKeysConcurrently", testManyKeys},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// env is one test's base time, scope and helpers.
type env struct {
	t     *testing.T
	ctx   context.Context
	base  time.Time
	scope string
}

func newEnv(t *testing.T) *env {
	return &env{
		t:     t,
		ctx:   context.Background(),
		base:  time.Now().UTC().Truncate(time.Millisecond),
		scope: randid.New("scope_"),
	}
}

func (e *env) key() driver.Key { return driver.Key{Scope: e.scope, Key: randid.New("key_")} }

func (e *env) at(d time.Duration) time.Time { return e.base.Add(d) }

func fp(s string) driver.Fingerprint { return sha256.Sum256([]byte(s)) }

// claim claims key at base+off with the default lease and retention.
func (e *env) claim(s driver.Store, key driver.Key, f driver.Fingerprint, off time.Duration) driver.Claim {
	e.t.Helper()
	c, err := s.Claim(e.ctx, key, f, e.at(off), e.at(off+lease), e.at(off+retention))
	check.NoError(e.t, err)
	return c
}

func (e *env) mustClaim(s driver.Store, key driver.Key, f driver.Fingerprint, off time.Duration) driver.Claim {
	e.t.Helper()
	c := e.claim(s, key, f, off)
	check.Equal(e.t, driver.Claimed, c.Status, "claim at +%v", off)
	check.Equal(e.t, f, c.Fingerprint)
	requireTime(e.t, e.at(off+lease), c.LeaseUntil, "Claim.LeaseUntil")
	return c
}

// takeOver takes key over from an owner whose lease ended at or before base+off: the first claim only
// marks the record suspected and extends its lease (the owner may merely have been cut off from the
// store), the claim after that extra lease takes the key. It returns the winning claim, made at
// base+off+lease.
func (e *env) takeOver(s driver.Store, key driver.Key, f driver.Fingerprint, off time.Duration) driver.Claim {
	e.t.Helper()
	warn := e.claim(s, key, f, off)
	check.Equal(e.t, driver.InFlight, warn.Status, "the first claim after a lapsed lease only marks the record (at +%v)", off)
	requireTime(e.t, e.at(off+lease), warn.LeaseUntil, "LeaseUntil after the mark")
	return e.mustClaim(s, key, f, off+lease)
}

func (e *env) lookup(s driver.Store, key driver.Key, off time.Duration) driver.Record {
	e.t.Helper()
	rec, err := s.Lookup(e.ctx, key, e.at(off))
	check.NoError(e.t, err, "Lookup at +%v", off)
	return rec
}

func (e *env) absent(s driver.Store, key driver.Key, off time.Duration) {
	e.t.Helper()
	_, err := s.Lookup(e.ctx, key, e.at(off))
	check.ErrorIs(e.t, err, driver.ErrNotFound, "Lookup at +%v", off)
}

func requireTime(t *testing.T, want, got time.Time, what string) {
	t.Helper()
	d := got.Sub(want)
	if d < -tolerance || d > tolerance {
		t.Fatalf("%s: got %s, want %s (±%s)", what, got.UTC().Format(time.RFC3339Nano), want.UTC().Format(time.RFC3339Nano), tolerance)
	}
}

func requireResponse(t *testing.T, want driver.Response, got *driver.Response) {
	t.Helper()
	check.NotEqual(t, nil, got, "stored response")
	check.Equal(t, want.Status, got.Status, "status")
	check.True(t, bytes.Equal(want.Body, got.Body), "body: got %d bytes, want %d", len(got.Body), len(want.Body))
	check.Equal(t, len(want.Header), len(got.Header), "header fields (got %v, want %v)", got.Header, want.Header)
	for k, vs := range want.Header {
		check.Equal(t, vs, got.Header[k], "header %q", k)
	}
}

func sample() driver.Response {
	return driver.Response{
		Status: http.StatusCreated,
		Header: http.Header{
			"Content-Type": {"application/json"},
			"Location":     {"/v1/orders/ord_1"},
		},
		Body: []byte(`{"id":"ord_1","side":"buy"}`),
	}
}

func testClaimNewKey(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	e.absent(s, key, 0)
	c := e.mustClaim(s, key, fp("a"), 0)
	check.Equal(t, nil, c.Response)
	rec := e.lookup(s, key, time.Second)
	check.Equal(t, driver.InFlight, rec.Status)
	check.Equal(t, fp("a"), rec.Fingerprint)
	check.Equal(t, c.Token, rec.Token)
	requireTime(t, e.at(lease), rec.LeaseUntil, "Record.LeaseUntil")
	requireTime(t, e.at(retention), rec.ExpiresAt, "Record.ExpiresAt")
	check.Equal(t, nil, rec.Response)
}

func testInFlight(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	first := e.mustClaim(s, key, fp("a"), 0)
	for _, off := range []time.Duration{0, time.Millisecond, lease / 2, lease - time.Millisecond} {
		c := e.claim(s, key, fp("a"), off)
		check.Equal(t, driver.InFlight, c.Status, "claim at +%v", off)
		check.Equal(t, fp("a"), c.Fingerprint)
		requireTime(t, e.at(lease), c.LeaseUntil, "InFlight LeaseUntil")
		check.Equal(t, nil, c.Response)
	}
	// Nothing changed: the first claim still owns the key.
	check.Equal(t, first.Token, e.lookup(s, key, 0).Token)
	check.NoError(t, s.Complete(e.ctx, key, first.Token, sample(), e.at(retention)))
}

func testLeaseBoundary(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	first := e.mustClaim(s, key, fp("a"), 0)
	// LeaseUntil <= now is expired: a claim exactly at the lease's end marks the record, and a claim
	// exactly at the end of the extra lease takes it over.
	second := e.takeOver(s, key, fp("a"), lease)
	check.NotEqual(t, first.Token, second.Token)
}

func testCompleteThenReplay(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	c := e.mustClaim(s, key, fp("a"), 0)
	want := sample()
	check.NoError(t, s.Complete(e.ctx, key, c.Token, want, e.at(retention)))
	// Replays come back at any time within retention, lease long over.
	for _, off := range []time.Duration{time.Second, lease, 2 * lease, retention - time.Millisecond} {
		got := e.claim(s, key, fp("a"), off)
		check.Equal(t, driver.Completed, got.Status, "claim at +%v", off)
		check.Equal(t, fp("a"), got.Fingerprint)
		requireResponse(t, want, got.Response)
	}
	rec := e.lookup(s, key, time.Hour)
	check.Equal(t, driver.Completed, rec.Status)
	check.Equal(t, fp("a"), rec.Fingerprint)
	requireTime(t, e.at(retention), rec.ExpiresAt, "Record.ExpiresAt")
	requireResponse(t, want, rec.Response)
}

// requireMismatch asserts that a claim with another fingerprint reports the record's and changes nothing.
func requireMismatch(t *testing.T, e *env, s driver.Store, key driver.Key, off time.Duration, wantStatus driver.Status) {
	t.Helper()
	before := e.lookup(s, key, off)
	c := e.claim(s, key, fp("other request"), off)
	check.Equal(t, fp("a"), c.Fingerprint, "a mismatch reports the record's fingerprint")
	check.NotEqual(t, driver.Claimed, c.Status, "a different fingerprint must never claim")
	check.Equal(t, wantStatus, c.Status)
	after := e.lookup(s, key, off)
	check.Equal(t, before.Status, after.Status)
	check.Equal(t, before.Token, after.Token)
	check.Equal(t, before.Fingerprint, after.Fingerprint)
	requireTime(t, before.LeaseUntil, after.LeaseUntil, "LeaseUntil after a mismatch")
	requireTime(t, before.ExpiresAt, after.ExpiresAt, "ExpiresAt after a mismatch")
}

func testMismatchInFlight(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	c := e.mustClaim(s, key, fp("a"), 0)
	requireMismatch(t, e, s, key, time.Second, driver.InFlight)
	check.NoError(t, s.Complete(e.ctx, key, c.Token, sample(), e.at(retention)))
}

func testMismatchExpiredLease(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	c := e.mustClaim(s, key, fp("a"), 0)
	// The lease is over, but another request must not take the key over: it still answers 422.
	requireMismatch(t, e, s, key, 2*lease, driver.InFlight)
	// The original owner was not fenced by the mismatching claim.
	check.NoError(t, s.Renew(e.ctx, key, c.Token, e.at(3*lease)))
	check.NoError(t, s.Complete(e.ctx, key, c.Token, sample(), e.at(retention)))
}

func testMismatchCompleted(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	c := e.mustClaim(s, key, fp("a"), 0)
	want := sample()
	check.NoError(t, s.Complete(e.ctx, key, c.Token, want, e.at(retention)))
	requireMismatch(t, e, s, key, time.Minute, driver.Completed)
	// The stored response is intact and still replays for the right request.
	got := e.claim(s, key, fp("a"), time.Minute)
	check.Equal(t, driver.Completed, got.Status)
	requireResponse(t, want, got.Response)
}

func testTakeOver(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	first := e.mustClaim(s, key, fp("a"), 0)
	second := e.takeOver(s, key, fp("a"), lease+time.Second)
	check.NotEqual(t, first.Token, second.Token, "a take-over gets a new token")
	rec := e.lookup(s, key, 2*lease+time.Second)
	check.Equal(t, driver.InFlight, rec.Status)
	check.Equal(t, second.Token, rec.Token)
	requireTime(t, e.at(3*lease+time.Second), rec.LeaseUntil, "LeaseUntil after take-over")
	// While the new lease lives, others see it in flight.
	c := e.claim(s, key, fp("a"), 2*lease+2*time.Second)
	check.Equal(t, driver.InFlight, c.Status)
	want := sample()
	check.NoError(t, s.Complete(e.ctx, key, second.Token, want, e.at(retention)))
	requireResponse(t, want, e.lookup(s, key, time.Hour).Response)
}

// testSuspicionClearedByRenew: an owner that was only cut off from the store (its lease lapsed, a retry
// marked the record) keeps its key by renewing within the extra lease, and a later lapse needs a new
// mark before anyone takes over.
func testSuspicionClearedByRenew(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	owner := e.mustClaim(s, key, fp("a"), 0)
	warn := e.claim(s, key, fp("a"), 2*lease) // the store was out for longer than the lease
	check.Equal(t, driver.InFlight, warn.Status)
	requireTime(t, e.at(3*lease), warn.LeaseUntil, "the extra lease")
	check.Equal(t, owner.Token, e.lookup(s, key, 2*lease).Token, "the mark does not change the owner")
	// The owner is back: its renewal lands within the extra lease and clears the mark.
	check.NoError(t, s.Renew(e.ctx, key, owner.Token, e.at(2*lease+time.Second+lease)))
	// Its new lease lapses again (say it is cut off once more): the next claim marks again, it does
	// not take over, because the renewal cleared the first mark.
	again := e.claim(s, key, fp("a"), 4*lease)
	check.Equal(t, driver.InFlight, again.Status, "a renewal clears the mark")
	requireTime(t, e.at(5*lease), again.LeaseUntil, "the second extra lease")
	check.NoError(t, s.Complete(e.ctx, key, owner.Token, sample(), e.at(retention)))
	got := e.claim(s, key, fp("a"), 5*lease)
	check.Equal(t, driver.Completed, got.Status)
	requireResponse(t, sample(), got.Response)
}

// testSuspectedOwnerCompletes: an owner whose record was marked completes it within the extra lease,
// and the retry that marked it is replayed, never run.
func testSuspectedOwnerCompletes(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	owner := e.mustClaim(s, key, fp("a"), 0)
	check.Equal(t, driver.InFlight, e.claim(s, key, fp("a"), lease+time.Second).Status)
	// A claim with another fingerprint neither marks nor takes over; it reports the record.
	requireMismatch(t, e, s, key, 3*lease, driver.InFlight)
	check.NoError(t, s.Complete(e.ctx, key, owner.Token, sample(), e.at(retention)))
	got := e.claim(s, key, fp("a"), 3*lease)
	check.Equal(t, driver.Completed, got.Status)
	requireResponse(t, sample(), got.Response)
}

// testContextDeadline: a call whose deadline has passed returns an error at once and claims nothing;
// the middleware's StoreTimeout relies on every method honouring it.
func testContextDeadline(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	c, err := s.Claim(ctx, key, fp("a"), e.at(0), e.at(lease), e.at(retention))
	check.Error(t, err, "Claim past its deadline")
	check.ErrorIs(t, err, context.DeadlineExceeded)
	check.NotEqual(t, driver.Claimed, c.Status)
	_, err = s.Lookup(ctx, key, e.at(0))
	check.ErrorIs(t, err, context.DeadlineExceeded)
	owner := e.mustClaim(s, key, fp("a"), 0)
	check.ErrorIs(t, s.Renew(ctx, key, owner.Token, e.at(2*lease)), context.DeadlineExceeded)
	check.ErrorIs(t, s.Complete(ctx, key, owner.Token, sample(), e.at(retention)), context.DeadlineExceeded)
	check.ErrorIs(t, s.Release(ctx, key, owner.Token), context.DeadlineExceeded)
	check.Equal(t, driver.InFlight, e.lookup(s, key, 0).Status)
	check.NoError(t, s.Complete(e.ctx, key, owner.Token, sample(), e.at(retention)))
}

func testRenew(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	c := e.mustClaim(s, key, fp("a"), 0)
	check.NoError(t, s.Renew(e.ctx, key, c.Token, e.at(2*lease)))
	requireTime(t, e.at(2*lease), e.lookup(s, key, 0).LeaseUntil, "LeaseUntil after Renew")
	// Past the first lease but inside the renewed one, the key is still in flight.
	got := e.claim(s, key, fp("a"), lease+time.Second)
	check.Equal(t, driver.InFlight, got.Status)
	requireTime(t, e.at(2*lease), got.LeaseUntil, "InFlight LeaseUntil after Renew")
	// Renewing while the lease has already run out (nobody took over) still works: the token owns the key.
	check.NoError(t, s.Renew(e.ctx, key, c.Token, e.at(4*lease)))
	check.Equal(t, driver.InFlight, e.claim(s, key, fp("a"), 3*lease).Status)
	check.NoError(t, s.Complete(e.ctx, key, c.Token, sample(), e.at(retention)))
}

func testFencingAfterTakeOver(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	stale := e.mustClaim(s, key, fp("a"), 0)
	owner := e.takeOver(s, key, fp("a"), lease)
	check.ErrorIs(t, s.Renew(e.ctx, key, stale.Token, e.at(10*lease)), driver.ErrLeaseLost)
	check.ErrorIs(t, s.Complete(e.ctx, key, stale.Token, driver.Response{Status: 500, Body: []byte("stale")}, e.at(retention)), driver.ErrLeaseLost)
	check.ErrorIs(t, s.Release(e.ctx, key, stale.Token), driver.ErrLeaseLost)
	// Nothing the stale owner did had any effect.
	rec := e.lookup(s, key, 2*lease)
	check.Equal(t, driver.InFlight, rec.Status)
	check.Equal(t, owner.Token, rec.Token)
	requireTime(t, e.at(3*lease), rec.LeaseUntil, "LeaseUntil after a stale Renew")
	check.Equal(t, nil, rec.Response)
	want := sample()
	check.NoError(t, s.Complete(e.ctx, key, owner.Token, want, e.at(retention)))
	requireResponse(t, want, e.lookup(s, key, 2*lease).Response)
	// And after the owner completed, the stale token still cannot overwrite.
	check.ErrorIs(t, s.Complete(e.ctx, key, stale.Token, driver.Response{Status: 500}, e.at(retention)), driver.ErrLeaseLost)
	requireResponse(t, want, e.lookup(s, key, 2*lease).Response)
}

func testFencingAfterComplete(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	c := e.mustClaim(s, key, fp("a"), 0)
	want := sample()
	check.NoError(t, s.Complete(e.ctx, key, c.Token, want, e.at(retention)))
	// A completed record is no one's to renew, complete again or release.
	check.ErrorIs(t, s.Renew(e.ctx, key, c.Token, e.at(lease)), driver.ErrLeaseLost)
	check.ErrorIs(t, s.Complete(e.ctx, key, c.Token, driver.Response{Status: 500}, e.at(retention)), driver.ErrLeaseLost)
	check.ErrorIs(t, s.Release(e.ctx, key, c.Token), driver.ErrLeaseLost)
	rec := e.lookup(s, key, time.Second)
	check.Equal(t, driver.Completed, rec.Status)
	requireResponse(t, want, rec.Response)
}

func testFencingAfterRelease(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	first := e.mustClaim(s, key, fp("a"), 0)
	check.NoError(t, s.Release(e.ctx, key, first.Token))
	check.ErrorIs(t, s.Release(e.ctx, key, first.Token), driver.ErrLeaseLost)
	check.ErrorIs(t, s.Renew(e.ctx, key, first.Token, e.at(lease)), driver.ErrLeaseLost)
	check.ErrorIs(t, s.Complete(e.ctx, key, first.Token, sample(), e.at(retention)), driver.ErrLeaseLost)
	e.absent(s, key, 0)
	// The next claim gets a fresh token, and the released one cannot touch it.
	second := e.mustClaim(s, key, fp("a"), time.Second)
	check.NotEqual(t, first.Token, second.Token)
	check.ErrorIs(t, s.Complete(e.ctx, key, first.Token, sample(), e.at(retention)), driver.ErrLeaseLost)
	check.ErrorIs(t, s.Release(e.ctx, key, first.Token), driver.ErrLeaseLost)
	rec := e.lookup(s, key, time.Second)
	check.Equal(t, driver.InFlight, rec.Status)
	check.Equal(t, second.Token, rec.Token)
}

func testUnknown(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	check.ErrorIs(t, s.Renew(e.ctx, key, 1, e.at(lease)), driver.ErrLeaseLost)
	check.ErrorIs(t, s.Complete(e.ctx, key, 1, sample(), e.at(retention)), driver.ErrLeaseLost)
	check.ErrorIs(t, s.Release(e.ctx, key, 1), driver.ErrLeaseLost)
	e.absent(s, key, 0)
	// A wrong token on a live claim is refused too.
	c := e.mustClaim(s, key, fp("a"), 0)
	wrong := c.Token + 1
	check.ErrorIs(t, s.Renew(e.ctx, key, wrong, e.at(lease)), driver.ErrLeaseLost)
	check.ErrorIs(t, s.Complete(e.ctx, key, wrong, sample(), e.at(retention)), driver.ErrLeaseLost)
	check.ErrorIs(t, s.Release(e.ctx, key, wrong), driver.ErrLeaseLost)
	check.Equal(t, c.Token, e.lookup(s, key, 0).Token)
}

func testTokensNeverRepeat(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	seen := make(map[uint64]bool)
	off := time.Duration(0)
	for i := range 24 {
		c := e.mustClaim(s, key, fp("a"), off)
		check.True(t, !seen[c.Token], "token %d handed out twice", c.Token)
		seen[c.Token] = true
		switch i % 3 {
		case 0: // released
			check.NoError(t, s.Release(e.ctx, key, c.Token))
		case 1: // abandoned: a claim after the lease marks it, the next one after that takes over
			off += lease
			check.Equal(t, driver.InFlight, e.claim(s, key, fp("a"), off).Status)
			off += lease
		case 2: // completed, then expired
			check.NoError(t, s.Complete(e.ctx, key, c.Token, sample(), e.at(off+time.Second)))
			off += time.Second
		}
		off += time.Millisecond
	}
}

func testRetentionCompleted(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	c, err := s.Claim(e.ctx, key, fp("a"), e.at(0), e.at(lease), e.at(time.Hour))
	check.NoError(t, err)
	check.Equal(t, driver.Claimed, c.Status)
	check.NoError(t, s.Complete(e.ctx, key, c.Token, sample(), e.at(time.Hour)))
	check.Equal(t, driver.Completed, e.lookup(s, key, time.Hour-time.Millisecond).Status)
	// ExpiresAt <= now is absent: at the instant, and after it.
	e.absent(s, key, time.Hour)
	e.absent(s, key, 2*time.Hour)
	// An expired record is no obstacle, whatever fingerprint the new request has.
	again := e.mustClaim(s, key, fp("b"), 2*time.Hour)
	check.NotEqual(t, c.Token, again.Token)
	rec := e.lookup(s, key, 2*time.Hour)
	check.Equal(t, driver.InFlight, rec.Status)
	check.Equal(t, fp("b"), rec.Fingerprint)
	check.Equal(t, nil, rec.Response)
}

func testRetentionInFlight(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	c, err := s.Claim(e.ctx, key, fp("a"), e.at(0), e.at(time.Minute), e.at(2*time.Minute))
	check.NoError(t, err)
	check.Equal(t, driver.Claimed, c.Status)
	e.absent(s, key, 2*time.Minute)
	got, err := s.Claim(e.ctx, key, fp("b"), e.at(3*time.Minute), e.at(3*time.Minute+lease), e.at(3*time.Minute+retention))
	check.NoError(t, err)
	check.Equal(t, driver.Claimed, got.Status)
	check.Equal(t, fp("b"), got.Fingerprint)
	check.ErrorIs(t, s.Complete(e.ctx, key, c.Token, sample(), e.at(retention)), driver.ErrLeaseLost)
}

func testCompleteSetsRetention(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	// A short retention at claim time (an in-flight record need not outlive its lease by much) is
	// replaced by the one Complete passes.
	c, err := s.Claim(e.ctx, key, fp("a"), e.at(0), e.at(lease), e.at(2*lease))
	check.NoError(t, err)
	check.Equal(t, driver.Claimed, c.Status)
	check.NoError(t, s.Complete(e.ctx, key, c.Token, sample(), e.at(retention)))
	rec := e.lookup(s, key, time.Hour)
	check.Equal(t, driver.Completed, rec.Status)
	requireTime(t, e.at(retention), rec.ExpiresAt, "ExpiresAt set by Complete")
	e.absent(s, key, retention)
}

func testRelease(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	c := e.mustClaim(s, key, fp("a"), 0)
	check.NoError(t, s.Release(e.ctx, key, c.Token))
	e.absent(s, key, 0)
	// A retry claims the key at once, lease or not, and with any fingerprint.
	again := e.mustClaim(s, key, fp("b"), time.Millisecond)
	check.NotEqual(t, c.Token, again.Token)
}

func testLargeBody(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	body := make([]byte, 1<<20)
	for i := range body {
		body[i] = byte(i*7 + i>>8) // every byte value, no runs: catches truncation and text mangling
	}
	want := driver.Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/octet-stream"}}, Body: body}
	c := e.mustClaim(s, key, fp("a"), 0)
	check.NoError(t, s.Complete(e.ctx, key, c.Token, want, e.at(retention)))
	got := e.claim(s, key, fp("a"), time.Second)
	check.Equal(t, driver.Completed, got.Status)
	requireResponse(t, want, got.Response)
	requireResponse(t, want, e.lookup(s, key, time.Second).Response)
}

func testResponseRoundTrip(t *testing.T, s driver.Store) {
	cases := []struct {
		name string
		resp driver.Response
	}{
		{"created with headers", sample()},
		{"server error", driver.Response{Status: http.StatusInternalServerError,
			Header: http.Header{"Content-Type": {"application/problem+json"}},
			Body:   []byte(`{"status":500,"code":"internal_error"}`)}},
		{"no content", driver.Response{Status: http.StatusNoContent}},
		{"multi-valued and odd headers", driver.Response{Status: http.StatusAccepted,
			Header: http.Header{
				"Link":          {`</a>; rel="next"`, `</b>; rel="prev"`},
				"X-Quoted":      {`a "quoted" \ value, with comma`},
				"X-Utf8":        {"café ☕"},
				"X-Empty-Value": {""},
			},
			Body: []byte("line1\r\nline2\x00\xff")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			key := e.key()
			c := e.mustClaim(s, key, fp("a"), 0)
			check.NoError(t, s.Complete(e.ctx, key, c.Token, tc.resp, e.at(retention)))
			got := e.claim(s, key, fp("a"), time.Second)
			check.Equal(t, driver.Completed, got.Status)
			requireResponse(t, tc.resp, got.Response)
			requireResponse(t, tc.resp, e.lookup(s, key, time.Second).Response)
		})
	}
}

func testResponseNotAliased(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	c := e.mustClaim(s, key, fp("a"), 0)
	resp := sample()
	want := sample()
	check.NoError(t, s.Complete(e.ctx, key, c.Token, resp, e.at(retention)))
	// The caller reuses its buffers (the middleware pools them): the store must have copied.
	for i := range resp.Body {
		resp.Body[i] = 'x'
	}
	resp.Header.Set("Content-Type", "text/changed")
	resp.Header["Location"][0] = "/changed"
	requireResponse(t, want, e.lookup(s, key, time.Second).Response)
}

func testContextCancelled(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, err := s.Claim(ctx, key, fp("a"), e.at(0), e.at(lease), e.at(retention))
	check.Error(t, err, "Claim with a cancelled context")
	check.NotEqual(t, driver.Claimed, c.Status, "a failed Claim must not report a claim")
	_, err = s.Lookup(ctx, key, e.at(0))
	check.Error(t, err, "Lookup with a cancelled context")
	check.NotErrorIs(t, err, driver.ErrNotFound, "a cancelled Lookup must not claim the key is free")
	// Nothing was claimed: a live context claims the key.
	owner := e.mustClaim(s, key, fp("a"), 0)
	check.Error(t, s.Renew(ctx, key, owner.Token, e.at(2*lease)), "Renew with a cancelled context")
	check.Error(t, s.Complete(ctx, key, owner.Token, sample(), e.at(retention)), "Complete with a cancelled context")
	check.Error(t, s.Release(ctx, key, owner.Token), "Release with a cancelled context")
	rec := e.lookup(s, key, 0)
	check.Equal(t, driver.InFlight, rec.Status)
	check.Equal(t, owner.Token, rec.Token)
	requireTime(t, e.at(lease), rec.LeaseUntil, "LeaseUntil after a cancelled Renew")
}

func testScopesIsolated(t *testing.T, s driver.Store) {
	e := newEnv(t)
	k := randid.New("key_")
	a := driver.Key{Scope: randid.New("scope_a_"), Key: k}
	b := driver.Key{Scope: randid.New("scope_b_"), Key: k}
	ca := e.mustClaim(s, a, fp("a"), 0)
	// The same key in another scope is another request: claimed, with any fingerprint.
	cb := e.mustClaim(s, b, fp("b"), 0)
	wantA := sample()
	check.NoError(t, s.Complete(e.ctx, a, ca.Token, wantA, e.at(retention)))
	// b is still in flight and has none of a's response; a's token does nothing to b.
	check.ErrorIs(t, s.Complete(e.ctx, b, ca.Token, wantA, e.at(retention)), driver.ErrLeaseLost)
	check.ErrorIs(t, s.Release(e.ctx, b, ca.Token), driver.ErrLeaseLost)
	rb := e.lookup(s, b, time.Second)
	check.Equal(t, driver.InFlight, rb.Status)
	check.Equal(t, fp("b"), rb.Fingerprint)
	check.Equal(t, nil, rb.Response)
	got := e.claim(s, b, fp("a"), time.Second)
	check.NotEqual(t, driver.Completed, got.Status, "scope b must never see scope a's response")
	check.Equal(t, nil, got.Response)
	check.NoError(t, s.Release(e.ctx, b, cb.Token))
	e.absent(s, b, time.Second)
	requireResponse(t, wantA, e.lookup(s, a, time.Second).Response)
	// A third scope that was never used sees nothing.
	e.absent(s, driver.Key{Scope: randid.New("scope_c_"), Key: k}, time.Second)
}

func testKeysWithSeparators(t *testing.T, s driver.Store) {
	e := newEnv(t)
	p := randid.New("p")
	// Pairs that a naive "scope:key" concatenation would merge.
	keys := []driver.Key{
		{Scope: p + ":a", Key: "b"},
		{Scope: p, Key: "a:b"},
		{Scope: p + "{x}", Key: "k"},
		{Scope: p, Key: "{x}k"},
		{Scope: p + "|", Key: "k"},
		{Scope: p, Key: "|k"},
		{Scope: p + " ", Key: "k"},
		{Scope: p, Key: " k"},
		{Scope: p + "/", Key: "k"},
		{Scope: p, Key: "/k"},
	}
	tokens := make([]uint64, len(keys))
	for i, k := range keys {
		c := e.claim(s, k, fp(strconv.Itoa(i)), 0)
		check.Equal(t, driver.Claimed, c.Status, "key %q/%q collides with another", k.Scope, k.Key)
		tokens[i] = c.Token
	}
	for i, k := range keys {
		rec := e.lookup(s, k, 0)
		check.Equal(t, fp(strconv.Itoa(i)), rec.Fingerprint)
		check.Equal(t, tokens[i], rec.Token)
	}
}

// race runs fn on n goroutines released at once and returns their results.
func race[T any](n int, fn func(i int) T) []T {
	out := make([]T, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			out[i] = fn(i)
		}()
	}
	start.Done()
	done.Wait()
	return out
}

type raceResult struct {
	c   driver.Claim
	err error
}

func countStatus(t *testing.T, rs []raceResult) map[driver.Status]int {
	t.Helper()
	n := make(map[driver.Status]int)
	for _, r := range rs {
		check.NoError(t, r.err)
		n[r.c.Status]++
	}
	return n
}

func testClaimRace(t *testing.T, s driver.Store) {
	e := newEnv(t)
	for round := range 5 {
		key := e.key()
		rs := race(racers, func(int) raceResult {
			c, err := s.Claim(e.ctx, key, fp("a"), e.at(0), e.at(lease), e.at(retention))
			return raceResult{c, err}
		})
		n := countStatus(t, rs)
		check.Equal(t, 1, n[driver.Claimed], "round %d: exactly one claim wins: %v", round, n)
		check.Equal(t, racers-1, n[driver.InFlight], "round %d: %v", round, n)
		var winner uint64
		for _, r := range rs {
			check.Equal(t, fp("a"), r.c.Fingerprint)
			requireTime(t, e.at(lease), r.c.LeaseUntil, "LeaseUntil")
			if r.c.Status == driver.Claimed {
				winner = r.c.Token
			}
		}
		check.Equal(t, winner, e.lookup(s, key, 0).Token)
	}
}

func testTakeOverRace(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	stale := e.mustClaim(s, key, fp("a"), 0)
	// Racing claims on a lapsed lease: exactly one marks it, and every one answers in flight.
	at := 2 * lease
	rs := race(racers, func(int) raceResult {
		c, err := s.Claim(e.ctx, key, fp("a"), e.at(at), e.at(at+lease), e.at(at+retention))
		return raceResult{c, err}
	})
	n := countStatus(t, rs)
	check.Equal(t, racers, n[driver.InFlight], "the first claims after a lapsed lease only mark it: %v", n)
	requireTime(t, e.at(at+lease), e.lookup(s, key, at).LeaseUntil, "one mark, one extra lease")
	// Racing claims after the extra lease: exactly one takes over.
	at += lease
	rs = race(racers, func(int) raceResult {
		c, err := s.Claim(e.ctx, key, fp("a"), e.at(at), e.at(at+lease), e.at(at+retention))
		return raceResult{c, err}
	})
	n = countStatus(t, rs)
	check.Equal(t, 1, n[driver.Claimed], "exactly one take-over wins: %v", n)
	check.Equal(t, racers-1, n[driver.InFlight], "%v", n)
	check.ErrorIs(t, s.Complete(e.ctx, key, stale.Token, sample(), e.at(retention)), driver.ErrLeaseLost)
}

func testCompletedRace(t *testing.T, s driver.Store) {
	e := newEnv(t)
	key := e.key()
	c := e.mustClaim(s, key, fp("a"), 0)
	want := sample()
	// Completion races with claims: every claim sees either the live claim or the stored response.
	var completed atomic.Bool
	rs := race(racers+1, func(i int) raceResult {
		if i == racers {
			err := s.Complete(e.ctx, key, c.Token, want, e.at(retention))
			completed.Store(err == nil)
			return raceResult{c: driver.Claim{Status: driver.InFlight}, err: err}
		}
		got, err := s.Claim(e.ctx, key, fp("a"), e.at(time.Second), e.at(time.Second+lease), e.at(time.Second+retention))
		return raceResult{got, err}
	})
	check.True(t, completed.Load(), "the owner's Complete failed while claims raced it")
	n := countStatus(t, rs)
	check.Equal(t, 0, n[driver.Claimed], "nobody may claim a key in flight or completed: %v", n)
	for _, r := range rs[:racers] {
		if r.c.Status == driver.Completed {
			requireResponse(t, want, r.c.Response)
		}
	}
}

func testManyKeys(t *testing.T, s driver.Store) {
	e := newEnv(t)
	const n = 256
	keys := make([]driver.Key, n)
	for i := range keys {
		keys[i] = e.key()
	}
	rs := race(n, func(i int) error {
		c, err := s.Claim(e.ctx, keys[i], fp(strconv.Itoa(i)), e.at(0), e.at(lease), e.at(retention))
		if err != nil {
			return err
		}
		if c.Status != driver.Claimed {
			return errors.New("storetest: a fresh key was not claimed: " + c.Status.String())
		}
		resp := driver.Response{Status: 200 + i%100, Body: []byte(strconv.Itoa(i))}
		return s.Complete(e.ctx, keys[i], c.Token, resp, e.at(retention))
	})
	for _, err := range rs {
		check.NoError(t, err)
	}
	for i, k := range keys {
		rec := e.lookup(s, k, time.Second)
		check.Equal(t, driver.Completed, rec.Status)
		check.Equal(t, fp(strconv.Itoa(i)), rec.Fingerprint)
		check.Equal(t, 200+i%100, rec.Response.Status)
		check.Equal(t, strconv.Itoa(i), string(rec.Response.Body))
	}
}
