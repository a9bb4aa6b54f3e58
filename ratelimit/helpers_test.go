package ratelimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/internal/httpcheck"
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
	return httpcheck.Do(t, h, method, path, key, "")
}

// problem decodes a problem body.
var problem = httpcheck.Problem

// requireConforms checks a 4xx against the platform's error conventions.
var requireConforms = httpcheck.Conforms
