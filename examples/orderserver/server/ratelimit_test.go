package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
)

// TestRateLimitByEnvironment: on a clock that stands still, a production key gets its burst and then
// 429 with Retry-After, whatever the machine's speed, while a sandbox key is never limited. The e2e
// test of the same 429 races real time, which a slow machine can lose.
func TestRateLimitByEnvironment(t *testing.T) {
	ts := newTestServer(t)
	live, err := ts.IssueCredentials(context.Background(), apikey.Live)
	require.NoError(t, err)

	for i := range LiveBurst {
		w := ts.do("GET", "/v1/orders/ord_x", live.APIKey, "", "")
		require.Equal(t, http.StatusNotFound, w.Code, "request %d of the burst", i)
	}
	w := ts.do("GET", "/v1/orders/ord_x", live.APIKey, "", "")
	require.Equal(t, http.StatusTooManyRequests, w.Code, w.Body.String())
	require.Equal(t, "1", w.Header().Get("Retry-After"))

	for i := range 2 * LiveBurst {
		w := ts.do("GET", "/v1/orders/ord_x", ts.key, "", "")
		require.Equal(t, http.StatusNotFound, w.Code, "sandbox request %d", i)
	}
}
