package idempotency_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
	"github.com/svcplatform/conventions/seal"
)

const issuedKey = "sk_sandbox_THE_SECRET_ISSUED_ONCE"

// issue answers like POST /v1/sandbox/credentials: a secret shown once.
func issue(calls *int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*calls++
		idempotency.Secret(w)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/sandbox/credentials/cred_1")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"api_key":"` + issuedKey + `"}`))
	})
}

// storedBody returns the raw body the store holds for k1 under authA.
func storedBody(t *testing.T, s driver.Store) []byte {
	t.Helper()
	rec, err := s.Lookup(context.Background(), driver.Key{Scope: idempotency.CredentialScope(authA), Key: "k1"}, timeNow())
	require.NoError(t, err)
	require.Equal(t, driver.Completed, rec.Status)
	return rec.Response.Body
}

func newSealer(t *testing.T, ids ...uint32) (*seal.Ring, []seal.Key) {
	t.Helper()
	var keys []seal.Key
	for _, id := range ids {
		k, err := seal.GenerateKey(id)
		require.NoError(t, err)
		keys = append(keys, k)
	}
	s, err := seal.NewRing(keys...)
	require.NoError(t, err)
	return s, keys
}

// Issue 13, case 8, without a Sealer: a secret-bearing response is never stored; its replay says the
// action happened (status, Location) without the body, and nothing caches either answer.
func TestSecretWithoutSealerIsRedacted(t *testing.T) {
	var calls int
	store := memstore.New(nil)
	mw := must(idempotency.New(&idempotency.Options{Store: store})).Handler(issue(&calls))
	first := serve(mw, req("POST", "/v1/sandbox/credentials", "k1", authA, "{}"))
	require.Equal(t, http.StatusCreated, first.Code)
	require.Contains(t, first.Body.String(), issuedKey)
	require.Equal(t, "no-store", first.Header().Get("Cache-Control"))
	require.NotContains(t, string(storedBody(t, store)), issuedKey)

	replay := serve(mw, req("POST", "/v1/sandbox/credentials", "k1", authA, "{}"))
	require.Equal(t, http.StatusCreated, replay.Code)
	require.Empty(t, replay.Body.String())
	require.Equal(t, "true", replay.Header().Get(idempotency.HeaderBodyOmitted))
	require.Equal(t, "/v1/sandbox/credentials/cred_1", replay.Header().Get("Location"))
	require.Equal(t, "no-store", replay.Header().Get("Cache-Control"))
	require.Equal(t, 1, calls)
}

// With a Sealer, every stored record is sealed: the secret is not in the store, the replay returns it
// to the same credential and key, and a rotated ring still opens old records; a ring that lost the
// key refuses the record (500) and does not run the handler again.
func TestSealedBodies(t *testing.T) {
	var calls int
	store := memstore.New(nil)
	sealer, keys := newSealer(t, 1)
	mw := must(idempotency.New(&idempotency.Options{Store: store, Sealer: sealer})).Handler(issue(&calls))
	first := serve(mw, req("POST", "/v1/sandbox/credentials", "k1", authA, "{}"))
	require.Equal(t, http.StatusCreated, first.Code)
	raw := storedBody(t, store)
	require.NotContains(t, string(raw), issuedKey, "sealed at rest")
	require.False(t, bytes.Contains(raw, []byte("api_key")))

	replay := serve(mw, req("POST", "/v1/sandbox/credentials", "k1", authA, "{}"))
	require.Equal(t, first.Body.String(), replay.Body.String())
	require.Equal(t, "application/json", replay.Header().Get("Content-Type"))
	require.Equal(t, "no-store", replay.Header().Get("Cache-Control"))
	require.Empty(t, replay.Header().Values("Idempotent-Sealed-Body"), "the mark is never replayed")

	// Rotation: a new key seals, the old one still opens.
	newKey, err := seal.GenerateKey(2)
	require.NoError(t, err)
	rotated, err := seal.NewRing(newKey, keys[0])
	require.NoError(t, err)
	mw2 := must(idempotency.New(&idempotency.Options{Store: store, Sealer: rotated})).Handler(issue(&calls))
	require.Equal(t, first.Body.String(), serve(mw2, req("POST", "/v1/sandbox/credentials", "k1", authA, "{}")).Body.String())

	// A ring that lost the key refuses the record: it does not open, so nothing of it can be trusted
	// (TestSealedRecordsFailClosed); the handler still does not run again.
	lost, _ := newSealer(t, 3)
	mw3 := must(idempotency.New(&idempotency.Options{Store: store, Sealer: lost})).Handler(issue(&calls))
	requireRefused(t, serve(mw3, req("POST", "/v1/sandbox/credentials", "k1", authA, "{}")))
	require.Equal(t, 1, calls)
}

// A sealed record is bound to its key: copied under another key, it does not open, and is refused.
func TestSealedBodyBoundToItsKey(t *testing.T) {
	ctx := context.Background()
	sealer, _ := newSealer(t, 1)
	store := memstore.New(nil)
	m := must(idempotency.New(&idempotency.Options{Store: store, Sealer: sealer}))
	a, err := m.Begin(ctx, idempotency.Request{Scope: "s", Key: "k1"})
	require.NoError(t, err)
	require.NoError(t, a.Complete(ctx, idempotency.Response{Status: 201, Body: []byte(issuedKey)}))
	rec, err := store.Lookup(ctx, driver.Key{Scope: "s", Key: "k1"}, timeNow())
	require.NoError(t, err)
	require.NotContains(t, string(rec.Response.Body), issuedKey)

	// Plant the sealed record under another key, as someone with write access to the store might.
	b, err := m.Begin(ctx, idempotency.Request{Scope: "s", Key: "k2"})
	require.NoError(t, err)
	require.NoError(t, store.Complete(ctx, driver.Key{Scope: "s", Key: "k2"}, b.Token, *rec.Response, timeNow().Add(idempotency.DefaultRetention)))
	_, err = m.Begin(ctx, idempotency.Request{Scope: "s", Key: "k2"})
	require.ErrorIs(t, err, idempotency.ErrRecordRefused)

	good, err := m.Begin(ctx, idempotency.Request{Scope: "s", Key: "k1"})
	require.NoError(t, err)
	require.Equal(t, issuedKey, string(good.Response.Body))
}

func timeNow() time.Time { return time.Now() }
