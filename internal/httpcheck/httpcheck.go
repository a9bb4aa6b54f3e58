// Package httpcheck is what the tests of the packages that serve HTTP (apikey, ratelimit, sandbox)
// share: serving one request through a handler, and reading and checking the problem it answers.
package httpcheck

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svcplatform/conventions/apierror"
)

// Do serves one request through h, wrapped in apierror.WithRequestID, with the API key key as a
// Bearer token ("" sends no Authorization header) and body as JSON ("" sends none).
func Do(t testing.TB, h http.Handler, method, path, key, body string) *httptest.ResponseRecorder {
	t.Helper()
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, path, nil)
	} else {
		r = httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	rec := httptest.NewRecorder()
	apierror.WithRequestID(h).ServeHTTP(rec, r)
	return rec
}

// Problem decodes rec's problem body, failing the test unless it is application/problem+json.
func Problem(t testing.TB, rec *httptest.ResponseRecorder) apierror.Error {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != apierror.MediaType {
		t.Fatalf("Content-Type %q, want %q; body: %s", ct, apierror.MediaType, rec.Body.String())
	}
	var p apierror.Error
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body: %v", err)
	}
	return p
}

// Conforms checks a 4xx against the platform's error conventions (apierror.Check).
func Conforms(t testing.TB, rec *httptest.ResponseRecorder) {
	t.Helper()
	if err := apierror.Check(rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// WithoutRequestID decodes a JSON body without its request_id, to compare two responses.
func WithoutRequestID(t testing.TB, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body: %v", err)
	}
	delete(m, "request_id")
	return m
}
