package apikey

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/internal/httpcheck"
	"github.com/svcplatform/conventions/internal/testclock"
)

// clock is the shared injectable test clock.
type clock = testclock.Clock

func newClock() *clock { return testclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) }

// failingStore is a CredentialStore whose every call fails, as a database that is down.
type failingStore struct{}

var errStoreDown = errors.New("store down")

func (failingStore) Put(context.Context, Credential) error { return errStoreDown }
func (failingStore) Get(context.Context, KeyHash) (Credential, error) {
	return Credential{}, errStoreDown
}
func (failingStore) Revoke(context.Context, string, time.Time) error { return errStoreDown }
func (failingStore) RevokeAll(context.Context, string, Environment, time.Time) (int, error) {
	return 0, errStoreDown
}
func (failingStore) Lookup(context.Context, string) (Credential, error) {
	return Credential{}, errStoreDown
}
func (failingStore) List(context.Context, string, Environment, time.Time) ([]Credential, error) {
	return nil, errStoreDown
}
func (failingStore) Roll(context.Context, string, Credential, time.Time) error { return errStoreDown }
func (failingStore) MarkUsed(context.Context, map[string]time.Time) error      { return errStoreDown }

// issue issues credentials or fails the test.
func issue(t testing.TB, iss *Issuer, licensee string, env Environment) Credentials {
	t.Helper()
	c, err := iss.Issue(context.Background(), Evaluation{Licensee: licensee, Environment: env})
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

// echoPrincipal answers 200 with the request's principal as JSON.
var echoPrincipal = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	p, ok := FromContext(r.Context())
	if !ok {
		http.Error(w, "no principal", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"licensee": p.Licensee, "environment": string(p.Environment), "key_id": p.KeyID})
})
