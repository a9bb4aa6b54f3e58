package ratelimit

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/internal/testclock"
)

// clock is the shared injectable test clock.
type clock = testclock.Clock

func newClock() *clock { return testclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) }

// issue issues credentials or fails the test.
func issue(t testing.TB, iss *apikey.Issuer, licensee string, env apikey.Environment) apikey.Credentials {
	t.Helper()
	c, err := iss.Issue(context.Background(), apikey.Evaluation{Licensee: licensee, Environment: env})
	require.NoError(t, err)
	return c
}

// do serves one request through h with the given API key ("" sends no Authorization header).
func do(t testing.TB, h http.Handler, method, path, key string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	rec := httptest.NewRecorder()
	apierror.WithRequestID(h).ServeHTTP(rec, r)
	return rec
}

// problem decodes a problem body.
func problem(t testing.TB, rec *httptest.ResponseRecorder) apierror.Error {
	t.Helper()
	require.Equal(t, apierror.MediaType, rec.Header().Get("Content-Type"), rec.Body.String())
	var p apierror.Error
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
	return p
}

// requireConforms checks a 4xx against the platform's error conventions.
func requireConforms(t testing.TB, rec *httptest.ResponseRecorder) {
	t.Helper()
	require.NoError(t, apierror.Check(rec.Code, rec.Header(), rec.Body.Bytes()))
}
