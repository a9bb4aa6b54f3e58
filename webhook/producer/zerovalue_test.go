package producer_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
)

// TestZeroValues: the types whose zero value is not usable return an error wrapping ErrNotBuilt from
// every method with an error result, on the zero value and on a nil pointer, with arguments that
// would otherwise be served — never a panic, and never a silent "nothing to do".
func TestZeroValues(t *testing.T) {
	ctx := t.Context()
	now := time.Unix(1767225600, 0)
	ev := webhook.Event{Type: "order.created", Data: []byte(`{}`)}
	lease := producer.Lease{Stream: "we_1", Sequence: 1, Token: 1}
	claim := producer.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10}
	deferred := &producer.DeferredMemoryLog{}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Publisher.Publish", func() error { _, err := (&producer.Publisher{}).Publish(ctx, "we_1", "order.created", nil); return err }},
		{"nil Publisher.PublishTo", func() error {
			_, err := (*producer.Publisher)(nil).PublishTo(ctx, producer.Endpoint{ID: "we_1"}, "order.created", nil)
			return err
		}},
		{"Dispatcher.DeliverDue", func() error { _, err := (&producer.Dispatcher{}).DeliverDue(ctx); return err }},
		{"Dispatcher.Cleanup", func() error { _, err := (&producer.Dispatcher{}).Cleanup(ctx); return err }},
		{"Dispatcher.Run", func() error { return (&producer.Dispatcher{}).Run(ctx) }},
		{"nil Dispatcher.DeliverDue", func() error { _, err := (*producer.Dispatcher)(nil).DeliverDue(ctx); return err }},
		{"Sequencer.Drain", func() error { _, err := (&producer.Sequencer{}).Drain(ctx); return err }},
		{"Sequencer.Run", func() error { return (&producer.Sequencer{}).Run(ctx) }},
		{"nil Sequencer.Run", func() error { return (*producer.Sequencer)(nil).Run(ctx) }},
		{"DeferredMemoryLog.Append", func() error { _, err := deferred.Append(ctx, "we_1", ev); return err }},
		{"DeferredMemoryLog.AppendBatch", func() error {
			_, err := deferred.AppendBatch(ctx, []producer.StreamEvent{{Stream: "we_1", Event: ev}})
			return err
		}},
		{"DeferredMemoryLog.Sequence", func() error { _, err := deferred.Sequence(ctx, 10); return err }},
		{"DeferredMemoryLog.Range", func() error { _, _, err := deferred.Range(ctx, "we_1", 1, 10, 10); return err }},
		{"DeferredMemoryLog.Claim", func() error { _, err := deferred.Claim(ctx, claim); return err }},
		{"DeferredMemoryLog.Delivered", func() error { return deferred.Delivered(ctx, lease, producer.Attempt{At: now}) }},
		{"DeferredMemoryLog.Failed", func() error { return deferred.Failed(ctx, lease, producer.Attempt{At: now}) }},
		{"DeferredMemoryLog.Settle", func() error {
			return deferred.Settle(ctx, []producer.Settlement{{Lease: lease, Delivered: true}})[0]
		}},
		{"DeferredMemoryLog.Attempts", func() error {
			_, _, err := deferred.Attempts(ctx, producer.AttemptQuery{Stream: "we_1", Limit: 10})
			return err
		}},
		{"DeferredMemoryLog.Release", func() error { return deferred.Release(ctx, lease, now) }},
		{"DeferredMemoryLog.Status", func() error { _, err := deferred.Status(ctx, "we_1", 1); return err }},
		{"DeferredMemoryLog.Cleanup", func() error { _, err := deferred.Cleanup(ctx, now, 10); return err }},
		{"Dispatcher.Backlog", func() error { _, err := (&producer.Dispatcher{}).Backlog(ctx); return err }},
		{"nil Dispatcher.Backlog", func() error { _, err := (*producer.Dispatcher)(nil).Backlog(ctx); return err }},
		{"DeferredMemoryLog.Backlog", func() error { _, err := deferred.Backlog(ctx); return err }},
		{"nil DeferredMemoryLog.Claim", func() error { _, err := (*producer.DeferredMemoryLog)(nil).Claim(ctx, claim); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.call() })
			require.ErrorIs(t, err, producer.ErrNotBuilt)
		})
	}
	require.NotPanics(t, func() {
		(&producer.Dispatcher{}).Wake()
		(*producer.Dispatcher)(nil).Wake()
		(&producer.Sequencer{}).Wake()
		(*producer.Sequencer)(nil).Wake()
	})
	require.Zero(t, deferred.Unsequenced())
}

// The zero handlers answer the opaque 500 rather than panic.
func TestZeroHandlersAnswer500(t *testing.T) {
	for name, h := range map[string]http.Handler{
		"RangeHandler":          &producer.RangeHandler{},
		"nil RangeHandler":      (*producer.RangeHandler)(nil),
		"DeliveriesHandler":     &producer.DeliveriesHandler{},
		"nil DeliveriesHandler": (*producer.DeliveriesHandler)(nil),
	} {
		t.Run(name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/v1/webhook_endpoints/we_1/events?from=1", nil)
			require.NotPanics(t, func() { h.ServeHTTP(w, r) })
			require.Equal(t, http.StatusInternalServerError, w.Code)
		})
	}
}
