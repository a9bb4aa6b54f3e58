package drivertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// t0Unix is the instant the suite's events are created at, in whole seconds so that every backend
// stores it exactly.
const t0Unix = 1767225600

func t0() time.Time { return time.Unix(t0Unix, 0).UTC() }

// Racers and PerRacer size the concurrent append test: Racers goroutines append PerRacer events each
// to one stream, and the stream must end up holding exactly 1..Racers×PerRacer.
const (
	Racers   = 8
	PerRacer = 1000
)

// Run runs the suite. newLog must return an empty log for each call; each subtest gets its own.
//
// A log that numbers events after they commit (driver.Sequencing) runs the suite twice over: the
// Sequencing subtests check the unnumbered state and Sequence itself, under racing appenders and
// racing sequencers; every other subtest sees the log through an adapter whose Append numbers the
// event at once (it calls Sequence until the event has its number), so that the promises of Log are
// checked on the numbers Sequence hands out.
func Run(t *testing.T, newLog func(t *testing.T) driver.Log) {
	if _, ok := newLog(t).(driver.BatchAppender); ok {
		t.Run("AppendBatch", func(t *testing.T) { testAppendBatch(t, newLog(t)) })
	}
	t.Run("TraceContextRoundTrip", func(t *testing.T) { testTraceContext(t, newLog(t)) })
	if _, ok := newLog(t).(driver.Backlogger); ok {
		t.Run("Backlog", func(t *testing.T) { testBacklog(t, newLog(t)) })
	}
	if _, ok := newLog(t).(driver.StatsReader); ok {
		runStats(t, newLog)
	}
	if _, ok := newLog(t).(driver.Settler); ok {
		t.Run("Settle", func(t *testing.T) { testSettle(t, newLog(t)) })
		t.Run("SettleHoldsStream", func(t *testing.T) { testHold(t, newLog(t)) })
	}
	if _, ok := newLog(t).(driver.Redeliverer); ok {
		t.Run("Redeliver", func(t *testing.T) { runRedeliver(t, newLog) })
	}
	if _, ok := newLog(t).(driver.ByteRanger); ok {
		t.Run("RangeBytes", func(t *testing.T) { testRangeBytes(t, newLog(t)) })
	}
	if _, ok := newLog(t).(driver.Sequencing); ok {
		runSequencing(t, func(t *testing.T) driver.Sequencing { return newLog(t).(driver.Sequencing) })
		raw := newLog
		newLog = func(t *testing.T) driver.Log { return newNumbered(raw(t).(driver.Sequencing)) }
		t.Run("EndToEndWithFaults/Deferred", func(t *testing.T) { RunEndToEnd(t, raw(t)) })
	}
	t.Run("AppendNumbersEachStreamFrom1", func(t *testing.T) { testAppendNumbers(t, newLog(t)) })
	t.Run("AppendKeepsFields", func(t *testing.T) { testAppendKeepsFields(t, newLog(t)) })
	t.Run("ConcurrentAppendsAreGapFree", func(t *testing.T) { testConcurrentAppends(t, newLog(t)) })
	t.Run("Range", func(t *testing.T) { testRange(t, newLog(t)) })
	t.Run("ClaimDue", func(t *testing.T) { testClaimDue(t, newLog(t)) })
	t.Run("ClaimOrderAndLimit", func(t *testing.T) { testClaimOrder(t, newLog(t)) })
	t.Run("ClaimPerStreamAndSkip", func(t *testing.T) { testClaimPerStreamAndSkip(t, newLog(t)) })
	t.Run("ClaimOneHolderPerStream", func(t *testing.T) { testClaimOneHolderPerStream(t, newLog(t)) })
	t.Run("Attempts", func(t *testing.T) { testAttempts(t, newLog(t)) })
	t.Run("LeaseExpiryAndFencing", func(t *testing.T) { testLeaseFencing(t, newLog(t)) })
	t.Run("FailedRetriesLater", func(t *testing.T) { testFailedRetries(t, newLog(t)) })
	t.Run("FailedWithoutRetryAbandons", func(t *testing.T) { testAbandon(t, newLog(t)) })
	t.Run("ReleaseCountsNoAttempt", func(t *testing.T) { testRelease(t, newLog(t)) })
	t.Run("SettledLeaseIsLost", func(t *testing.T) { testSettledLease(t, newLog(t)) })
	t.Run("ConcurrentClaimsAreDisjoint", func(t *testing.T) { testConcurrentClaims(t, newLog(t)) })
	t.Run("Retention", func(t *testing.T) { testRetention(t, newLog(t)) })
	t.Run("RetentionKeepsWindowContiguous", func(t *testing.T) { testRetentionContiguous(t, newLog(t)) })
	t.Run("CancelledContext", func(t *testing.T) { testCancelled(t, newLog(t)) })
	t.Run("EndToEndWithFaults", func(t *testing.T) { RunEndToEnd(t, newLog(t)) })
}

// testAppendBatch checks a BatchAppender: a batch over two streams keeps its order in each stream and
// in the results. (All or nothing is checked with the stream bound, in RunStreamQuota.)
func testAppendBatch(t *testing.T, l driver.Log) {
	ctx := context.Background()
	ba := l.(driver.BatchAppender)
	publish := func() { // a Sequencing log numbers after the commit: number what is there
		if sq, ok := l.(driver.Sequencing); ok {
			for {
				runs, err := sq.Sequence(ctx, 100)
				check.NoError(t, err)
				if len(runs) == 0 {
					return
				}
			}
		}
	}
	out, err := ba.AppendBatch(ctx, nil)
	check.NoError(t, err)
	check.Len(t, out, 0)

	streams := []string{"we_a", "we_b", "we_a", "we_a", "we_b"}
	batch := make([]driver.StreamEvent, len(streams))
	for i, s := range streams {
		batch[i] = driver.StreamEvent{Stream: s, Event: ev("order.created", t0(), fmt.Sprintf(`{"i":%d}`, i))}
	}
	batch[1].Event.ID = "evt_given"
	out, err = ba.AppendBatch(ctx, batch)
	check.NoError(t, err)
	check.Len(t, out, len(batch))
	check.Equal(t, "evt_given", out[1].ID, "a given ID is kept")
	for i, e := range out {
		check.True(t, e.ID != "", "result %d has no ID", i)
		check.JSONEq(t, fmt.Sprintf(`{"i":%d}`, i), string(e.Data), "results in the batch's order")
	}
	publish()
	want := map[string][]string{"we_a": {out[0].ID, out[2].ID, out[3].ID}, "we_b": {out[1].ID, out[4].ID}}
	for stream, ids := range want {
		evs, _, err := l.Range(ctx, stream, 1, math.MaxUint64, 10)
		check.NoError(t, err)
		got := make([]string, len(evs))
		for i, e := range evs {
			got[i] = e.ID
			check.Equal(t, uint64(i+1), e.Sequence)
		}
		check.Equal(t, ids, got, "%s in the batch's order", stream)
	}

}

func ev(typ string, created time.Time, data string) webhook.Event {
	return webhook.Event{Type: typ, Created: created.Unix(), APIVersion: "v1", Data: json.RawMessage(data)}
}

func appendN(t *testing.T, l driver.Log, stream string, n int, created func(i int) time.Time) []webhook.Event {
	t.Helper()
	out := make([]webhook.Event, n)
	for i := range n {
		e, err := l.Append(context.Background(), driver.StreamEvent{Stream: stream, Event: ev("order.created", created(i), fmt.Sprintf(`{"n":%d}`, i))})
		check.NoError(t, err)
		out[i] = e
	}
	return out
}

// req is a claim of at most limit deliveries with no per-stream bound and nothing skipped.
func req(now, until time.Time, limit int) driver.ClaimRequest {
	return driver.ClaimRequest{Now: now, LeaseUntil: until, Limit: limit}
}

func at(d time.Duration) func(int) time.Time { return func(int) time.Time { return t0().Add(d) } }

func seqs[T any](xs []T, f func(T) uint64) []uint64 {
	out := make([]uint64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func evSeq(e webhook.Event) uint64   { return e.Sequence }
func dlSeq(d driver.Delivery) uint64 { return d.Sequence }
func span(from, to uint64) (s []uint64) { // from..to inclusive
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func testAppendNumbers(t *testing.T, l driver.Log) {
	a := appendN(t, l, "we_a", 3, at(0))
	b := appendN(t, l, "we_b", 2, at(0))
	a = append(a, appendN(t, l, "we_a", 2, at(0))...)
	check.Equal(t, span(1, 5), seqs(a, evSeq))
	check.Equal(t, span(1, 2), seqs(b, evSeq))
	got, more, err := l.Range(context.Background(), "we_a", 1, math.MaxUint64, 100)
	check.NoError(t, err)
	check.Equal(t, false, more, "has_more")
	check.Equal(t, a, got)
}

func testAppendKeepsFields(t *testing.T, l driver.Log) {
	ctx := context.Background()
	data := []byte(`{"order": {"id":"ord_1", "qty": 3},  "note":"caf\u00e9 ☕"}`)
	in := webhook.Event{ID: "evt_given", Sequence: 99, Type: "order.filled", Created: t0().Unix(), APIVersion: "2026-01-01", Data: data}
	out, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: in})
	check.NoError(t, err)
	check.Equal(t, uint64(1), out.Sequence, "the log assigns the sequence, whatever the caller sent")
	check.Equal(t, "evt_given", out.ID)
	data[2] = 'X' // the log must not alias the caller's buffer

	auto, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: ev("order.created", t0(), `{}`)})
	check.NoError(t, err)
	check.True(t, strings.HasPrefix(auto.ID, "evt_"), "an empty ID gets evt_…, got %q", auto.ID)
	other, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: ev("order.created", t0(), `{}`)})
	check.NoError(t, err)
	check.NotEqual(t, auto.ID, other.ID)

	got, _, err := l.Range(ctx, "we_a", 1, 1, 1)
	check.NoError(t, err)
	check.Len(t, got, 1)
	want := in
	want.Sequence = 1
	want.Data = []byte(`{"order": {"id":"ord_1", "qty": 3},  "note":"caf\u00e9 ☕"}`)
	check.Equal(t, want.ID, got[0].ID)
	check.Equal(t, want.Sequence, got[0].Sequence)
	check.Equal(t, want.Type, got[0].Type)
	check.Equal(t, want.Created, got[0].Created)
	check.Equal(t, want.APIVersion, got[0].APIVersion)
	check.Equal(t, string(want.Data), string(got[0].Data), "data is stored byte for byte")
}

func testConcurrentAppends(t *testing.T, l driver.Log) {
	ctx := context.Background()
	got := make([][]uint64, Racers)
	var wg sync.WaitGroup
	errs := make(chan error, Racers)
	for g := range Racers {
		wg.Go(func() {
			for i := range PerRacer {
				e, err := l.Append(ctx, driver.StreamEvent{Stream: "we_hot", Event: ev("order.created", t0(), fmt.Sprintf(`{"g":%d,"i":%d}`, g, i))})
				if err != nil {
					errs <- err
					return
				}
				got[g] = append(got[g], e.Sequence)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		check.NoError(t, err)
	}
	var all []uint64
	for g, s := range got {
		check.True(t, slices.IsSorted(s), "racer %d saw its own appends out of order", g)
		all = append(all, s...)
	}
	slices.Sort(all)
	check.Equal(t, span(1, Racers*PerRacer), all, "sequences must be exactly 1..%d", Racers*PerRacer)

	// The log holds the same: read it back in pages and check every event is where its number says.
	var read []uint64
	for from := uint64(1); ; {
		page, more, err := l.Range(ctx, "we_hot", from, math.MaxUint64, producer.MaxRangeLimit)
		check.NoError(t, err)
		read = append(read, seqs(page, evSeq)...)
		if !more {
			break
		}
		from = page[len(page)-1].Sequence + 1
	}
	check.Equal(t, span(1, Racers*PerRacer), read)
}

func testRange(t *testing.T, l driver.Log) {
	ctx := context.Background()
	appendN(t, l, "we_a", 10, at(0))
	appendN(t, l, "we_b", 3, at(0))
	for _, tc := range []struct {
		name      string
		stream    string
		from, to  uint64
		limit     int
		want      []uint64
		wantMore  bool
		wantEmpty bool
	}{
		{name: "all", stream: "we_a", from: 1, to: 10, limit: 100, want: span(1, 10)},
		{name: "inclusive middle", stream: "we_a", from: 3, to: 5, limit: 100, want: span(3, 5)},
		{name: "single", stream: "we_a", from: 10, to: 10, limit: 1, want: span(10, 10)},
		{name: "limited", stream: "we_a", from: 1, to: 10, limit: 4, want: span(1, 4), wantMore: true},
		{name: "open end limited", stream: "we_a", from: 7, to: math.MaxUint64, limit: 3, want: span(7, 9), wantMore: true},
		{name: "limit exactly reaches end", stream: "we_a", from: 8, to: math.MaxUint64, limit: 3, want: span(8, 10)},
		{name: "limit exactly reaches to", stream: "we_a", from: 2, to: 5, limit: 4, want: span(2, 5)},
		{name: "to past the end", stream: "we_a", from: 9, to: 1000, limit: 100, want: span(9, 10)},
		{name: "from past the end", stream: "we_a", from: 11, to: 20, limit: 5, wantEmpty: true},
		{name: "far past the end", stream: "we_a", from: math.MaxUint64, to: math.MaxUint64, limit: 5, wantEmpty: true},
		{name: "other stream", stream: "we_b", from: 1, to: math.MaxUint64, limit: 100, want: span(1, 3)},
		{name: "unknown stream", stream: "we_none", from: 1, to: 10, limit: 100, wantEmpty: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, more, err := l.Range(ctx, tc.stream, tc.from, tc.to, tc.limit)
			check.NoError(t, err)
			check.Equal(t, tc.wantMore, more, "has_more")
			if tc.wantEmpty {
				check.Len(t, got, 0)
				return
			}
			check.Equal(t, tc.want, seqs(got, evSeq))
			for _, e := range got {
				check.JSONEq(t, fmt.Sprintf(`{"n":%d}`, e.Sequence-1), string(e.Data), "event %d holds its own data", e.Sequence)
			}
		})
	}
}

func testClaimDue(t *testing.T, l driver.Log) {
	ctx := context.Background()
	a := appendN(t, l, "we_a", 3, at(0))
	appendN(t, l, "we_b", 2, at(10*time.Second))

	got, err := l.Claim(ctx, req(t0(), t0().Add(time.Minute), 100))
	check.NoError(t, err)
	check.Equal(t, []uint64{1, 2, 3}, seqs(got, dlSeq), "only we_a is due at t0()")
	for i, d := range got {
		check.Equal(t, "we_a", d.Stream)
		check.Equal(t, a[i], d.Event)
		check.Equal(t, 0, d.Attempts)
		check.NotEqual(t, 0, d.Token)
		check.Instant(t, t0().Add(time.Minute), d.LeaseUntil, "Delivery.LeaseUntil")
	}
	st, err := l.Status(ctx, "we_a", 1)
	check.NoError(t, err)
	check.Equal(t, driver.Pending, st.State)
	check.Instant(t, t0().Add(time.Minute), st.LeaseUntil, "DeliveryStatus.LeaseUntil")

	again, err := l.Claim(ctx, req(t0().Add(5*time.Second), t0().Add(time.Minute), 100))
	check.NoError(t, err)
	check.Len(t, again, 0, "leased deliveries are not handed out twice")

	later, err := l.Claim(ctx, req(t0().Add(10*time.Second), t0().Add(time.Minute), 100))
	check.NoError(t, err)
	check.Len(t, later, 2)
	check.Equal(t, "we_b", later[0].Stream)
	check.Equal(t, []uint64{1, 2}, seqs(later, dlSeq))

	none, err := l.Claim(ctx, req(t0().Add(10*time.Second), t0().Add(time.Minute), 0))
	check.NoError(t, err)
	check.Len(t, none, 0, "limit 0 claims nothing")
}

func testClaimOrder(t *testing.T, l driver.Log) {
	ctx := context.Background()
	appendN(t, l, "we_b", 2, at(2*time.Second)) // due later
	appendN(t, l, "we_c", 2, at(time.Second))
	appendN(t, l, "we_a", 2, at(time.Second))
	now := t0().Add(time.Minute)

	first, err := l.Claim(ctx, req(now, now.Add(time.Minute), 3))
	check.NoError(t, err)
	type key struct {
		s string
		n uint64
	}
	keys := func(ds []driver.Delivery) (out []key) {
		for _, d := range ds {
			out = append(out, key{d.Stream, d.Sequence})
		}
		return out
	}
	check.Equal(t, []key{{"we_a", 1}, {"we_a", 2}, {"we_c", 1}}, keys(first), "by next attempt, then stream, then sequence; at most limit")
	rest, err := l.Claim(ctx, req(now, now.Add(time.Minute), 10))
	check.NoError(t, err)
	check.Equal(t, []key{{"we_b", 1}, {"we_b", 2}}, keys(rest), "we_c 2 waits while we_c 1 is held: an endpoint has one holder at a time")
}

func testClaimPerStreamAndSkip(t *testing.T, l driver.Log) {
	ctx := context.Background()
	appendN(t, l, "we_big", 50, at(0)) // a backlog, due first
	appendN(t, l, "we_x", 2, at(time.Second))
	appendN(t, l, "we_y", 2, at(time.Second))
	now := t0().Add(time.Minute)

	got, err := l.Claim(ctx, driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10,
		PerStream: 3, Skip: []string{"we_y"}})
	check.NoError(t, err)
	per := map[string][]uint64{}
	for _, d := range got {
		per[d.Stream] = append(per[d.Stream], d.Sequence)
	}
	check.Equal(t, map[string][]uint64{"we_big": {1, 2, 3}, "we_x": {1, 2}}, per, "a backlog gets PerStream, the lowest sequences; a skipped stream nothing")

	// Settling frees the stream for the next claim, which goes on from where it stopped.
	for _, d := range got {
		check.NoError(t, l.Delivered(ctx, d.Lease, driver.Attempt{At: now}))
	}
	next, err := l.Claim(ctx, driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 100, PerStream: 3})
	check.NoError(t, err)
	per = map[string][]uint64{}
	for _, d := range next {
		per[d.Stream] = append(per[d.Stream], d.Sequence)
	}
	check.Equal(t, map[string][]uint64{"we_big": {4, 5, 6}, "we_y": {1, 2}}, per)
}

func testClaimOneHolderPerStream(t *testing.T, l driver.Log) {
	ctx := context.Background()
	appendN(t, l, "we_a", 3, at(0))
	first := claimOne(t, l, t0(), 30*time.Second)
	check.Equal(t, uint64(1), first.Sequence)

	// Events 2 and 3 are due, but the stream is held: nobody else may deliver behind the holder.
	none, err := l.Claim(ctx, req(t0().Add(time.Second), t0().Add(time.Hour), 10))
	check.NoError(t, err)
	check.Len(t, none, 0)

	// A failed attempt scheduled for later releases the stream; the rest are due and claimable.
	check.NoError(t, l.Release(ctx, first.Lease, t0().Add(time.Hour)))
	got, err := l.Claim(ctx, req(t0().Add(time.Second), t0().Add(time.Hour), 10))
	check.NoError(t, err)
	check.Equal(t, []uint64{2, 3}, seqs(got, dlSeq))

	// A holder that died holds the stream only until its lease ends.
	appendN(t, l, "we_b", 2, at(0))
	dead := claimOne(t, l, t0().Add(2*time.Second), 10*time.Second)
	check.Equal(t, "we_b", dead.Stream)
	got, err = l.Claim(ctx, req(t0().Add(12*time.Second), t0().Add(time.Hour), 10))
	check.NoError(t, err)
	check.Equal(t, []uint64{1, 2}, seqs(got, dlSeq), "after the lease, the whole stream is claimable again")
}

func testAttempts(t *testing.T, l driver.Log) {
	ctx := context.Background()
	evs := appendN(t, l, "we_a", 2, at(0))
	appendN(t, l, "we_b", 1, at(0))

	// Event 1: a 503, a timeout, then a 204. Event 2: abandoned. we_b: delivered.
	d := claimOne(t, l, t0(), time.Minute)
	check.NoError(t, l.Failed(ctx, d.Lease, driver.Attempt{At: t0().Add(time.Second), Latency: 120 * time.Millisecond,
		StatusCode: 503, Class: producer.ClassStatus, Reason: "status 503", Response: `{"error":"busy"}`,
		RetryAt: t0().Add(time.Minute)}))
	for _, o := range mustClaim(t, l, t0().Add(2*time.Second)) { // we_a 2 and we_b 1 (we_a 1 waits)
		if o.Stream == "we_b" {
			check.NoError(t, l.Delivered(ctx, o.Lease, driver.Attempt{At: t0().Add(3 * time.Second), StatusCode: 200, Latency: time.Millisecond}))
		} else {
			check.NoError(t, l.Failed(ctx, o.Lease, driver.Attempt{At: t0().Add(3 * time.Second), Class: producer.ClassConnection, Reason: "refused"}))
		}
	}
	d = claimOne(t, l, t0().Add(time.Minute), time.Minute)
	check.NoError(t, l.Failed(ctx, d.Lease, driver.Attempt{At: t0().Add(61 * time.Second), Latency: 10 * time.Second,
		Class: producer.ClassTimeout, Reason: "timeout", RetryAt: t0().Add(2 * time.Minute)}))
	d = claimOne(t, l, t0().Add(2*time.Minute), time.Minute)
	check.NoError(t, l.Delivered(ctx, d.Lease, driver.Attempt{At: t0().Add(121 * time.Second), StatusCode: 204, Latency: 5 * time.Millisecond}))

	all, more, err := l.Attempts(ctx, driver.AttemptQuery{Stream: "we_a", Limit: 10})
	check.NoError(t, err)
	check.Equal(t, false, more, "has_more")
	check.Len(t, all, 4)
	type row struct {
		seq     uint64
		number  int
		outcome driver.Outcome
		status  int
	}
	var rows []row
	ids := map[uint64]bool{}
	for i, a := range all {
		rows = append(rows, row{a.Sequence, a.Number, a.Outcome, a.StatusCode})
		check.Equal(t, "we_a", a.Stream)
		// IDs are random (a counter would tell each tenant the others' volume): unique and non-zero,
		// in no order; the history is ordered by time.
		check.True(t, a.ID != 0 && !ids[a.ID], "attempt ID %d: want non-zero and unique", a.ID)
		ids[a.ID] = true
		if i > 0 {
			check.True(t, !a.At.After(all[i-1].At), "attempts at %v then %v: want newest first", all[i-1].At, a.At)
		}
	}
	check.Equal(t, []row{
		{1, 3, driver.OutcomeDelivered, 204},
		{1, 2, driver.OutcomeFailed, 0},
		{2, 1, driver.OutcomeAbandoned, 0},
		{1, 1, driver.OutcomeFailed, 503},
	}, rows)
	first := all[3]
	check.Equal(t, evs[0].ID, first.EventID)
	check.Instant(t, t0().Add(time.Second), first.At, "AttemptRecord.At")
	check.Equal(t, 120*time.Millisecond, first.Latency)
	check.Equal(t, producer.ClassStatus, first.Class)
	check.Equal(t, "status 503", first.Reason)
	check.Equal(t, `{"error":"busy"}`, first.Response)
	check.Instant(t, t0().Add(time.Minute), first.RetryAt, "AttemptRecord.RetryAt")

	// Filters and pages.
	got, more, err := l.Attempts(ctx, driver.AttemptQuery{Stream: "we_a", Sequence: 1, Limit: 2})
	check.NoError(t, err)
	check.Equal(t, true, more, "has_more")
	check.Equal(t, []int{3, 2}, []int{got[0].Number, got[1].Number})
	got, more, err = l.Attempts(ctx, driver.AttemptQuery{Stream: "we_a", Sequence: 1, Limit: 2, Before: got[1].ID})
	check.NoError(t, err)
	check.Equal(t, false, more, "has_more")
	check.Len(t, got, 1)
	check.Equal(t, 1, got[0].Number)
	got, _, err = l.Attempts(ctx, driver.AttemptQuery{Stream: "we_a", Outcome: driver.OutcomeFailed, Limit: 10})
	check.NoError(t, err)
	check.Len(t, got, 2)
	got, _, err = l.Attempts(ctx, driver.AttemptQuery{Stream: "we_b", Limit: 10})
	check.NoError(t, err)
	check.Len(t, got, 1)
	check.Equal(t, driver.OutcomeDelivered, got[0].Outcome)
	got, more, err = l.Attempts(ctx, driver.AttemptQuery{Stream: "we_none", Limit: 10})
	check.NoError(t, err)
	check.Equal(t, false, more, "has_more")
	check.Len(t, got, 0)

	// A lost lease records nothing.
	check.ErrorIs(t, l.Delivered(ctx, d.Lease, driver.Attempt{At: t0()}), driver.ErrLeaseLost)
	got, _, err = l.Attempts(ctx, driver.AttemptQuery{Stream: "we_a", Limit: 10})
	check.NoError(t, err)
	check.Len(t, got, 4)

	// Attempts go with their events.
	n, err := l.Cleanup(ctx, t0().Add(time.Second), 1)
	check.NoError(t, err)
	check.Equal(t, 1, n)
	got, _, err = l.Attempts(ctx, driver.AttemptQuery{Stream: "we_a", Limit: 10})
	check.NoError(t, err)
	check.Equal(t, []uint64{2}, seqs(got, func(a driver.AttemptRecord) uint64 { return a.Sequence }), "we_a 1 and its three attempts are gone")
}

func mustClaim(t *testing.T, l driver.Log, now time.Time) []driver.Delivery {
	t.Helper()
	got, err := l.Claim(context.Background(), req(now, now.Add(time.Minute), 100))
	check.NoError(t, err)
	return got
}

func claimOne(t *testing.T, l driver.Log, now time.Time, lease time.Duration) driver.Delivery {
	t.Helper()
	got, err := l.Claim(context.Background(), req(now, now.Add(lease), 1))
	check.NoError(t, err)
	check.Len(t, got, 1)
	return got[0]
}

func testLeaseFencing(t *testing.T, l driver.Log) {
	ctx := context.Background()
	appendN(t, l, "we_a", 1, at(0))
	old := claimOne(t, l, t0(), 30*time.Second)

	none, err := l.Claim(ctx, req(t0().Add(29*time.Second), t0().Add(time.Hour), 10))
	check.NoError(t, err)
	check.Len(t, none, 0, "the lease is live until it ends")

	// The holder died; its lease ends and another dispatcher takes the delivery over.
	fresh := claimOne(t, l, t0().Add(30*time.Second), 30*time.Second)
	check.Equal(t, old.Sequence, fresh.Sequence)
	check.NotEqual(t, old.Token, fresh.Token, "every claim gets a new fencing token")

	check.ErrorIs(t, l.Delivered(ctx, old.Lease, driver.Attempt{At: t0().Add(31 * time.Second)}), driver.ErrLeaseLost)
	check.ErrorIs(t, l.Failed(ctx, old.Lease, driver.Attempt{At: t0(), RetryAt: t0().Add(time.Hour), Reason: "late"}), driver.ErrLeaseLost)
	check.ErrorIs(t, l.Release(ctx, old.Lease, t0()), driver.ErrLeaseLost)

	check.NoError(t, l.Delivered(ctx, fresh.Lease, driver.Attempt{At: t0().Add(40 * time.Second)}))
	st, err := l.Status(ctx, "we_a", 1)
	check.NoError(t, err)
	check.Equal(t, driver.Delivered, st.State)
	check.Instant(t, t0().Add(40*time.Second), st.DeliveredAt, "DeliveryStatus.DeliveredAt")
	check.Instant(t, time.Time{}, st.LeaseUntil, "DeliveryStatus.LeaseUntil of a delivered event")
	check.Equal(t, 0, st.Attempts, "no failed attempts")

	// A lease that ran out but was not taken over still settles: the delivery did happen.
	appendN(t, l, "we_a", 1, at(0))
	slow := claimOne(t, l, t0(), time.Second)
	check.NoError(t, l.Delivered(ctx, slow.Lease, driver.Attempt{At: t0().Add(time.Hour)}))

	none, err = l.Claim(ctx, req(t0().Add(48*time.Hour), t0().Add(49*time.Hour), 10))
	check.NoError(t, err)
	check.Len(t, none, 0, "delivered events are never claimed again")
}

func testFailedRetries(t *testing.T, l driver.Log) {
	ctx := context.Background()
	appendN(t, l, "we_a", 1, at(0))
	d := claimOne(t, l, t0(), time.Minute)
	check.NoError(t, l.Failed(ctx, d.Lease, driver.Attempt{At: t0().Add(time.Second), RetryAt: t0().Add(time.Minute), Reason: "status 503"}))

	st, err := l.Status(ctx, "we_a", 1)
	check.NoError(t, err)
	check.Equal(t, driver.Pending, st.State)
	check.Equal(t, 1, st.Attempts)
	check.Equal(t, "status 503", st.LastError)
	check.Instant(t, t0().Add(time.Minute), st.NextAttempt, "DeliveryStatus.NextAttempt")
	check.Instant(t, t0().Add(time.Second), st.LastAttempt, "DeliveryStatus.LastAttempt")
	check.Instant(t, time.Time{}, st.LeaseUntil, "DeliveryStatus.LeaseUntil: a settled attempt ends the lease")

	none, err := l.Claim(ctx, req(t0().Add(59*time.Second), t0().Add(time.Hour), 10))
	check.NoError(t, err)
	check.Len(t, none, 0, "not due before its retry time")
	d2 := claimOne(t, l, t0().Add(time.Minute), time.Minute)
	check.Equal(t, 1, d2.Attempts)
	check.NoError(t, l.Failed(ctx, d2.Lease, driver.Attempt{At: t0().Add(61 * time.Second), RetryAt: t0().Add(5 * time.Minute), Reason: "timeout"}))
	d3 := claimOne(t, l, t0().Add(5*time.Minute), time.Minute)
	check.Equal(t, 2, d3.Attempts)
	check.NoError(t, l.Delivered(ctx, d3.Lease, driver.Attempt{At: t0().Add(5 * time.Minute)}))
	st, err = l.Status(ctx, "we_a", 1)
	check.NoError(t, err)
	check.Equal(t, driver.Delivered, st.State)
	check.Equal(t, 2, st.Attempts)
}

func testAbandon(t *testing.T, l driver.Log) {
	ctx := context.Background()
	appendN(t, l, "we_a", 1, at(0))
	d := claimOne(t, l, t0(), time.Minute)
	check.NoError(t, l.Failed(ctx, d.Lease, driver.Attempt{At: t0(), Reason: "endpoint not found"}))
	st, err := l.Status(ctx, "we_a", 1)
	check.NoError(t, err)
	check.Equal(t, driver.Abandoned, st.State)
	check.Equal(t, 1, st.Attempts)
	none, err := l.Claim(ctx, req(t0().Add(1000*time.Hour), t0().Add(1001*time.Hour), 10))
	check.NoError(t, err)
	check.Len(t, none, 0, "abandoned deliveries are never claimed")
	got, _, err := l.Range(ctx, "we_a", 1, 1, 1)
	check.NoError(t, err)
	check.Len(t, got, 1, "an abandoned event stays retrievable by range")
}

func testRelease(t *testing.T, l driver.Log) {
	ctx := context.Background()
	appendN(t, l, "we_a", 1, at(0))
	d := claimOne(t, l, t0(), time.Hour)
	check.NoError(t, l.Release(ctx, d.Lease, t0().Add(time.Second)))
	st, err := l.Status(ctx, "we_a", 1)
	check.NoError(t, err)
	check.Equal(t, 0, st.Attempts)
	check.Instant(t, t0().Add(time.Second), st.NextAttempt, "DeliveryStatus.NextAttempt after Release")
	none, err := l.Claim(ctx, req(t0(), t0().Add(time.Hour), 10))
	check.NoError(t, err)
	check.Len(t, none, 0)
	again := claimOne(t, l, t0().Add(time.Second), time.Hour)
	check.Equal(t, 0, again.Attempts)
	check.NotEqual(t, d.Token, again.Token)
}

func testSettledLease(t *testing.T, l driver.Log) {
	ctx := context.Background()
	appendN(t, l, "we_a", 1, at(0))
	d := claimOne(t, l, t0(), time.Hour)
	check.NoError(t, l.Delivered(ctx, d.Lease, driver.Attempt{At: t0()}))
	for name, err := range map[string]error{
		"delivered twice": l.Delivered(ctx, d.Lease, driver.Attempt{At: t0()}),
		"failed after":    l.Failed(ctx, d.Lease, driver.Attempt{At: t0(), RetryAt: t0().Add(time.Hour)}),
		"released after":  l.Release(ctx, d.Lease, t0()),
		"zero token":      l.Delivered(ctx, driver.Lease{Stream: "we_a", Sequence: 1}, driver.Attempt{At: t0()}),
		"unknown stream":  l.Delivered(ctx, driver.Lease{Stream: "we_x", Sequence: 1, Token: d.Token}, driver.Attempt{At: t0()}),
		"unknown seq":     l.Delivered(ctx, driver.Lease{Stream: "we_a", Sequence: 2, Token: d.Token}, driver.Attempt{At: t0()}),
	} {
		check.ErrorIs(t, err, driver.ErrLeaseLost, name)
	}
	st, err := l.Status(ctx, "we_a", 1)
	check.NoError(t, err)
	check.Equal(t, driver.Delivered, st.State, "a stale settlement changes nothing")
	_, err = l.Status(ctx, "we_a", 2)
	check.ErrorIs(t, err, driver.ErrNotFound)
	_, err = l.Status(ctx, "we_x", 1)
	check.ErrorIs(t, err, driver.ErrNotFound)
}

func testConcurrentClaims(t *testing.T, l driver.Log) {
	ctx := context.Background()
	const streams, per = 5, 40
	for s := range streams {
		appendN(t, l, fmt.Sprintf("we_%d", s), per, at(0))
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
		errs = make(chan error, 8)
	)
	for range 8 {
		wg.Go(func() {
			for idle := 0; idle < 50; {
				got, err := l.Claim(ctx, driver.ClaimRequest{Now: t0(), LeaseUntil: t0().Add(time.Hour), Limit: 3, PerStream: 1})
				if err != nil {
					errs <- err
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
					if seen[key{d.Stream, d.Sequence}]++; held[d.Stream] {
						errs <- fmt.Errorf("stream %s claimed while another claimer holds it", d.Stream)
					}
				}
				for _, d := range got {
					held[d.Stream] = true
				}
				mu.Unlock()
				for _, d := range got {
					// One delivery per stream per claim: settling it frees the stream.
					mu.Lock()
					delete(held, d.Stream)
					mu.Unlock()
					if err := l.Delivered(ctx, d.Lease, driver.Attempt{At: t0()}); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		check.NoError(t, err)
	}
	check.Equal(t, streams*per, len(seen), "deliveries claimed: want every one")
	for k, n := range seen {
		check.Equal(t, 1, n, "%v claimed %d times under one live lease", k, n)
	}
	rest, err := l.Claim(ctx, req(t0(), t0().Add(time.Hour), 100))
	check.NoError(t, err)
	check.Len(t, rest, 0)
}

func testRetention(t *testing.T, l driver.Log) {
	ctx := context.Background()
	appendN(t, l, "we_a", 10, func(i int) time.Time { return t0().Add(time.Duration(i) * time.Second) })
	appendN(t, l, "we_b", 3, at(100*time.Second))

	n, err := l.Cleanup(ctx, t0().Add(5*time.Second), 3)
	check.NoError(t, err)
	check.Equal(t, 3, n, "bounded by limit")

	_, _, err = l.Range(ctx, "we_a", 1, 10, 100)
	check.ErrorIs(t, err, driver.ErrPruned)
	var pe *driver.PrunedError
	if !errors.As(err, &pe) {
		t.Fatalf("got error %v, want a *driver.PrunedError", err)
	}
	check.Equal(t, uint64(4), pe.FirstRetained)
	check.Equal(t, "we_a", pe.Stream)
	_, _, err = l.Range(ctx, "we_a", 3, 3, 1)
	check.ErrorIs(t, err, driver.ErrPruned, "a range entirely below the window")
	got, _, err := l.Range(ctx, "we_a", 4, 10, 100)
	check.NoError(t, err)
	check.Equal(t, span(4, 10), seqs(got, evSeq))
	_, err = l.Status(ctx, "we_a", 3)
	check.ErrorIs(t, err, driver.ErrNotFound)

	n, err = l.Cleanup(ctx, t0().Add(5*time.Second), 100)
	check.NoError(t, err)
	check.Equal(t, 2, n, "events created at t0()+3s and t0()+4s; t0()+5s is not before the cutoff")
	n, err = l.Cleanup(ctx, t0().Add(5*time.Second), 100)
	check.NoError(t, err)
	check.Equal(t, 0, n, "nothing left to clean")
	n, err = l.Cleanup(ctx, t0().Add(6*time.Second), 100)
	check.NoError(t, err)
	check.Equal(t, 1, n, "an event created at second 5 is before second 6")

	got, _, err = l.Range(ctx, "we_b", 1, 3, 100)
	check.NoError(t, err)
	check.Len(t, got, 3, "younger streams are untouched")

	// Everything goes; the counters stay, so no sequence is ever handed out twice.
	for {
		n, err := l.Cleanup(ctx, t0().Add(time.Hour), 4)
		check.NoError(t, err)
		if n == 0 {
			break
		}
	}
	_, _, err = l.Range(ctx, "we_a", 1, math.MaxUint64, 100)
	if !errors.As(err, &pe) {
		t.Fatalf("got error %v, want a *driver.PrunedError", err)
	}
	check.Equal(t, uint64(11), pe.FirstRetained)
	got, more, err := l.Range(ctx, "we_a", 11, math.MaxUint64, 100)
	check.NoError(t, err)
	check.Len(t, got, 0)
	check.Equal(t, false, more, "has_more")
	e, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: ev("order.created", t0().Add(2*time.Hour), `{}`)})
	check.NoError(t, err)
	check.Equal(t, uint64(11), e.Sequence)
	e, err = l.Append(ctx, driver.StreamEvent{Stream: "we_b", Event: ev("order.created", t0().Add(2*time.Hour), `{}`)})
	check.NoError(t, err)
	check.Equal(t, uint64(4), e.Sequence)

	n, err = l.Cleanup(ctx, t0().Add(time.Hour), 0)
	check.NoError(t, err)
	check.Equal(t, 0, n, "limit 0 removes nothing")
}

func testRetentionContiguous(t *testing.T, l driver.Log) {
	ctx := context.Background()
	// Racing appenders can commit a later timestamp under an earlier sequence.
	created := []time.Duration{0, 50 * time.Second, time.Second, 60 * time.Second}
	appendN(t, l, "we_a", len(created), func(i int) time.Time { return t0().Add(created[i]) })

	n, err := l.Cleanup(ctx, t0().Add(10*time.Second), 1)
	check.NoError(t, err)
	check.Equal(t, 1, n, "the oldest event alone")
	n, err = l.Cleanup(ctx, t0().Add(10*time.Second), 1)
	check.NoError(t, err)
	check.Equal(t, 2, n, "removing sequence 3 takes sequence 2 with it: the window stays contiguous")
	var pe *driver.PrunedError
	_, _, err = l.Range(ctx, "we_a", 2, 4, 10)
	if !errors.As(err, &pe) {
		t.Fatalf("got error %v, want a *driver.PrunedError", err)
	}
	check.Equal(t, uint64(4), pe.FirstRetained)
	got, _, err := l.Range(ctx, "we_a", 4, 4, 10)
	check.NoError(t, err)
	check.Equal(t, []uint64{4}, seqs(got, evSeq))
}

func testCancelled(t *testing.T, l driver.Log) {
	appendN(t, l, "we_a", 1, at(0))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: ev("order.created", t0(), `{}`)})
	check.Error(t, err)
	_, _, err = l.Range(ctx, "we_a", 1, 1, 1)
	check.Error(t, err)
	_, err = l.Claim(ctx, req(t0(), t0().Add(time.Hour), 1))
	check.Error(t, err)
	check.True(t, errors.Is(err, context.Canceled), "got %v", err)
	got, _, err := l.Range(context.Background(), "we_a", 1, math.MaxUint64, 10)
	check.NoError(t, err)
	check.Len(t, got, 1, "the cancelled append stored nothing")
}
