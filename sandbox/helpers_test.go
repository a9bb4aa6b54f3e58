package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
)

// issue issues credentials or fails the test.
func issue(t testing.TB, iss *apikey.Issuer, licensee string, env apikey.Environment) apikey.Credentials {
	t.Helper()
	c, err := iss.Issue(context.Background(), apikey.Evaluation{Licensee: licensee, Environment: env})
	require.NoError(t, err)
	return c
}

// do serves one request through h with the given API key ("" sends no Authorization header).
func do(t testing.TB, h http.Handler, method, path, key string, body string) *httptest.ResponseRecorder {
	t.Helper()
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, path, nil)
	} else {
		r = httptest.NewRequest(method, path, bytes.NewBufferString(body))
		r.Header.Set("Content-Type", "application/json")
	}
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

// withoutRequestID removes the request ID from a problem body, to compare two responses.
func withoutRequestID(t testing.TB, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	delete(m, "request_id")
	return m
}
