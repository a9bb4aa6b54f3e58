package drivertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// runRedeliver checks a driver.Redeliverer: what Redeliver queues and counts, that redeliveries go
// behind their stream's normal deliveries under its one lease, how they settle, that the event's
// own state never changes, and that retention and racing claimers keep their promises.
func runRedeliver(t *testing.T, newLog func(t *testing.T) driver.Log) {
	t.Run("Queue", func(t *testing.T) { testRedeliverQueue(t, newLog(t)) })
	t.Run("BehindTheStream", func(t *testing.T) { testRedeliverBehind(t, newLog(t)) })
	t.Run("SettleAndHistory", func(t *testing.T) { testRedeliverSettle(t, newLog(t)) })
	if _, ok := newLog(t).(driver.Settler); ok {
		t.Run("SettleBatch", func(t *testing.T) { testRedeliverSettleBatch(t, newLog(t)) })
	}
	t.Run("Retention", func(t *testing.T) { testRedeliverRetention(t, newLog(t)) })
	t.Run("ConcurrentClaimsAreDisjoint", func(t *testing.T) { testRedeliverConcurrentClaims(t, newLog(t)) })
}

// redeliver calls Redeliver and fails on an error.
func redeliver(t *testing.T, l driver.Log, stream string, from, to uint64, at time.Time) int {
	t.Helper()
	n, err := l.(driver.Redeliverer).Redeliver(context.Background(), stream, from, to, at)
	check.NoError(t, err, "Redeliver(%s, %d, %d)", stream, from, to)
	return n
}

// deliverAll claims what is due at now (at most 100) and settles every claimed delivery delivered.
func deliverAll(t *testing.T, l driver.Log, now time.Time) []driver.Delivery {
	t.Helper()
	ds := mustClaim(t, l, now)
	for _, d := range ds {
		check.NoError(t, l.Delivered(context.Background(), d.Lease, driver.Attempt{At: now, StatusCode: 200}),
			"delivering %s/%d", d.Stream, d.Sequence)
	}
	return ds
}

// statusOf is Status, failing on an error.
func statusOf(t *testing.T, l driver.Log, stream string, seq uint64) driver.DeliveryStatus {
	t.Helper()
	st, err := l.Status(context.Background(), stream, seq)
	check.NoError(t, err, "Status(%s, %d)", stream, seq)
	return st
}

// sameStatus fails unless two reports of an event's delivery state agree.
func sameStatus(t *testing.T, want, got driver.DeliveryStatus, what string) {
	t.Helper()
	check.Equal(t, want.State, got.State, "%s: state", what)
	check.Equal(t, want.Attempts, got.Attempts, "%s: attempts", what)
	check.Equal(t, want.LastError, got.LastError, "%s: last error", what)
	check.Instant(t, want.LastAttempt, got.LastAttempt, "%s: last attempt", what)
	check.Instant(t, want.DeliveredAt, got.DeliveredAt, "%s: delivered at", what)
	check.Instant(t, want.NextAttempt, got.NextAttempt, "%s: next attempt", what)
	check.Instant(t, want.LeaseUntil, got.LeaseUntil, "%s: lease", what)
}

// testRedeliverQueue: only settled events are queued, each once; the count is the newly queued;
// the range is clamped to the stream's end; unknown streams and ranges past the end queue nothing.
func testRedeliverQueue(t *testing.T, l driver.Log) {
	ctx := context.Background()
	appendN(t, l, "we_a", 6, at(0))
	numberAll(t, l)
	now := t0().Add(time.Minute)
	ds := mustClaim(t, l, now)
	check.Len(t, ds, 6)
	for _, d := range ds {
		check.Equal(t, false, d.Redelivery, "a first delivery is not a redelivery")
	}
	for _, d := range ds[:3] {
		check.NoError(t, l.Delivered(ctx, d.Lease, driver.Attempt{At: now}))
	}
	check.NoError(t, l.Failed(ctx, ds[3].Lease, driver.Attempt{At: now, Reason: "status 410"}))                              // abandoned
	check.NoError(t, l.Failed(ctx, ds[4].Lease, driver.Attempt{At: now, Reason: "status 503", RetryAt: now.Add(time.Hour)})) // waits
	// 6 stays leased: pending, like 5.
	before := map[uint64]driver.DeliveryStatus{}
	for seq := uint64(1); seq <= 6; seq++ {
		before[seq] = statusOf(t, l, "we_a", seq)
	}

	check.Equal(t, 4, redeliver(t, l, "we_a", 1, 100, now), "1–3 delivered and 4 abandoned are queued; 5 and 6, pending, are not; 100 is past the end")
	check.Equal(t, 0, redeliver(t, l, "we_a", 1, math.MaxUint64, now), "queued events are not queued again")
	check.Equal(t, 0, redeliver(t, l, "we_a", 2, 3, now))
	check.Equal(t, 0, redeliver(t, l, "we_a", 7, 10, now), "from past the end")
	check.Equal(t, 0, redeliver(t, l, "we_a", math.MaxUint64, math.MaxUint64, now), "from far past the end")
	check.Equal(t, 0, redeliver(t, l, "we_none", 1, 5, now), "an unknown stream")
	for seq := uint64(1); seq <= 6; seq++ {
		sameStatus(t, before[seq], statusOf(t, l, "we_a", seq), fmt.Sprintf("we_a/%d once queued", seq))
	}

	// The pending ones are delivered normally; then they can be queued too.
	check.NoError(t, l.Delivered(ctx, ds[5].Lease, driver.Attempt{At: now}))
	d := claimOne(t, l, now.Add(time.Hour), time.Minute)
	check.Equal(t, uint64(5), d.Sequence, "the normal retry of 5 comes before the redeliveries")
	check.Equal(t, false, d.Redelivery)
	check.NoError(t, l.Delivered(ctx, d.Lease, driver.Attempt{At: now.Add(time.Hour)}))
	check.Equal(t, 2, redeliver(t, l, "we_a", 3, 6, now), "5 and 6 are settled now; 3 and 4 are queued already")
}

// testRedeliverBehind: a stream's redeliveries are claimed only when nothing of its normal stream is
// due, lowest sequence first, at most PerStream, with the event as Range returns it, and under the
// stream's one lease.
func testRedeliverBehind(t *testing.T, l driver.Log) {
	ctx := context.Background()
	appendN(t, l, "we_a", 4, at(0))
	appendN(t, l, "we_b", 2, at(0))
	numberAll(t, l)
	deliverAll(t, l, t0().Add(time.Minute))
	appendN(t, l, "we_a", 2, at(2*time.Minute)) // 5 and 6
	numberAll(t, l)
	check.Equal(t, 4, redeliver(t, l, "we_a", 1, 4, t0().Add(time.Minute)))
	check.Equal(t, 1, redeliver(t, l, "we_b", 2, 2, t0().Add(time.Minute)))

	none, err := l.Claim(ctx, req(t0().Add(50*time.Second), t0().Add(time.Hour), 100))
	check.NoError(t, err)
	check.Len(t, none, 0, "redeliveries are not due before their time")

	now := t0().Add(3 * time.Minute)
	type key struct {
		s          string
		n          uint64
		redelivery bool
	}
	keys := func(ds []driver.Delivery) (out []key) {
		for _, d := range ds {
			out = append(out, key{d.Stream, d.Sequence, d.Redelivery})
		}
		return out
	}
	first := mustClaim(t, l, now)
	check.Equal(t, []key{{"we_b", 2, true}, {"we_a", 5, false}, {"we_a", 6, false}}, keys(first),
		"we_a's normal deliveries go first, its redeliveries wait; we_b has nothing else due")
	b2 := first[0]
	check.Equal(t, 0, b2.Attempts, "a redelivery starts with no failed attempt")
	evs, _, err := l.Range(ctx, "we_b", 2, 2, 1)
	check.NoError(t, err)
	check.Equal(t, evs[0], b2.Event, "the redelivery is the event as it was appended")
	check.Equal(t, string(evs[0].Data), string(b2.Event.Data), "the same body bytes")
	check.NotEqual(t, 0, b2.Token)
	check.Instant(t, now.Add(time.Minute), b2.LeaseUntil, "Delivery.LeaseUntil")
	sameStatus(t, driver.DeliveryStatus{State: driver.Delivered, LastAttempt: t0().Add(time.Minute), DeliveredAt: t0().Add(time.Minute)},
		statusOf(t, l, "we_b", 2), "a redelivery under lease leaves the event delivered")

	none, err = l.Claim(ctx, req(now, now.Add(time.Minute), 100))
	check.NoError(t, err)
	check.Len(t, none, 0, "both streams are held")
	for _, d := range first[1:] {
		check.NoError(t, l.Delivered(ctx, d.Lease, driver.Attempt{At: now}))
	}

	got, err := l.Claim(ctx, driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 100, PerStream: 3})
	check.NoError(t, err)
	check.Equal(t, []key{{"we_a", 1, true}, {"we_a", 2, true}, {"we_a", 3, true}}, keys(got),
		"once the normal stream is settled, the redeliveries: lowest first, PerStream of them (we_b is held)")
	evs, _, err = l.Range(ctx, "we_a", 1, 3, 10)
	check.NoError(t, err)
	for i, d := range got {
		check.Equal(t, evs[i], d.Event, "we_a/%d", d.Sequence)
		check.Equal(t, 0, d.Attempts)
	}

	// A new event while the redeliveries are held waits for the holder, then goes before the rest.
	appendN(t, l, "we_a", 1, at(3*time.Minute)) // 7
	numberAll(t, l)
	none, err = l.Claim(ctx, req(now.Add(time.Second), now.Add(time.Minute), 100))
	check.NoError(t, err)
	check.Len(t, none, 0, "one holder per stream, whether it holds redeliveries or not")
	for _, d := range got {
		check.NoError(t, l.Delivered(ctx, d.Lease, driver.Attempt{At: now}))
	}
	check.NoError(t, l.Delivered(ctx, b2.Lease, driver.Attempt{At: now}))
	next := mustClaim(t, l, now.Add(2*time.Second))
	check.Equal(t, []key{{"we_a", 7, false}}, keys(next), "the normal stream first")
	check.NoError(t, l.Delivered(ctx, next[0].Lease, driver.Attempt{At: now}))
	next = mustClaim(t, l, now.Add(2*time.Second))
	check.Equal(t, []key{{"we_a", 4, true}}, keys(next), "then the last redelivery")
	check.NoError(t, l.Delivered(ctx, next[0].Lease, driver.Attempt{At: now}))
	check.ErrorIs(t, l.Delivered(ctx, next[0].Lease, driver.Attempt{At: now}), driver.ErrLeaseLost, "a redelivery settles once")
	none, err = l.Claim(ctx, req(now.Add(48*time.Hour), now.Add(49*time.Hour), 100))
	check.NoError(t, err)
	check.Len(t, none, 0, "a delivered redelivery is never claimed again")
	for seq := uint64(1); seq <= 7; seq++ {
		check.Equal(t, driver.Delivered, statusOf(t, l, "we_a", seq).State, "we_a/%d", seq)
	}
	if bl, ok := l.(driver.Backlogger); ok {
		got, err := bl.Backlog(ctx)
		check.NoError(t, err)
		check.Len(t, got, 0, "nothing waits")
	}
}

// testRedeliverSettle: a redelivery retries, is handed back and is abandoned like a delivery, under
// the same fencing; its attempts continue the event's numbering in the history; the event's own
// state never changes.
func testRedeliverSettle(t *testing.T, l driver.Log) {
	ctx := context.Background()
	appendN(t, l, "we_a", 3, at(0))
	numberAll(t, l)
	ds := mustClaim(t, l, t0())
	check.Len(t, ds, 3)
	// 1: failed, then delivered; 2: delivered out of order; 3: abandoned.
	check.NoError(t, l.Delivered(ctx, ds[1].Lease, driver.Attempt{At: t0().Add(time.Second), StatusCode: 200}))
	check.NoError(t, l.Failed(ctx, ds[2].Lease, driver.Attempt{At: t0().Add(time.Second), StatusCode: 410, Class: producer.ClassStatus, Reason: "status 410"}))
	check.NoError(t, l.Failed(ctx, ds[0].Lease, driver.Attempt{At: t0().Add(time.Second), StatusCode: 503, Class: producer.ClassStatus,
		Reason: "status 503", RetryAt: t0().Add(10 * time.Second)}))
	normal := claimOne(t, l, t0().Add(10*time.Second), time.Minute)
	check.Equal(t, uint64(1), normal.Sequence)
	check.NoError(t, l.Delivered(ctx, normal.Lease, driver.Attempt{At: t0().Add(11 * time.Second), StatusCode: 200}))
	before := map[uint64]driver.DeliveryStatus{}
	for seq := uint64(1); seq <= 3; seq++ {
		before[seq] = statusOf(t, l, "we_a", seq)
	}

	at1 := t0().Add(time.Minute)
	check.Equal(t, 3, redeliver(t, l, "we_a", 1, 3, at1))
	rd := mustClaim(t, l, at1)
	check.Len(t, rd, 3)
	retry := at1.Add(5 * time.Minute)
	check.NoError(t, l.Failed(ctx, rd[0].Lease, driver.Attempt{At: at1.Add(time.Second), StatusCode: 500, Class: producer.ClassStatus,
		Reason: "status 500", RetryAt: retry}))
	check.NoError(t, l.Release(ctx, rd[1].Lease, retry))
	check.NoError(t, l.Failed(ctx, rd[2].Lease, driver.Attempt{At: at1.Add(time.Second), Class: producer.ClassEndpointDeleted,
		Reason: "endpoint deleted"}))
	for name, err := range map[string]error{
		"failed twice":           l.Failed(ctx, rd[0].Lease, driver.Attempt{At: at1, RetryAt: retry}),
		"released twice":         l.Release(ctx, rd[1].Lease, retry),
		"abandoned, delivered":   l.Delivered(ctx, rd[2].Lease, driver.Attempt{At: at1}),
		"the normal lease of 1":  l.Delivered(ctx, normal.Lease, driver.Attempt{At: at1}),
		"a token it never had":   l.Delivered(ctx, driver.Lease{Stream: "we_a", Sequence: 1, Token: rd[0].Token + 1000}, driver.Attempt{At: at1}),
		"the zero token":         l.Release(ctx, driver.Lease{Stream: "we_a", Sequence: 2}, retry),
		"another event's lease":  l.Delivered(ctx, driver.Lease{Stream: "we_a", Sequence: 2, Token: rd[0].Token}, driver.Attempt{At: at1}),
		"an unknown stream":      l.Delivered(ctx, driver.Lease{Stream: "we_x", Sequence: 1, Token: rd[0].Token}, driver.Attempt{At: at1}),
		"past the stream's last": l.Delivered(ctx, driver.Lease{Stream: "we_a", Sequence: 4, Token: rd[0].Token}, driver.Attempt{At: at1}),
	} {
		check.ErrorIs(t, err, driver.ErrLeaseLost, name)
	}

	none, err := l.Claim(ctx, req(retry.Add(-time.Second), retry, 10))
	check.NoError(t, err)
	check.Len(t, none, 0, "the retry and the release wait for their time; the abandoned redelivery is gone")
	again, err := l.Claim(ctx, req(retry, retry.Add(30*time.Second), 10))
	check.NoError(t, err)
	check.Equal(t, []uint64{1, 2}, seqs(again, dlSeq))
	check.Equal(t, []int{1, 0}, []int{again[0].Attempts, again[1].Attempts}, "this redelivery's failed attempts")
	for _, d := range again {
		check.Equal(t, true, d.Redelivery)
	}

	// The holder dies: once its lease ends another claim takes the redeliveries over, and the old
	// lease settles nothing.
	none, err = l.Claim(ctx, req(retry.Add(29*time.Second), retry.Add(time.Hour), 10))
	check.NoError(t, err)
	check.Len(t, none, 0, "the lease is live until it ends")
	over, err := l.Claim(ctx, req(retry.Add(30*time.Second), retry.Add(time.Hour), 10))
	check.NoError(t, err)
	check.Equal(t, []uint64{1, 2}, seqs(over, dlSeq))
	check.NotEqual(t, again[0].Token, over[0].Token, "every claim gets a new fencing token")
	check.ErrorIs(t, l.Delivered(ctx, again[0].Lease, driver.Attempt{At: retry}), driver.ErrLeaseLost, "the dead holder's lease")
	done := retry.Add(31 * time.Second)
	for _, d := range over {
		check.NoError(t, l.Delivered(ctx, d.Lease, driver.Attempt{At: done, StatusCode: 200}))
	}
	none, err = l.Claim(ctx, req(done.Add(48*time.Hour), done.Add(49*time.Hour), 10))
	check.NoError(t, err)
	check.Len(t, none, 0)

	type row struct {
		seq     uint64
		number  int
		outcome driver.Outcome
	}
	hist, _, err := l.Attempts(ctx, driver.AttemptQuery{Stream: "we_a", Limit: 100})
	check.NoError(t, err)
	var rows []row
	for _, a := range hist {
		rows = append(rows, row{a.Sequence, a.Number, a.Outcome})
	}
	check.Equal(t, []row{
		{2, 2, driver.OutcomeDelivered}, {1, 4, driver.OutcomeDelivered}, // the redeliveries' last attempts
		{3, 2, driver.OutcomeAbandoned}, {1, 3, driver.OutcomeFailed}, // their first (the release records nothing)
		{1, 2, driver.OutcomeDelivered}, // the first delivery of 1, at its retry
		{3, 1, driver.OutcomeAbandoned}, {2, 1, driver.OutcomeDelivered}, {1, 1, driver.OutcomeFailed},
	}, rows, "the history, newest first: a redelivery's attempts continue the event's numbering")
	check.Equal(t, "status 500", hist[3].Reason)
	check.Equal(t, 500, hist[3].StatusCode)
	check.Instant(t, retry, hist[3].RetryAt, "the redelivery's retry in the history")

	for seq := uint64(1); seq <= 3; seq++ {
		sameStatus(t, before[seq], statusOf(t, l, "we_a", seq), fmt.Sprintf("we_a/%d after its redelivery", seq))
	}
}

// testRedeliverSettleBatch: one Settle call settles normal deliveries and redeliveries of several
// streams together, each as the single calls would.
func testRedeliverSettleBatch(t *testing.T, l driver.Log) {
	ctx := context.Background()
	st := l.(driver.Settler)
	appendN(t, l, "we_a", 3, at(0))
	appendN(t, l, "we_b", 4, at(0))
	numberAll(t, l)
	now := t0().Add(time.Minute)
	for _, d := range mustClaim(t, l, now) {
		if d.Stream == "we_b" {
			check.NoError(t, l.Delivered(ctx, d.Lease, driver.Attempt{At: now}))
		}
	}
	check.Equal(t, 4, redeliver(t, l, "we_b", 1, 4, now))
	// we_a's three are still held by the first claim; we_b is free, with its redeliveries due.
	rd, err := l.Claim(ctx, req(now, now.Add(time.Hour), 10))
	check.NoError(t, err)
	check.Equal(t, []uint64{1, 2, 3, 4}, seqs(rd, dlSeq))
	normal, err := l.Claim(ctx, req(now.Add(time.Minute), now.Add(2*time.Minute), 10)) // we_a's lease has ended
	check.NoError(t, err)
	check.Equal(t, []uint64{1, 2, 3}, seqs(normal, dlSeq))
	retry := now.Add(time.Hour)
	ss := []driver.Settlement{
		{Lease: rd[1].Lease, Attempt: driver.Attempt{At: now, Reason: "status 503", RetryAt: retry}},
		{Lease: normal[0].Lease, Delivered: true, Attempt: driver.Attempt{At: now}},
		{Lease: rd[0].Lease, Delivered: true, Attempt: driver.Attempt{At: now}},
		{Lease: normal[1].Lease, Attempt: driver.Attempt{At: now, Reason: "status 503", RetryAt: retry}},
		{Lease: rd[2].Lease, Release: true, Attempt: driver.Attempt{RetryAt: retry}},
		{Lease: rd[3].Lease, Attempt: driver.Attempt{At: now, Reason: "status 410"}},
		{Lease: normal[2].Lease, Release: true, Attempt: driver.Attempt{RetryAt: retry}},
		{Lease: driver.Lease{Stream: "we_b", Sequence: 3, Token: rd[2].Token + 1}, Delivered: true}, // not its token
	}
	errs := st.Settle(ctx, ss)
	check.Len(t, errs, len(ss))
	for i := range 7 {
		check.NoError(t, errs[i], "settlement %d", i)
	}
	check.ErrorIs(t, errs[7], driver.ErrLeaseLost, "a token the redelivery never had")
	again := st.Settle(ctx, ss[:7])
	for i, err := range again {
		check.ErrorIs(t, err, driver.ErrLeaseLost, "settlement %d again", i)
	}

	later := mustClaim(t, l, retry)
	type key struct {
		s          string
		n          uint64
		redelivery bool
		attempts   int
	}
	var got []key
	for _, d := range later {
		got = append(got, key{d.Stream, d.Sequence, d.Redelivery, d.Attempts})
	}
	check.Equal(t, []key{{"we_a", 2, false, 1}, {"we_a", 3, false, 0}, {"we_b", 2, true, 1}, {"we_b", 3, true, 0}}, got)
	hist, _, err := l.Attempts(ctx, driver.AttemptQuery{Stream: "we_b", Limit: 100})
	check.NoError(t, err)
	check.Len(t, hist, 7, "four first deliveries, and three redelivery attempts (the release records none)")
}

// testRedeliverRetention: a range that starts below the retained window is refused whole, and the
// queued redeliveries of removed events go with them.
func testRedeliverRetention(t *testing.T, l driver.Log) {
	ctx := context.Background()
	appendN(t, l, "we_a", 6, func(i int) time.Time { return t0().Add(time.Duration(i) * time.Second) })
	numberAll(t, l)
	now := t0().Add(time.Minute)
	deliverAll(t, l, now)
	check.Equal(t, 6, redeliver(t, l, "we_a", 1, 6, now))
	n, err := l.Cleanup(ctx, t0().Add(3*time.Second), 100)
	check.NoError(t, err)
	check.Equal(t, 3, n)

	_, err = l.(driver.Redeliverer).Redeliver(ctx, "we_a", 2, 5, now)
	check.ErrorIs(t, err, driver.ErrPruned)
	var pe *driver.PrunedError
	if !errors.As(err, &pe) {
		t.Fatalf("got error %v, want a *driver.PrunedError", err)
	}
	check.Equal(t, uint64(4), pe.FirstRetained)
	check.Equal(t, "we_a", pe.Stream)
	check.Equal(t, 0, redeliver(t, l, "we_a", 4, 6, now), "still queued")

	got := mustClaim(t, l, now)
	check.Equal(t, []uint64{4, 5, 6}, seqs(got, dlSeq), "the removed events' redeliveries went with them")
	for _, d := range got {
		check.Equal(t, true, d.Redelivery)
		check.NoError(t, l.Release(ctx, d.Lease, now))
	}
	for {
		n, err := l.Cleanup(ctx, t0().Add(time.Hour), 2)
		check.NoError(t, err)
		if n == 0 {
			break
		}
	}
	none, err := l.Claim(ctx, req(now, now.Add(time.Minute), 100))
	check.NoError(t, err)
	check.Len(t, none, 0, "nothing is queued once the events are gone")
	_, err = l.(driver.Redeliverer).Redeliver(ctx, "we_a", 6, 6, now)
	check.ErrorIs(t, err, driver.ErrPruned, "a stream whose events are all removed")
	check.Equal(t, 0, redeliver(t, l, "we_a", 7, 9, now), "past the end of an emptied stream")
}

// testRedeliverConcurrentClaims: claimers racing over queued redeliveries never get one twice while
// its lease lives, never hold one stream together, and get every one.
func testRedeliverConcurrentClaims(t *testing.T, l driver.Log) {
	ctx := context.Background()
	const streams, per = 5, 20
	for s := range streams {
		appendN(t, l, fmt.Sprintf("we_%d", s), per, at(0))
	}
	numberAll(t, l)
	for {
		if len(deliverAll(t, l, t0())) == 0 {
			break
		}
	}
	for s := range streams {
		check.Equal(t, per, redeliver(t, l, fmt.Sprintf("we_%d", s), 1, per, t0()))
	}
	type key struct {
		s string
		n uint64
	}
	var (
		mu   sync.Mutex
		seen = map[key]int{}
		held = map[string]bool{} // streams some claimer holds right now
		wg   sync.WaitGroup
		errs []error // under mu: a goroutine must not block reporting, nor call t.Fatalf
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for range 8 {
		wg.Go(func() {
			for idle := 0; idle < 50; {
				got, err := l.Claim(ctx, driver.ClaimRequest{Now: t0(), LeaseUntil: t0().Add(time.Hour), Limit: 3, PerStream: 2})
				if err != nil {
					fail(err)
					return
				}
				if len(got) == 0 {
					mu.Lock()
					done := len(seen) == streams*per
					mu.Unlock()
					if done {
						return
					}
					idle++
					continue
				}
				mu.Lock()
				for _, d := range got {
					if !d.Redelivery {
						errs = append(errs, fmt.Errorf("%s/%d claimed as a normal delivery", d.Stream, d.Sequence))
					}
					if seen[key{d.Stream, d.Sequence}]++; held[d.Stream] {
						errs = append(errs, fmt.Errorf("stream %s claimed while another claimer holds it", d.Stream))
					}
				}
				for _, d := range got {
					held[d.Stream] = true
				}
				mu.Unlock()
				runtime.Gosched() // let the other claimers try while the leases are held
				for _, d := range got {
					mu.Lock()
					delete(held, d.Stream) // before the first settlement: the stream stays leased until the last
					mu.Unlock()
					if err := l.Delivered(ctx, d.Lease, driver.Attempt{At: t0()}); err != nil {
						fail(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		check.NoError(t, err)
	}
	check.Equal(t, streams*per, len(seen), "redeliveries claimed: want every one")
	for k, n := range seen {
		check.Equal(t, 1, n, "%v claimed %d times", k, n)
	}
	rest, err := l.Claim(ctx, req(t0(), t0().Add(time.Hour), 100))
	check.NoError(t, err)
	check.Len(t, rest, 0)
}
