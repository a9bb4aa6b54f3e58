package producer_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook/producer"
)

// TestZeroValues: the types whose zero value is not usable return an error wrapping ErrNotBuilt from
// every method with an error result, on the zero value and on a nil pointer, with arguments that
// would otherwise be served — never a panic, and never a silent "nothing to do".
func TestZeroValues(t *testing.T) {
	ctx := t.Context()
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
		{"Dispatcher.Backlog", func() error { _, err := (&producer.Dispatcher{}).Backlog(ctx); return err }},
		{"nil Dispatcher.Backlog", func() error { _, err := (*producer.Dispatcher)(nil).Backlog(ctx); return err }},
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
