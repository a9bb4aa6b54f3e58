package sandbox

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
)

// TestZeroValues: the types whose zero value is not usable return their ErrZero… sentinel from every
// method with an error result, on the zero value and on a nil pointer, with arguments that would
// otherwise be served (a sandbox principal), instead of panicking or answering as if configured.
func TestZeroValues(t *testing.T) {
	ctx := apikey.NewContext(t.Context(), apikey.Principal{Licensee: "lic_1", Environment: apikey.Sandbox})
	authed := func() *http.Request {
		return httptest.NewRequest(http.MethodPost, "/v1/orders", nil).WithContext(ctx)
	}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"FaultTransport.RoundTrip", func() error { _, err := (&FaultTransport{}).RoundTrip(authed()); return err }, ErrNotBuilt},
		{"FaultTransport.Close", func() error { return (&FaultTransport{}).Close() }, ErrNotBuilt},
		{"nil FaultTransport.RoundTrip", func() error { _, err := (*FaultTransport)(nil).RoundTrip(authed()); return err }, ErrNotBuilt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.call() })
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// A zero handler answers the opaque 500: a request it cannot serve must not look like a client error.
func TestZeroHandlersAnswer500(t *testing.T) {
	tests := []struct {
		name string
		h    http.Handler
	}{
		{"Controls", &Controls{}},
		{"nil Controls", (*Controls)(nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/sandbox/reset", nil)
			r = r.WithContext(apikey.NewContext(r.Context(), apikey.Principal{Licensee: "lic_1", Environment: apikey.Sandbox}))
			w := httptest.NewRecorder()
			require.NotPanics(t, func() { tc.h.ServeHTTP(w, r) })
			require.Equal(t, http.StatusInternalServerError, w.Code)
			require.True(t, strings.HasPrefix(w.Header().Get("Content-Type"), "application/problem+json"))
		})
	}
}

// The methods without an error result answer as an empty value would.
func TestZeroValuesWithoutErrorResult(t *testing.T) {
	require.NotPanics(t, func() { (&FaultTransport{}).Flush() })
}
