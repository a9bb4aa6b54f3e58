package drivertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// testSettle: one Settle call records deliveries, failures, abandonments and releases of several
// streams, in any order within a stream, as the single calls would; a stale or repeated settlement
// is ErrLeaseLost and changes nothing.
func testSettle(t *testing.T, l driver.Log) {
	ctx := context.Background()
	st := l.(driver.Settler)
	appendN(t, l, "we_a", 6, at(0))
	appendN(t, l, "we_b", 2, at(0))
	numberAll(t, l)
	now := t0().Add(time.Minute)
	ds := mustClaim(t, l, now)
	check.Len(t, ds, 8)
	by := map[string]driver.Delivery{}
	for _, d := range ds {
		by[fmt.Sprintf("%s/%d", d.Stream, d.Sequence)] = d
	}
	settle := func(key string, s driver.Settlement) driver.Settlement {
		s.Lease = by[key].Lease
		return s
	}
	retry := now.Add(time.Hour)
	ss := []driver.Settlement{
		settle("we_a/3", driver.Settlement{Delivered: true, Attempt: driver.Attempt{At: now, StatusCode: 204}}), // ahead of 1 and 2
		settle("we_a/1", driver.Settlement{Delivered: true, Attempt: driver.Attempt{At: now, StatusCode: 200}}),
		settle("we_a/2", driver.Settlement{Attempt: driver.Attempt{At: now, StatusCode: 503, Class: producer.ClassStatus,
			Reason: "status 503", RetryAt: retry}}),
		settle("we_a/4", driver.Settlement{Attempt: driver.Attempt{At: now, StatusCode: 410, Class: producer.ClassStatus,
			Reason: "status 410"}}),
		settle("we_a/5", driver.Settlement{Release: true, Attempt: driver.Attempt{RetryAt: retry}}),
		settle("we_a/6", driver.Settlement{Release: true, Attempt: driver.Attempt{RetryAt: retry}}),
		settle("we_b/2", driver.Settlement{Delivered: true, Attempt: driver.Attempt{At: now}}),
		{Lease: driver.Lease{Stream: "we_b", Sequence: 1, Token: by["we_b/1"].Token + 1}, Delivered: true}, // not its token
	}
	errs := st.Settle(ctx, ss)
	check.Len(t, errs, len(ss))
	for i := range 7 {
		check.NoError(t, errs[i], "settlement %d", i)
	}
	check.ErrorIs(t, errs[7], driver.ErrLeaseLost, "a token the delivery never had")

	want := map[uint64]struct {
		state    driver.State
		attempts int
		next     time.Time
	}{
		1: {driver.Delivered, 0, time.Time{}}, 2: {driver.Pending, 1, retry}, 3: {driver.Delivered, 0, time.Time{}},
		4: {driver.Abandoned, 1, time.Time{}}, 5: {driver.Pending, 0, retry}, 6: {driver.Pending, 0, retry},
	}
	for seq, w := range want {
		s, err := l.Status(ctx, "we_a", seq)
		check.NoError(t, err)
		check.Equal(t, w.state, s.State, "we_a/%d state", seq)
		check.Equal(t, w.attempts, s.Attempts, "we_a/%d attempts", seq)
		if w.state == driver.Pending {
			check.Instant(t, w.next, s.NextAttempt, "we_a/%d next attempt", seq)
			check.Instant(t, time.Time{}, s.LeaseUntil, "we_a/%d lease", seq)
		}
	}
	hist, _, err := l.Attempts(ctx, driver.AttemptQuery{Stream: "we_a", Limit: 10})
	check.NoError(t, err)
	check.Len(t, hist, 4, "releases record no attempt")

	// Settled again, with the same leases: nothing takes, nothing changes.
	again := st.Settle(ctx, ss[:7])
	for i, err := range again {
		check.ErrorIs(t, err, driver.ErrLeaseLost, "settlement %d again", i)
	}
	s, err := l.Status(ctx, "we_a", 2)
	check.NoError(t, err)
	check.Equal(t, 1, s.Attempts, "a repeated failure counts once")

	// we_a is free again (its held deliveries are all settled); we_b still holds 1 under its lease.
	none, err := l.Claim(ctx, req(now, now.Add(time.Minute), 10))
	check.NoError(t, err)
	check.Len(t, none, 0, "nothing due before the retry, and we_b/1 is leased")
	var later []driver.Delivery // we_b/1 is claimable again too: its lease has ended
	for _, d := range mustClaim(t, l, retry) {
		if d.Stream == "we_a" {
			later = append(later, d)
		}
	}
	check.Equal(t, []uint64{2, 5, 6}, seqs(later, dlSeq), "the failure and the releases, due at their time")
	check.Equal(t, 1, later[0].Attempts)
	for _, d := range later {
		check.NoError(t, l.Delivered(ctx, d.Lease, driver.Attempt{At: retry}))
	}
	bl, ok := l.(driver.Backlogger)
	if ok {
		got, err := bl.Backlog(ctx)
		check.NoError(t, err)
		for _, b := range got {
			check.True(t, b.Stream != "we_a", "we_a has nothing left to deliver: %+v", b)
		}
	}
}

// testHold: a settlement's Hold keeps the whole stream from Claim until then — its released
// deliveries and an event appended after — while other streams are claimed; holds only move later;
// a settlement whose lease is lost sets none.
func testHold(t *testing.T, l driver.Log) {
	ctx := context.Background()
	st := l.(driver.Settler)
	appendN(t, l, "we_a", 3, at(0))
	appendN(t, l, "we_b", 1, at(0))
	numberAll(t, l)
	now := t0().Add(time.Minute)
	ds := mustClaim(t, l, now)
	check.Len(t, ds, 4)
	by := map[string]driver.Delivery{}
	for _, d := range ds {
		by[fmt.Sprintf("%s/%d", d.Stream, d.Sequence)] = d
	}
	errs := st.Settle(ctx, []driver.Settlement{
		{Lease: by["we_a/1"].Lease, Delivered: true, Attempt: driver.Attempt{At: now}, Hold: now.Add(10 * time.Second)},
		{Lease: by["we_a/2"].Lease, Release: true, Attempt: driver.Attempt{RetryAt: now}, Hold: now.Add(5 * time.Second)},
		{Lease: by["we_a/3"].Lease, Release: true, Attempt: driver.Attempt{RetryAt: now}},
		{Lease: by["we_b/1"].Lease, Delivered: true, Attempt: driver.Attempt{At: now}},
	})
	for i, err := range errs {
		check.NoError(t, err, "settlement %d", i)
	}
	appendN(t, l, "we_a", 1, at(time.Minute)) // due at once, but its stream is held
	appendN(t, l, "we_b", 1, at(time.Minute))
	numberAll(t, l)

	got := mustClaim(t, l, now.Add(9*time.Second))
	check.Equal(t, []string{"we_b/2"}, keys(got), "the held stream is skipped, the other claimed")
	// A settlement under a lost lease sets no hold.
	stale := got[0].Lease
	stale.Token++
	check.ErrorIs(t, st.Settle(ctx, []driver.Settlement{{Lease: stale, Delivered: true, Attempt: driver.Attempt{At: now},
		Hold: now.Add(time.Hour)}})[0], driver.ErrLeaseLost)
	check.NoError(t, st.Settle(ctx, []driver.Settlement{{Lease: got[0].Lease, Release: true,
		Attempt: driver.Attempt{RetryAt: now}}})[0])

	got = mustClaim(t, l, now.Add(10*time.Second))
	check.Equal(t, []string{"we_a/2", "we_a/3", "we_a/4", "we_b/2"}, keys(got), "the latest hold (10 s) ended")
}

func keys(ds []driver.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%s/%d", d.Stream, d.Sequence)
	}
	slices.Sort(out)
	return out
}
