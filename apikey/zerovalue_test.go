package apikey

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestZeroValues: the types whose zero value is not usable return their ErrZero… sentinel from every
// method with an error result, on the zero value and on a nil pointer, with arguments that would
// otherwise be served (a well-formed key, a sandbox principal), instead of panicking or answering as
// if configured.
func TestZeroValues(t *testing.T) {
	key, err := New(Sandbox)
	require.NoError(t, err)
	ctx := NewContext(t.Context(), Principal{Licensee: "lic_1", Environment: Sandbox})
	authed := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
		r.Header.Set("Authorization", "Bearer "+key.Reveal())
		return r.WithContext(ctx)
	}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"Authenticator.Authenticate", func() error { _, err := (&Authenticator{}).Authenticate(authed()); return err }, ErrNotBuilt},
		{"nil Authenticator.Authenticate", func() error { _, err := (*Authenticator)(nil).Authenticate(authed()); return err }, ErrNotBuilt},
		{"Issuer.Issue", func() error { _, err := (&Issuer{}).Issue(ctx, Evaluation{Licensee: "lic_1"}); return err }, ErrNotBuilt},
		{"Issuer.Resolve", func() error { _, err := (&Issuer{}).Resolve(ctx, key); return err }, ErrNotBuilt},
		{"Issuer.Revoke", func() error { return (&Issuer{}).Revoke(ctx, "key_1") }, ErrNotBuilt},
		{"Issuer.EndEvaluation", func() error { _, err := (&Issuer{}).EndEvaluation(ctx, "lic_1"); return err }, ErrNotBuilt},
		{"nil Issuer.Resolve", func() error { _, err := (*Issuer)(nil).Resolve(ctx, key); return err }, ErrNotBuilt},
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
	key, err := New(Live)
	require.NoError(t, err)
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("next ran") })
	tests := []struct {
		name string
		h    http.Handler
	}{
		{"Authenticator", (&Authenticator{}).Handler(next)},
		{"nil Authenticator", (*Authenticator)(nil).Handler(next)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/sandbox/reset", nil)
			r.Header.Set("Authorization", "Bearer "+key.Reveal())
			r = r.WithContext(NewContext(r.Context(), Principal{Licensee: "lic_1", Environment: Sandbox}))
			w := httptest.NewRecorder()
			require.NotPanics(t, func() { tc.h.ServeHTTP(w, r) })
			require.Equal(t, http.StatusInternalServerError, w.Code)
			require.True(t, strings.HasPrefix(w.Header().Get("Content-Type"), "application/problem+json"))
		})
	}
}

// The methods without an error result answer as an empty value would.
func TestZeroValuesWithoutErrorResult(t *testing.T) {
	require.Nil(t, (&Issuer{}).Store())
	require.Nil(t, (*Issuer)(nil).Store())
}
