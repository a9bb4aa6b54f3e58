package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
)

// TestZeroValues: a Tracker, Receiver or RangeClient nobody built, and a nil RangeFetcherFunc, return
// an error wrapping ErrNotBuilt from every method with an error result, on the zero value and on a
// nil pointer, with arguments that would otherwise be served.
func TestZeroValues(t *testing.T) {
	ctx := t.Context()
	ev := &webhook.Event{ID: "evt_1", Sequence: 1, Type: "order.created", Data: []byte(`{}`)}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Tracker.Receive", func() error { _, err := (&webhook.Tracker{}).Receive(ctx, "we_1", ev); return err }},
		{"Tracker.CatchUp", func() error { _, err := (&webhook.Tracker{}).CatchUp(ctx, "we_1"); return err }},
		{"nil Tracker.Receive", func() error { _, err := (*webhook.Tracker)(nil).Receive(ctx, "we_1", ev); return err }},
		{"Receiver.Receive", func() error { _, err := (&webhook.Receiver{}).Receive(ctx, "t=1,v1=00", "1", []byte(`{}`)); return err }},
		{"nil Receiver.Receive", func() error {
			_, err := (*webhook.Receiver)(nil).Receive(ctx, "t=1,v1=00", "1", []byte(`{}`))
			return err
		}},
		{"RangeClient.FetchRange", func() error { _, err := (&webhook.RangeClient{}).FetchRange(ctx, "we_1", 1, 2); return err }},
		{"nil RangeClient.FetchRange", func() error { _, err := (*webhook.RangeClient)(nil).FetchRange(ctx, "we_1", 1, 2); return err }},
		{"nil RangeFetcherFunc.FetchRange", func() error { _, err := webhook.RangeFetcherFunc(nil).FetchRange(ctx, "we_1", 1, 2); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.call() })
			require.ErrorIs(t, err, webhook.ErrNotBuilt)
		})
	}
	// The zero Signer and Verifier have no secrets: ErrNoSecret, never "verification off".
	_, err := (&webhook.Signer{}).Sign([]byte(`{}`), epoch)
	require.ErrorIs(t, err, webhook.ErrNoSecret)
	require.ErrorIs(t, (&webhook.Verifier{}).Verify("t=1,v1=00", []byte(`{}`)), webhook.ErrNoSecret)
}

// A zero Receiver answers every delivery with the opaque 500: not a 401 that would blame the
// producer's signature, nor a 413 from a zero body cap.
func TestZeroReceiverAnswers500(t *testing.T) {
	for name, rc := range map[string]*webhook.Receiver{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/webhooks", strings.NewReader(`{}`))
			r.Header.Set(webhook.HeaderSignature, "t=1,v1=00")
			r.Header.Set(webhook.HeaderSequence, "1")
			require.NotPanics(t, func() { rc.ServeHTTP(w, r) })
			require.Equal(t, http.StatusInternalServerError, w.Code)
		})
	}
}

// NewTracker refuses a nil RangeFetcherFunc as it refuses a nil RangeFetcher.
func TestNewTrackerRefusesNilFetcherFunc(t *testing.T) {
	process := func(ctx context.Context, s webhook.Step) error { return nil }
	_, err := webhook.NewTracker(&webhook.MemoryCursorStore{}, webhook.RangeFetcherFunc(nil), process, nil)
	require.ErrorContains(t, err, "needs a RangeFetcher")
}
