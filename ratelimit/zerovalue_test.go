package ratelimit

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
)

// TestZeroValues: the types whose zero value is not usable return their ErrZero… sentinel from every
// method with an error result, on the zero value and on a nil pointer, with arguments that would
// otherwise be served (a live principal), instead of panicking or answering as if configured.
func TestZeroValues(t *testing.T) {
	ctx := apikey.NewContext(t.Context(), apikey.Principal{Licensee: "lic_1", Environment: apikey.Live})
	authed := func() *http.Request {
		return httptest.NewRequest(http.MethodPost, "/v1/orders", nil).WithContext(ctx)
	}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"TokenBucket.Allow", func() error { _, _, err := (&TokenBucket{}).Allow(ctx, "k", time.Now()); return err }, ErrNotBuilt},
		{"nil TokenBucket.Allow", func() error { _, _, err := (*TokenBucket)(nil).Allow(ctx, "k", time.Now()); return err }, ErrNotBuilt},
		{"Middleware.Check", func() error { return (&Middleware{}).Check(authed()) }, ErrNotBuilt},
		{"nil Middleware.Check", func() error { return (*Middleware)(nil).Check(authed()) }, ErrNotBuilt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.call() })
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// A zero handler answers the opaque 500 and never runs next: a request it cannot guard must not
// pass unguarded, and the answer must not look like a client error.
func TestZeroHandlersAnswer500(t *testing.T) {
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("next ran") })
	tests := []struct {
		name string
		h    http.Handler
	}{
		{"Middleware", (&Middleware{}).Handler(next)},
		{"nil Middleware", (*Middleware)(nil).Handler(next)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
			r = r.WithContext(apikey.NewContext(r.Context(), apikey.Principal{Licensee: "lic_1", Environment: apikey.Live}))
			w := httptest.NewRecorder()
			require.NotPanics(t, func() { tc.h.ServeHTTP(w, r) })
			require.Equal(t, http.StatusInternalServerError, w.Code)
			require.True(t, strings.HasPrefix(w.Header().Get("Content-Type"), "application/problem+json"))
		})
	}
}

// The methods without an error result answer as an empty value would.
func TestZeroValuesWithoutErrorResult(t *testing.T) {
	require.Zero(t, (&TokenBucket{}).Len())
	require.Zero(t, (*TokenBucket)(nil).Len())
}
