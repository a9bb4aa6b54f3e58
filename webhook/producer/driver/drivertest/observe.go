package drivertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// numberAll numbers every appended event of a Sequencing log; other logs number at Append.
func numberAll(t *testing.T, l driver.Log) {
	t.Helper()
	sq, ok := l.(driver.Sequencing)
	if !ok {
		return
	}
	for {
		runs, err := sq.Sequence(context.Background(), 1000)
		check.NoError(t, err)
		if len(runs) == 0 {
			return
		}
	}
}

// trace is a stored trace context, as a Delivery returns it.
type trace struct{ parent, state string }

// testTraceContext: the trace context appended with an event comes back with the claimed delivery,
// for Append and AppendBatch, and an event appended without one has none.
func testTraceContext(t *testing.T, l driver.Log) {
	ctx := context.Background()
	tc := trace{
		parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		state:  "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
	}
	other := trace{parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}
	_, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: ev("order.created", t0(), `{}`), TraceParent: tc.parent, TraceState: tc.state})
	check.NoError(t, err)
	_, err = l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: ev("order.created", t0(), `{}`)})
	check.NoError(t, err)
	want := map[uint64]trace{1: tc, 2: {}}
	if ba, ok := l.(driver.BatchAppender); ok {
		e := ev("order.filled", t0(), `{}`)
		_, err = ba.AppendBatch(ctx, []driver.StreamEvent{{Stream: "we_a", Event: e, TraceParent: other.parent}, {Stream: "we_a", Event: e, TraceParent: other.parent}})
		check.NoError(t, err)
		want[3], want[4] = other, other
	}
	numberAll(t, l)
	got := mustClaim(t, l, t0())
	check.Len(t, got, len(want))
	for _, d := range got {
		check.Equal(t, want[d.Sequence], trace{d.TraceParent, d.TraceState}, "trace context of event %d", d.Sequence)
	}
}

// testBacklog: Backlog counts each stream's pending events — due, waiting for a retry, or not yet
// numbered — and reports the oldest one's creation time; delivered and abandoned events leave it.
func testBacklog(t *testing.T, l driver.Log) {
	ctx := context.Background()
	bl := l.(driver.Backlogger)
	got, err := bl.Backlog(ctx)
	check.NoError(t, err)
	check.Len(t, got, 0, "an empty log has no backlog")

	appendN(t, l, "we_a", 4, func(i int) time.Time { return t0().Add(time.Duration(i) * time.Second) })
	appendN(t, l, "we_b", 1, at(time.Minute))
	numberAll(t, l)
	ds := mustClaim(t, l, t0().Add(time.Hour))
	check.Len(t, ds, 5)
	byKey := map[string]driver.Delivery{}
	for _, d := range ds {
		byKey[fmt.Sprintf("%s/%d", d.Stream, d.Sequence)] = d
	}
	now := t0().Add(time.Hour)
	check.NoError(t, l.Delivered(ctx, byKey["we_a/1"].Lease, driver.Attempt{At: now}))
	check.NoError(t, l.Failed(ctx, byKey["we_a/2"].Lease, driver.Attempt{At: now, Class: producer.ClassStatus, Reason: "status 500"}))
	check.NoError(t, l.Failed(ctx, byKey["we_a/3"].Lease, driver.Attempt{At: now, RetryAt: now.Add(time.Hour), Class: producer.ClassStatus, Reason: "status 500"}))
	check.NoError(t, l.Release(ctx, byKey["we_a/4"].Lease, now))
	check.NoError(t, l.Delivered(ctx, byKey["we_b/1"].Lease, driver.Attempt{At: now}))

	want := []driver.Backlog{{Stream: "we_a", Events: 2, Oldest: t0().Add(2 * time.Second)}}
	if sq, ok := l.(driver.Sequencing); ok {
		// Appended and not numbered yet: undelivered all the same.
		_, err := sq.Append(ctx, driver.StreamEvent{Stream: "we_b", Event: ev("order.created", t0().Add(-time.Minute), `{}`)})
		check.NoError(t, err)
		_, err = sq.Append(ctx, driver.StreamEvent{Stream: "we_c", Event: ev("order.created", t0(), `{}`)})
		check.NoError(t, err)
		want = append(want, driver.Backlog{Stream: "we_b", Events: 1, Oldest: t0().Add(-time.Minute)},
			driver.Backlog{Stream: "we_c", Events: 1, Oldest: t0()})
	}
	got, err = bl.Backlog(ctx)
	check.NoError(t, err)
	check.Len(t, got, len(want))
	for i := range want {
		check.Equal(t, want[i].Stream, got[i].Stream, "stream %d", i)
		check.Equal(t, want[i].Events, got[i].Events, "events of %s", want[i].Stream)
		check.True(t, want[i].Oldest.Equal(got[i].Oldest), "oldest of %s: want %v, got %v", want[i].Stream, want[i].Oldest, got[i].Oldest)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = bl.Backlog(cctx)
	check.True(t, err != nil, "a cancelled context fails")
}
