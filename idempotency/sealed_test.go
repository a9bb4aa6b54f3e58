package idempotency_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
	"github.com/svcplatform/conventions/seal"
)

// sealedHandler answers like a creation that sets a cookie and a location; it counts its calls.
func sealedHandler(calls *int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*calls++
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/orders/ord_1")
		w.Header().Set("X-Trace-Note", "kept")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ord_1","secret":"whsec_the_body_secret"}`))
	})
}

// plant writes resp as the completed record of (scope, key) for the request req would make, straight
// through the Store as a writer of its backend could: the record the middleware will find.
func plant(t *testing.T, store driver.Store, key driver.Key, r *http.Request, body string, resp driver.Response) {
	t.Helper()
	ctx := context.Background()
	fp := idempotency.NewFingerprint(r.Method, r.URL.EscapedPath(), r.URL.RawQuery, sha256.Sum256([]byte(body)))
	now := timeNow()
	c, err := store.Claim(ctx, key, fp, now, now.Add(idempotency.DefaultLease), now.Add(idempotency.DefaultRetention))
	require.NoError(t, err)
	require.Equal(t, driver.Claimed, c.Status)
	require.NoError(t, store.Complete(ctx, key, c.Token, resp, now.Add(idempotency.DefaultRetention)))
}

func withHeader(resp idempotency.Response, k, v string) idempotency.Response {
	h := resp.Header.Clone()
	h.Add(k, v)
	resp.Header = h
	return resp
}

// TestSealedRecordsFailClosed: with a Sealer, a record a writer of the store made or changed — not
// sealed, sealed by an earlier version's body-only format, status swapped, Location or Set-Cookie
// injected, body replaced, moved from another key, or sealed with a key that left the ring — is
// neither replayed nor run again: the client gets the opaque 500 problem and the record stays in
// place. Begin says so with ErrRecordRefused. The store is a memstore.Store; pgstore and redisstore
// run the same attacks through SQL and Redis commands.
func TestSealedRecordsFailClosed(t *testing.T) {
	ring, keys := newSealer(t, 1)
	scope := idempotency.CredentialScope(authA)
	k1 := driver.Key{Scope: scope, Key: "k1"}
	const path, body = "/v1/orders", order

	// A genuine sealed record of k1 and one of k0, as the middleware stores them.
	genuine := func(key string) idempotency.Response {
		var calls int
		store := memstore.New(nil)
		mw := must(idempotency.New(&idempotency.Options{Store: store, Sealer: ring, ReplayHeaders: []string{"X-Trace-Note"}})).Handler(sealedHandler(&calls))
		first := serve(mw, req("POST", path, key, authA, body))
		require.Equal(t, http.StatusCreated, first.Code)
		rec, err := store.Lookup(context.Background(), driver.Key{Scope: scope, Key: key}, timeNow())
		require.NoError(t, err)
		return *rec.Response
	}
	good, other := genuine("k1"), genuine("k0")

	// At rest: the mark alone in the header, nothing readable in the body.
	require.Equal(t, http.Header{"Idempotent-Sealed-Body": {"v2"}}, good.Header)
	require.NotContains(t, string(good.Body), "whsec_")
	require.NotContains(t, string(good.Body), "/v1/orders/ord_1")

	swapped := good
	swapped.Status = http.StatusOK
	plainBody := good
	plainBody.Body = []byte(`{"id":"ord_evil"}`)
	// What versions before this one stored: the body sealed alone, status and headers in clear.
	var aad []byte
	aad = append(append(append(aad, scope...), 0), "k1"...)
	bodyOnly := idempotency.Response{Status: http.StatusCreated,
		Header: http.Header{"Idempotent-Sealed-Body": {"v1"}, "Location": {"https://evil.example/"}},
		Body:   ring.Seal(nil, []byte(`{"id":"ord_1"}`), aad)}
	otherRing, _ := newSealer(t, 2)

	for _, tc := range []struct {
		name   string
		stored idempotency.Response
		ring   *seal.Ring
	}{
		{"not sealed", idempotency.Response{Status: http.StatusCreated, Header: http.Header{
			"Content-Type": {"application/json"}, "Location": {"https://evil.example/"}, "Set-Cookie": {"session=evil"}},
			Body: []byte(`{"id":"ord_evil"}`)}, ring},
		{"status swapped", swapped, ring},
		{"Location injected", withHeader(good, "Location", "https://evil.example/"), ring},
		{"Set-Cookie injected", withHeader(good, "Set-Cookie", "session=evil"), ring},
		{"body replaced by plain text", plainBody, ring},
		{"moved from another key", other, ring},
		{"earlier body-only format", bodyOnly, ring},
		{"key left the ring", good, otherRing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls int
			store := memstore.New(nil)
			plant(t, store, k1, req("POST", path, "k1", authA, body), body, tc.stored)
			logs := &logBuffer{}
			m := must(idempotency.New(&idempotency.Options{Store: store, Sealer: tc.ring, Logger: logs.logger()}))
			mw := m.Handler(sealedHandler(&calls))

			for range 2 { // a retry is refused the same way
				w := serve(mw, req("POST", path, "k1", authA, body))
				requireRefused(t, w)
			}
			require.Zero(t, calls, "the handler never runs again")
			require.Contains(t, logs.String(), "stored record refused")

			// Left in place, unchanged, for an operator.
			rec, err := store.Lookup(context.Background(), k1, timeNow())
			require.NoError(t, err)
			require.Equal(t, tc.stored.Status, rec.Response.Status)
			require.Equal(t, tc.stored.Body, rec.Response.Body)

			_, err = m.Begin(context.Background(), idempotency.Request{Scope: scope, Key: "k1",
				Fingerprint: idempotency.NewFingerprint("POST", path, "", sha256.Sum256([]byte(body)))})
			require.ErrorIs(t, err, idempotency.ErrRecordRefused)
			require.NotErrorIs(t, err, idempotency.ErrStore)
			st := m.Stats()
			require.Zero(t, st.Replayed)
			require.Zero(t, st.Executed)

			// FailOpen does not apply: the request was carried out already.
			open := must(idempotency.New(&idempotency.Options{Store: store, Sealer: tc.ring, FailOpen: true})).Handler(sealedHandler(&calls))
			requireRefused(t, serve(open, req("POST", path, "k1", authA, body)))
			require.Zero(t, calls)
		})
	}

	// The genuine record replays in full: status, headers and body from the seal.
	var calls int
	store := memstore.New(nil)
	plant(t, store, k1, req("POST", path, "k1", authA, body), body, good)
	mw := must(idempotency.New(&idempotency.Options{Store: store, Sealer: ring})).Handler(sealedHandler(&calls))
	w := serve(mw, req("POST", path, "k1", authA, body))
	require.Equal(t, http.StatusCreated, w.Code)
	require.Equal(t, "/v1/orders/ord_1", w.Header().Get("Location"))
	require.Equal(t, "kept", w.Header().Get("X-Trace-Note"), "stored (and sealed) by the first answer's middleware")
	require.Equal(t, "true", w.Header().Get(idempotency.HeaderReplayed))
	require.Empty(t, w.Header().Values("Idempotent-Sealed-Body"))
	require.Contains(t, w.Body.String(), "whsec_the_body_secret")
	require.Zero(t, calls)
	_ = keys
}

// requireRefused checks the answer to a refused record: the opaque 500, nothing of the record.
func requireRefused(t *testing.T, w interface {
	Result() *http.Response
}) {
	t.Helper()
	resp := w.Result()
	defer resp.Body.Close()
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	require.Empty(t, resp.Header.Values("Set-Cookie"))
	require.Empty(t, resp.Header.Get("Location"))
	require.Empty(t, resp.Header.Get(idempotency.HeaderReplayed))
	var p map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	require.Equal(t, apierror.CodeInternal, p["code"])
	raw, _ := json.Marshal(p)
	for _, leak := range []string{"evil", "seal", "whsec_", "ord_"} {
		require.NotContains(t, strings.ToLower(string(raw)), leak)
	}
}

// Without a Sealer nothing changes: an unsealed record replays as stored, and a sealed one replays
// its stored status without its body.
func TestUnsealedRecordsWithoutSealer(t *testing.T) {
	ring, _ := newSealer(t, 1)
	scope := idempotency.CredentialScope(authA)
	k1 := driver.Key{Scope: scope, Key: "k1"}
	var calls int
	store := memstore.New(nil)
	sealedMW := must(idempotency.New(&idempotency.Options{Store: store, Sealer: ring})).Handler(sealedHandler(&calls))
	require.Equal(t, http.StatusCreated, serve(sealedMW, req("POST", "/v1/orders", "k1", authA, order)).Code)

	plain := must(idempotency.New(&idempotency.Options{Store: store})).Handler(sealedHandler(&calls))
	w := serve(plain, req("POST", "/v1/orders", "k1", authA, order))
	require.Equal(t, http.StatusCreated, w.Code)
	require.Empty(t, w.Body.String())
	require.Equal(t, "true", w.Header().Get(idempotency.HeaderBodyOmitted))
	require.Equal(t, 1, calls)

	store2 := memstore.New(nil)
	plant(t, store2, k1, req("POST", "/v1/orders", "k1", authA, order), order,
		idempotency.Response{Status: 201, Header: http.Header{"Location": {"/v1/orders/ord_9"}}, Body: []byte("{}")})
	w = serve(must(idempotency.New(&idempotency.Options{Store: store2})).Handler(sealedHandler(&calls)), req("POST", "/v1/orders", "k1", authA, order))
	require.Equal(t, http.StatusCreated, w.Code)
	require.Equal(t, "/v1/orders/ord_9", w.Header().Get("Location"))
	require.Equal(t, 1, calls)
}
