package idempotency_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
)

func TestNewRefusesWhatItCannotHonour(t *testing.T) {
	tests := []struct {
		name string
		opts idempotency.Options
		want string
	}{
		{"negative lease", idempotency.Options{Lease: -time.Second}, "Lease -1s is negative"},
		{"negative retention", idempotency.Options{Retention: -time.Hour}, "Retention -1h0m0s is negative"},
		{"negative store timeout", idempotency.Options{StoreTimeout: -1}, "StoreTimeout -1ns is negative"},
		{"negative body cap", idempotency.Options{MaxRequestBytes: -1}, "MaxRequestBytes -1 is negative"},
		{"retention within the lease", idempotency.Options{Lease: time.Hour, Retention: time.Minute}, "Retention 1m0s must be longer than Lease 1h0m0s"},
		{"retention within the default lease", idempotency.Options{Retention: idempotency.DefaultLease}, "must be longer than Lease"},
		{"a safe method", idempotency.Options{Methods: []string{"POST", "GET"}}, "GET is a safe method"},
		{"not a method", idempotency.Options{Methods: []string{"PO ST"}}, `"PO ST" is not an HTTP method`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := idempotency.New(&tc.opts)
			require.Nil(t, m)
			require.ErrorContains(t, err, "idempotency: New: ")
			require.ErrorContains(t, err, tc.want)
		})
	}
	m, err := idempotency.New(&idempotency.Options{Methods: []string{"POST", "REPORT"}, Lease: time.Minute, Retention: time.Hour})
	require.NoError(t, err)
	require.NotNil(t, m)
}

// A Middleware nobody built guards nothing, so it lets nothing through rather than pass mutating
// requests unguarded.
func TestZeroMiddlewareRefuses(t *testing.T) {
	var m idempotency.Middleware
	ran := false
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
	req.Header.Set("Idempotency-Key", "k1")
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.False(t, ran)
	_, err := m.Begin(t.Context(), idempotency.Request{Key: "k1", Scope: "s"})
	require.ErrorIs(t, err, idempotency.ErrNotBuilt)
}
