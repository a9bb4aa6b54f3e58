package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/svcplatform/conventions/examples/internal/apiclient"
)

// TestDemo runs the demo's logic in process, with harsher faults than the command's defaults, and
// checks the report: every order created once, every event processed once, nothing lost.
func TestDemo(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			opts := defaultOptions()
			opts.Orders = 120
			opts.Seed = seed
			opts.LoseResponses = 0.1
			opts.Faults = apiclient.Faults{Drop: 0.2, Duplicate: 0.15, Reorder: 0.15, BadSignature: 0.1}
			opts.Timeout = 40 * time.Second
			var progress bytes.Buffer
			opts.Progress = &progress

			rep, err := run(context.Background(), opts)
			require.NoError(t, err)
			var out bytes.Buffer
			rep.print(&out)
			t.Log("\n" + progress.String() + out.String())

			require.True(t, rep.OK(), "the demo's verdict")
			require.Contains(t, progress.String(), fmt.Sprintf("seed %d: run with -seed %d", seed, seed),
				"the seed is printed, so that a run can be repeated")
			require.Contains(t, out.String(), "a corrupted delivery that is also duplicated is rejected twice",
				"the report explains why rejections can outnumber bad_signature injections")
			require.LessOrEqual(t, rep.RejectedDeliveries, 2*rep.Faults["bad_signature"],
				"each injected bad signature is rejected once, or twice when the delivery was also duplicated")
			require.False(t, rep.TimedOut)
			require.Zero(t, rep.RequestErrors, "first error: %v", rep.FirstError)
			require.Equal(t, int64(opts.Orders), rep.OrdersCreated, "each logical order is created exactly once")
			require.Equal(t, opts.Orders, rep.DistinctOrderIDs)
			require.Zero(t, rep.Inconsistent, "a retried order must be answered with the same ID")
			require.Equal(t, rep.OrdersCreated, rep.EventsEmitted, "one endpoint: one event per order")
			require.Equal(t, rep.EventsEmitted, rep.EventsProcessed)
			require.Zero(t, rep.Lost())
			require.Zero(t, rep.DoneTwice())
			require.Zero(t, rep.ProcessedTwice)
			require.Zero(t, rep.MissingOrders)

			// The conditions the demo is about did happen.
			require.Positive(t, rep.ResponsesLost)
			require.GreaterOrEqual(t, rep.ReplaysServed, uint64(rep.ResponsesLost)+uint64(rep.Repeats),
				"every lost response and every deliberate repeat is answered by a replay")
			require.Positive(t, rep.Repeats)
			require.Positive(t, rep.ConcurrentPairs)
			require.Positive(t, rep.Faults["drop"])
			require.Positive(t, rep.Faults["bad_signature"])
			require.Positive(t, rep.Recovered, "dropped deliveries are recovered by range fetch")
			require.Positive(t, rep.RejectedDeliveries, "corrupted signatures are rejected")
			require.Contains(t, progress.String(), "creating: orders")

			// The metrics tell the same story as the report, counted on the other side of each hook.
			require.Empty(t, rep.disagreements())
			m := rep.Metrics
			require.Equal(t, rep.RejectedDeliveries, m.SignaturesFailed, "verifications failed = deliveries rejected for a bad signature")
			require.Positive(t, m.SignaturesFailed)
			require.Equal(t, int64(rep.ReplaysServed), m.Replayed)
			h := rep.Health
			require.True(t, h.OK(), "%+v", h)
			require.Equal(t, rep.EventsEmitted+int64(h.Triggered+len(h.Notices)), m.EventsAppended,
				"the orders' events, the health part's test events and the producer's notice")
			require.Equal(t, rep.EventsEmitted+h.BusyProcessed+int64(len(h.Notices)), m.Delivered,
				"every event delivered once in the end, but the one the 410 endpoint refused")
			require.Contains(t, out.String(), "410 Gone              after 1 request(s) the endpoint is disabled (gone)")
			require.Contains(t, out.String(), "429 Retry-After       2 of 6 events paused")
			// A dropped delivery is recovered by a range fetch: the gap the next delivery reveals, or the
			// consumer's catch-up poll, which on a loaded machine may find it first (then gaps is 0).
			require.Positive(t, m.RangeFetches, "dropped deliveries are recovered by range fetches")
			require.GreaterOrEqual(t, m.RangeFetches, m.Gaps-m.RangeFetches, "gaps are filled by range fetches")
			require.Equal(t, m.Authentications, m.Authenticated, "the demo's own key always authenticates")
			require.Contains(t, out.String(), "agreement           replays, 409s, events, rejected signatures and duplicates match the report")
			require.Contains(t, out.String(), "result                OK")
			require.Contains(t, out.String(), `an order's direction is "side"; Deprecation @`)
			require.Contains(t, out.String(), `an order's direction is "direction"; current`)
		})
	}
}

func TestReportVerdict(t *testing.T) {
	good := report{OrdersRequested: 3, OrdersCreated: 3, DistinctOrderIDs: 3, EventsEmitted: 3, EventsProcessed: 3,
		Versions: []versionSeen{
			{Version: "v1", Direction: "side", Deprecation: "@1803254400", Sunset: "Sat, 21 Aug 2027 00:00:00 GMT",
				Successor: `</v2/orders/ord_1>; rel="successor-version"`},
			{Version: "v2", Direction: "direction"},
		},
		Metrics: figures{EventsAppended: 3 + 1 + busyEvents + 1}, Roll: rollResult{Done: true, Verified: true},
		Health: healthResult{Triggered: 1 + busyEvents, GoneID: "we_gone", GoneStatus: "disabled", GoneReason: "gone",
			GoneRequests: 1, Notices: []string{"we_gone:gone"}, BusyProcessed: busyEvents, BusyPauses: busyEvents / busyEvery,
			ShortestPause: busyPause}}
	cases := []struct {
		name   string
		mutate func(*report)
		ok     bool
	}{
		{"all good", func(*report) {}, true},
		{"an order created twice", func(r *report) { r.OrdersCreated = 4; r.DistinctOrderIDs = 4 }, false},
		{"a retry answered with another ID", func(r *report) { r.Inconsistent = 1 }, false},
		{"an event lost", func(r *report) { r.EventsProcessed = 2 }, false},
		{"an order's event never processed", func(r *report) { r.MissingOrders = 1 }, false},
		{"an event processed twice", func(r *report) { r.ProcessedTwice = 1 }, false},
		{"a request failed", func(r *report) { r.RequestErrors = 1 }, false},
		{"timed out", func(r *report) { r.TimedOut = true }, false},
		{"v1 showed v2's shape", func(r *report) {
			r.Versions = []versionSeen{{Version: "v1", Direction: "direction"}, r.Versions[1]}
		}, false},
		{"v1 without its successor", func(r *report) {
			v1 := r.Versions[0]
			v1.Successor = ""
			r.Versions = []versionSeen{v1, r.Versions[1]}
		}, false},
		{"the tour failed", func(r *report) { r.Versions = nil }, false},
		{"the metrics disagree", func(r *report) { r.Metrics.Replayed = 1 }, false},
		{"the rolled secret did not verify", func(r *report) { r.Roll.Verified = false }, false},
		{"the 410 endpoint still enabled", func(r *report) { r.Health.GoneStatus = "enabled" }, false},
		{"its licensee not told", func(r *report) { r.Health.Notices = nil; r.Metrics.EventsAppended-- }, false},
		{"a pause shorter than asked", func(r *report) { r.Health.ShortestPause = busyPause / 2 }, false},
		{"a busy endpoint's event lost", func(r *report) { r.Health.BusyProcessed-- }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := good
			tc.mutate(&r)
			require.Equal(t, tc.ok, r.OK())
			var out bytes.Buffer
			r.print(&out)
			if tc.ok {
				require.Contains(t, out.String(), "OK")
			} else {
				require.Contains(t, out.String(), "FAILED")
			}
		})
	}
}

// TestDemoTraces follows each order's event through its spans: the request that created the order
// (the server's span, continued by idempotency.handler, in which the event is published), each
// delivery attempt (webhook.deliver, linked to the publishing span) and the consumer's
// webhook.receive, whose parent is the attempt that carried its traceparent.
func TestDemoTraces(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	opts := defaultOptions()
	opts.Orders, opts.Seed, opts.Traces = 5, 7, tp
	opts.LoseResponses, opts.RepeatEvery, opts.ConcurrentEvery = 0, 1000, 1000
	opts.Faults = apiclient.Faults{}
	rep, err := run(context.Background(), opts)
	require.NoError(t, err)
	require.True(t, rep.OK())

	byID := map[oteltrace.SpanID]sdktrace.ReadOnlySpan{}
	var delivers, receives []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		byID[s.SpanContext().SpanID()] = s
		switch s.Name() {
		case "webhook.deliver":
			for _, kv := range s.Attributes() {
				if kv.Key == "svc.webhook.event.type" && kv.Value.AsString() == "order.created" {
					delivers = append(delivers, s) // not the health part's test events
				}
			}
		case "webhook.receive":
			receives = append(receives, s)
		}
	}
	require.Len(t, delivers, 5, "one attempt per order's event: no fault was injected")
	require.Len(t, receives, 5)
	for _, d := range delivers {
		require.Len(t, d.Links(), 1, "the attempt links to the span that published its event")
		publisher, ok := byID[d.Links()[0].SpanContext.SpanID()]
		require.True(t, ok, "the publishing span was recorded")
		require.Equal(t, "idempotency.handler", publisher.Name(), "the event was published in the order's handler")
		root, ok := byID[publisher.Parent().SpanID()]
		require.True(t, ok)
		require.Equal(t, oteltrace.SpanKindServer, root.SpanKind(), "…under the server span of POST /v1/orders")
		require.Equal(t, "POST /{version}/orders", root.Name(), "named by its route")
	}
	for _, r := range receives {
		d, ok := byID[r.Parent().SpanID()]
		require.True(t, ok, "the receive span's parent was recorded")
		require.Equal(t, "webhook.deliver", d.Name(), "the consumer continues the trace of the attempt")
		require.Equal(t, d.SpanContext().TraceID(), r.SpanContext().TraceID())
	}
}
