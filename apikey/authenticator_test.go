package apikey

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/internal/syncbuf"
)

func TestAuthenticatorAdmits(t *testing.T) {
	iss := must(NewIssuer(nil, nil))
	auth := must(NewAuthenticator(iss, nil))
	h := auth.Handler(echoPrincipal)
	for _, env := range []Environment{Sandbox, Live} {
		t.Run(string(env), func(t *testing.T) {
			c := issue(t, iss, "lic_a", env)
			for _, header := range []string{"Bearer " + c.APIKey, "bearer " + c.APIKey, "BEARER   " + c.APIKey} {
				r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
				r.Header.Set("Authorization", header)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
				var got map[string]string
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
				require.Equal(t, map[string]string{"licensee": "lic_a", "environment": string(env), "key_id": c.KeyID}, got)
			}
		})
	}
}

func TestAuthenticator401(t *testing.T) {
	clk := newClock()
	iss := must(NewIssuer(nil, &IssuerOptions{Now: clk.Now, SandboxTTL: time.Hour}))
	ctx := context.Background()
	expired := issue(t, iss, "lic_a", Sandbox)
	clk.Advance(2 * time.Hour)
	revoked := issue(t, iss, "lic_a", Sandbox)
	require.NoError(t, iss.Revoke(ctx, revoked.KeyID))
	unknown, err := New(Live)
	require.NoError(t, err)
	good := issue(t, iss, "lic_a", Sandbox).APIKey
	typo := good[:len(good)-1] + map[bool]string{true: "b", false: "a"}[good[len(good)-1] == 'a']

	logger, logs := syncbuf.Logger()
	auth := must(NewAuthenticator(iss, &AuthenticatorOptions{Logger: logger}))
	h := auth.Handler(echoPrincipal)

	tests := []struct {
		name      string
		headers   []string // Authorization values; nil sends none
		code      string
		challenge string
		cause     error
	}{
		{"missing", nil, CodeMissing, `Bearer realm="svcplatform"`, ErrNoCredentials},
		{"empty", []string{""}, CodeMissing, `Bearer realm="svcplatform"`, ErrNoCredentials},
		{"blank", []string{"   "}, CodeMissing, `Bearer realm="svcplatform"`, ErrNoCredentials},
		{"basic scheme", []string{"Basic dXNlcjpwYXNz"}, CodeSchemeUnsupported, `Bearer realm="svcplatform"`, ErrAuthScheme},
		{"scheme only", []string{"Bearer"}, CodeMalformed, `Bearer realm="svcplatform", error="invalid_request"`, ErrNotBearer},
		{"key without scheme", []string{good}, CodeSchemeUnsupported, `Bearer realm="svcplatform"`, ErrAuthScheme},
		{"two tokens", []string{"Bearer " + good + " " + good}, CodeMalformed, `Bearer realm="svcplatform", error="invalid_request"`, ErrNotBearer},
		{"two headers", []string{"Bearer " + good, "Bearer " + good}, CodeMalformed, `Bearer realm="svcplatform", error="invalid_request"`, ErrNotBearer},
		{"not a key", []string{"Bearer hunter2-my-password"}, CodeMalformed, `Bearer realm="svcplatform", error="invalid_token"`, ErrMalformed},
		{"typo", []string{"Bearer " + typo}, CodeMalformed, `Bearer realm="svcplatform", error="invalid_token"`, ErrChecksum},
		{"unknown", []string{"Bearer " + unknown.Reveal()}, CodeInvalid, `Bearer realm="svcplatform", error="invalid_token"`, ErrUnknown},
		{"expired", []string{"Bearer " + expired.APIKey}, CodeInvalid, `Bearer realm="svcplatform", error="invalid_token"`, ErrExpired},
		{"revoked", []string{"Bearer " + revoked.APIKey}, CodeInvalid, `Bearer realm="svcplatform", error="invalid_token"`, ErrRevoked},
	}
	bodies := map[string]map[string]any{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
			for _, v := range tc.headers {
				r.Header.Add("Authorization", v)
			}
			_, err := auth.Authenticate(r)
			require.ErrorIs(t, err, tc.cause)
			var pe *apierror.Error
			require.ErrorAs(t, err, &pe)

			rec := httptest.NewRecorder()
			apierror.WithRequestID(h).ServeHTTP(rec, r)
			require.Equal(t, http.StatusUnauthorized, rec.Code)
			require.Equal(t, tc.challenge, rec.Header().Get("WWW-Authenticate"))
			requireConforms(t, rec)
			p := problem(t, rec)
			require.Equal(t, tc.code, p.Code)
			require.Len(t, p.Errors, 1)
			require.Equal(t, apierror.LocationHeader, p.Errors[0].Location)
			require.Equal(t, "Authorization", p.Errors[0].Name)
			require.Equal(t, tc.code, p.Errors[0].Code)
			for _, v := range tc.headers {
				if tok := strings.TrimSpace(strings.TrimPrefix(v, "Bearer ")); len(tok) > 8 {
					require.NotContains(t, rec.Body.String(), tok, "the body must never echo the credential")
					require.NotContains(t, err.Error(), tok)
				}
			}
			bodies[tc.name] = withoutRequestID(t, rec.Body.Bytes())
		})
	}
	t.Run("unknown, expired and revoked read the same", func(t *testing.T) {
		require.Equal(t, bodies["unknown"], bodies["expired"])
		require.Equal(t, bodies["unknown"], bodies["revoked"])
	})
	t.Run("logs carry no key", func(t *testing.T) {
		out := logs.String()
		require.Contains(t, out, "credentials refused")
		for _, k := range []string{good, typo, unknown.Reveal(), expired.APIKey, revoked.APIKey, "hunter2"} {
			require.NotContains(t, out, k)
		}
		require.Contains(t, out, redact(expired.APIKey), "a well-formed refused key is logged redacted")
	})
}

func TestAuthenticatorResolverFailure(t *testing.T) {
	logger, logs := syncbuf.Logger()
	auth := must(NewAuthenticator(must(NewIssuer(failingStore{}, nil)), &AuthenticatorOptions{Logger: logger, RetryAfter: 3 * time.Second}))
	k, err := New(Live)
	require.NoError(t, err)
	called := false
	rec := do(t, auth.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })), http.MethodGet, "/v1/orders", k.Reveal(), "")
	require.False(t, called)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "a store outage must not read as a bad key")
	require.Equal(t, "3", rec.Header().Get("Retry-After"))
	require.Equal(t, CodeUnavailable, problem(t, rec).Code)
	require.NotContains(t, rec.Body.String(), errStoreDown.Error())
	require.Contains(t, logs.String(), errStoreDown.Error())
	require.NotContains(t, logs.String(), k.Reveal())
}

// wrongEnvResolver answers every key with a production principal.
type wrongEnvResolver struct{}

func (wrongEnvResolver) Resolve(context.Context, Key) (Principal, error) {
	return Principal{Licensee: "lic_a", Environment: Live}, nil
}

func TestAuthenticatorRefusesAMismatchedResolver(t *testing.T) {
	k, err := New(Sandbox)
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer "+k.Reveal())
	_, err = must(NewAuthenticator(wrongEnvResolver{}, nil)).Authenticate(r)
	require.Error(t, err)
	var pe *apierror.Error
	require.True(t, errors.As(err, &pe))
	require.Equal(t, http.StatusInternalServerError, pe.Status)
}

func TestNewAuthenticatorNeedsAResolver(t *testing.T) {
	require.Panics(t, func() { must(NewAuthenticator(nil, nil)) })
}

// The realm is configurable and written as a quoted-string, so an odd one cannot break the header.
func TestAuthenticatorRealm(t *testing.T) {
	auth := must(NewAuthenticator(must(NewIssuer(nil, nil)), &AuthenticatorOptions{Realm: `orders "eu"`}))
	r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
	r.Header.Set("Authorization", "Bearer sk_sandbox_short")
	rec := httptest.NewRecorder()
	auth.Handler(http.NotFoundHandler()).ServeHTTP(rec, r)
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Equal(t, `Bearer realm="orders \"eu\"", error="invalid_token"`, rec.Header().Get("WWW-Authenticate"))
}

// leakyResolver fails with an error that quotes the key, as a driver error may quote a query's
// argument.
type leakyResolver struct{}

func (leakyResolver) Resolve(_ context.Context, k Key) (Principal, error) {
	return Principal{}, errors.New("lookup failed for " + k.Reveal())
}

// D10, issue 30: what the Authenticator logs about a failure or a refusal never repeats a key, even
// when the cause quotes one.
func TestAuthenticatorLogsNoCredential(t *testing.T) {
	logger, logs := syncbuf.Logger()
	auth := must(NewAuthenticator(leakyResolver{}, &AuthenticatorOptions{Logger: logger}))
	k, err := New(Live)
	require.NoError(t, err)
	rec := do(t, auth.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})), http.MethodGet, "/v1/orders", k.Reveal(), "")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "a resolver failure reads as an outage")
	require.Contains(t, logs.String(), "lookup failed")
	require.NotContains(t, logs.String(), k.Reveal())
}
