package logtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/webhook/producer"
)

// numberAll numbers every appended event of a Sequencing log; other logs number at Append.
func numberAll(t *testing.T, l producer.Log) {
	t.Helper()
	sq, ok := l.(producer.Sequencing)
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

// testTraceContext: the trace context of Append's context comes back with the claimed delivery, for
// Append and AppendBatch, and an event appended without one has none.
func testTraceContext(t *testing.T, l producer.Log) {
	ctx := context.Background()
	tc := producer.TraceContext{
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		TraceState:  "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
	}
	other := producer.TraceContext{TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}
	_, err := l.Append(producer.WithTraceContext(ctx, tc), "we_a", ev("order.created", t0(), `{}`))
	check.NoError(t, err)
	_, err = l.Append(ctx, "we_a", ev("order.created", t0(), `{}`))
	check.NoError(t, err)
	want := map[uint64]producer.TraceContext{1: tc, 2: {}}
	if ba, ok := l.(producer.BatchAppender); ok {
		e := ev("order.filled", t0(), `{}`)
		_, err = ba.AppendBatch(producer.WithTraceContext(ctx, other), []producer.StreamEvent{{Stream: "we_a", Event: e}, {Stream: "we_a", Event: e}})
		check.NoError(t, err)
		want[3], want[4] = other, other
	}
	numberAll(t, l)
	got := mustClaim(t, l, t0())
	check.Len(t, got, len(want))
	for _, d := range got {
		check.Equal(t, want[d.Sequence], d.Trace, "trace context of event %d", d.Sequence)
	}
}

// testBacklog: Backlog counts each stream's pending events — due, waiting for a retry, or not yet
// numbered — and reports the oldest one's creation time; delivered and abandoned events leave it.
func testBacklog(t *testing.T, l producer.Log) {
	ctx := context.Background()
	bl := l.(producer.Backlogger)
	got, err := bl.Backlog(ctx)
	check.NoError(t, err)
	check.Len(t, got, 0, "an empty log has no backlog")

	appendN(t, l, "we_a", 4, func(i int) time.Time { return t0().Add(time.Duration(i) * time.Second) })
	appendN(t, l, "we_b", 1, at(time.Minute))
	numberAll(t, l)
	ds := mustClaim(t, l, t0().Add(time.Hour))
	check.Len(t, ds, 5)
	byKey := map[string]producer.Delivery{}
	for _, d := range ds {
		byKey[fmt.Sprintf("%s/%d", d.Stream, d.Sequence)] = d
	}
	now := t0().Add(time.Hour)
	check.NoError(t, l.Delivered(ctx, byKey["we_a/1"].Lease, producer.Attempt{At: now}))
	check.NoError(t, l.Failed(ctx, byKey["we_a/2"].Lease, producer.Attempt{At: now, Class: producer.ClassStatus, Reason: "status 500"}))
	check.NoError(t, l.Failed(ctx, byKey["we_a/3"].Lease, producer.Attempt{At: now, RetryAt: now.Add(time.Hour), Class: producer.ClassStatus, Reason: "status 500"}))
	check.NoError(t, l.Release(ctx, byKey["we_a/4"].Lease, now))
	check.NoError(t, l.Delivered(ctx, byKey["we_b/1"].Lease, producer.Attempt{At: now}))

	want := []producer.StreamBacklog{{Stream: "we_a", Events: 2, Oldest: t0().Add(2 * time.Second)}}
	if sq, ok := l.(producer.Sequencing); ok {
		// Appended and not numbered yet: undelivered all the same.
		_, err := sq.Append(ctx, "we_b", ev("order.created", t0().Add(-time.Minute), `{}`))
		check.NoError(t, err)
		_, err = sq.Append(ctx, "we_c", ev("order.created", t0(), `{}`))
		check.NoError(t, err)
		want = append(want, producer.StreamBacklog{Stream: "we_b", Events: 1, Oldest: t0().Add(-time.Minute)},
			producer.StreamBacklog{Stream: "we_c", Events: 1, Oldest: t0()})
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
