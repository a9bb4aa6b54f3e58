package sandbox

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/internal/httpcheck"
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
	return httpcheck.Do(t, h, method, path, key, body)
}

// problem decodes a problem body.
var problem = httpcheck.Problem

// requireConforms checks a 4xx against the platform's error conventions.
var requireConforms = httpcheck.Conforms

// withoutRequestID removes the request ID from a problem body, to compare two responses.
var withoutRequestID = httpcheck.WithoutRequestID
