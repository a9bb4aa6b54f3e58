package webhooktest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook/webhooktest"
)

// A Source that NewSource did not build: FetchRange returns ErrNotBuilt (not an empty range, which
// a Tracker would take for a producer with no events), ServeHTTP answers the opaque 500, and the
// methods without an error result panic with the sentinel's message rather than a nil dereference.
func TestZeroSource(t *testing.T) {
	for name, s := range map[string]*webhooktest.Source{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			_, err := s.FetchRange(t.Context(), "we_1", 1, 2)
			require.ErrorIs(t, err, webhooktest.ErrNotBuilt)

			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/webhook_endpoints/we_1/events?from=1", nil))
			require.Equal(t, http.StatusInternalServerError, w.Code)

			msg := webhooktest.ErrNotBuilt.Error()
			require.PanicsWithValue(t, msg, func() { s.Emit("we_1", "order.created", nil) })
			require.PanicsWithValue(t, msg, func() { s.Event("we_1", 1) })
			require.PanicsWithValue(t, msg, func() { s.Request("/webhooks", "we_1", 1) })
		})
	}
}
