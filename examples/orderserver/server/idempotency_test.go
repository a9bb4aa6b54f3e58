package server

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
	"github.com/svcplatform/conventions/seal"
)

// isolatedServer is a server whose idempotency stores the test can inspect.
func isolatedServer(t *testing.T, live, sbx *memstore.Store, sealer *seal.Ring) (*Server, string, string) {
	s, sk, lk := isolatedServerCreds(t, live, sbx, sealer)
	return s, sk.APIKey, lk.APIKey
}

func isolatedServerCreds(t *testing.T, live, sbx *memstore.Store, sealer *seal.Ring) (*Server, apikey.Credentials, apikey.Credentials) {
	t.Helper()
	s, err := New(Config{Idempotency: live, SandboxIdempotency: sbx, Sealer: sealer,
		Now: func() time.Time { return time.Unix(1767225600, 0) }})
	require.NoError(t, err)
	sk, err := s.IssueCredentials(context.Background(), apikey.Sandbox)
	require.NoError(t, err)
	lk, err := s.IssueCredentials(context.Background(), apikey.Live)
	require.NoError(t, err)
	return s, sk, lk
}

func post(s *Server, path, key, idemKey, body string) *http.Response {
	ts := &testServer{Server: s}
	return ts.do("POST", path, key, idemKey, body).Result()
}

// A sandbox key, which has no rate ceiling, fills the sandbox's idempotency capacity; production keys
// never share it and keep creating orders.
func TestSandboxFloodLeavesProductionCapacity(t *testing.T) {
	live := memstore.New(&memstore.Options{MaxRecords: 50})
	sbx := memstore.New(&memstore.Options{MaxRecords: 20, MaxRecordsPerScope: -1})
	s, sandboxKey, liveKey := isolatedServer(t, live, sbx, nil)
	const order = `{"account":"acc_1","side":"buy"}`
	var full int
	for i := range 30 {
		if post(s, "/v1/orders", sandboxKey, "flood-"+itoa(i), order).StatusCode == http.StatusServiceUnavailable {
			full++
		}
	}
	require.Equal(t, 10, full, "the sandbox store holds 20 records")
	for i := range 3 {
		require.Equal(t, http.StatusCreated, post(s, "/v1/orders", liveKey, "live-"+itoa(i), order).StatusCode)
	}
	require.Equal(t, 3, live.Len())
}

// Requests refused before anything was done store nothing: junk bodies do not fill the store, and a
// corrected request may reuse the key.
func TestRefusedRequestsStoreNothing(t *testing.T) {
	sbx := memstore.New(nil)
	s, sandboxKey, _ := isolatedServer(t, memstore.New(nil), sbx, nil)
	for i, junk := range []string{`{`, `{"side":"buy"}`, `{"account":"acc_1","side":"sideways"}`, `{"unknown":1}`} {
		resp := post(s, "/v1/orders", sandboxKey, "junk-"+itoa(i), junk)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, junk)
	}
	require.Equal(t, http.StatusBadRequest, post(s, "/v1/webhook_endpoints", sandboxKey, "ep", `{"url":"ftp://x"}`).StatusCode)
	require.Zero(t, sbx.Len(), "no record for refused requests")
	require.Equal(t, http.StatusCreated, post(s, "/v1/orders", sandboxKey, "junk-0", `{"account":"acc_1","side":"buy"}`).StatusCode)
	require.Equal(t, 1, sbx.Len())
}

// No issued API key and no webhook signing secret lies in plain text in the idempotency store, and
// their answers are never cached; with a Sealer the replay still returns them to their requester.
func TestNoSecretStoredInPlainText(t *testing.T) {
	key, err := seal.GenerateKey(1)
	require.NoError(t, err)
	sealer, err := seal.NewRing(key)
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		sealer *seal.Ring
	}{{"redacted", nil}, {"sealed", sealer}} {
		t.Run(tc.name, func(t *testing.T) {
			sbx := memstore.New(nil)
			s, creds, _ := isolatedServerCreds(t, memstore.New(nil), sbx, tc.sealer)
			sandboxKey := creds.APIKey
			admin := s.AdminToken()
			first := post(s, "/v1/sandbox/credentials", admin, "cred-1", "")
			require.Equal(t, http.StatusCreated, first.StatusCode)
			require.Equal(t, "no-store", first.Header.Get("Cache-Control"))
			issued := readAll(t, first)
			require.Contains(t, issued, "sk_sandbox_")
			stored := storedBody(t, sbx, "admin", "cred-1")
			require.NotContains(t, stored, "sk_sandbox_")

			ep := post(s, "/v1/webhook_endpoints", sandboxKey, "ep-1", `{"url":"https://example.com/hook"}`)
			require.Equal(t, http.StatusCreated, ep.StatusCode)
			require.Equal(t, "no-store", ep.Header.Get("Cache-Control"))
			epBody := readAll(t, ep)
			require.Contains(t, epBody, "whsec_")
			scope := apikey.Principal{Licensee: creds.Licensee, Environment: creds.Environment}.Scope()
			require.NotContains(t, storedBody(t, sbx, scope, "ep-1"), "whsec_")

			key := post(s, "/v1/api_keys", sandboxKey, "key-1", `{"permissions":["orders:read"]}`)
			require.Equal(t, http.StatusCreated, key.StatusCode)
			require.Equal(t, "no-store", key.Header.Get("Cache-Control"))
			require.Contains(t, readAll(t, key), "sk_sandbox_")
			require.NotContains(t, storedBody(t, sbx, scope, "key-1"), "sk_sandbox_")

			replay := post(s, "/v1/sandbox/credentials", admin, "cred-1", "")
			require.Equal(t, http.StatusCreated, replay.StatusCode)
			require.Equal(t, "true", replay.Header.Get(idempotency.HeaderReplayed))
			require.Equal(t, "no-store", replay.Header.Get("Cache-Control"))
			if tc.sealer == nil {
				require.Equal(t, "true", replay.Header.Get(idempotency.HeaderBodyOmitted))
				require.Empty(t, readAll(t, replay))
			} else {
				require.Equal(t, issued, readAll(t, replay))
			}
		})
	}
}

func storedBody(t *testing.T, s *memstore.Store, scope, key string) string {
	t.Helper()
	rec, err := s.Lookup(context.Background(), driver.Key{Scope: scope, Key: key}, time.Unix(1767225600, 0))
	require.NoError(t, err)
	require.Equal(t, driver.Completed, rec.Status)
	return string(rec.Response.Body)
}

func readAll(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return string(b)
}

func itoa(i int) string { return strconv.Itoa(i) }
