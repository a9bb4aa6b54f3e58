package apikey

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

var declared = []string{"api_keys:read", "api_keys:write", "events:read", "orders:read", "orders:write"}

// keysServer mounts the keys API the way a service does: each route behind its permission.
func keysServer(t *testing.T, store CredentialStore, now func() time.Time, opts *KeysHandlerOptions) (*Issuer, http.Handler) {
	t.Helper()
	iss := must(NewIssuer(store, &IssuerOptions{Now: now, Permissions: declared}))
	auth := must(NewAuthenticator(iss, nil))
	keys := must(NewKeysHandler(iss, opts))
	inner := http.NewServeMux()
	keys.Register(inner, "v1", nil)
	mux := http.NewServeMux()
	mux.Handle("GET /v1/api_keys/", auth.Require("api_keys:read", inner))
	mux.Handle("GET /v1/api_keys", auth.Require("api_keys:read", inner))
	mux.Handle("/v1/api_keys/", auth.Require("api_keys:write", inner))
	mux.Handle("/v1/api_keys", auth.Require("api_keys:write", inner))
	mux.Handle("GET /v1/orders", auth.Require("orders:read", echoPrincipal))
	return iss, auth.Handler(mux)
}

func decodeKey(t *testing.T, body []byte) keyJSON {
	t.Helper()
	var k keyJSON
	require.NoError(t, json.Unmarshal(body, &k), string(body))
	return k
}

func listKeys(t *testing.T, h http.Handler, key string) []keyJSON {
	t.Helper()
	rec := do(t, h, "GET", "/v1/api_keys", key, "")
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var out struct {
		Object string    `json:"object"`
		Data   []keyJSON `json:"data"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	require.Equal(t, "list", out.Object)
	return out.Data
}

// TestKeysCreateListRevoke: a key created with permissions is shown once with its secret, listed
// without it, works inside its permissions, and stops at once when revoked.
func TestKeysCreateListRevoke(t *testing.T) {
	iss, h := keysServer(t, nil, nil, nil)
	admin := issueWith(t, iss)
	rec := do(t, h, "POST", "/v1/api_keys", admin.APIKey, `{"permissions":["orders:read"]}`)
	require.Equal(t, 201, rec.Code, rec.Body.String())
	created := decodeKey(t, rec.Body.Bytes())
	require.True(t, strings.HasPrefix(created.Secret, "sk_live_"))
	require.True(t, created.Restricted)
	require.Equal(t, []string{"orders:read"}, created.Permissions)
	require.Equal(t, "/v1/api_keys/"+created.ID, rec.Header().Get("Location"))
	require.Equal(t, "no-store", rec.Header().Get("Cache-Control"))

	require.Equal(t, 200, do(t, h, "GET", "/v1/orders", created.Secret, "").Code)
	require.Equal(t, 403, do(t, h, "GET", "/v1/api_keys", created.Secret, "").Code, "orders:read cannot list keys")

	keys := listKeys(t, h, admin.APIKey)
	require.Len(t, keys, 2)
	for _, k := range keys {
		require.Empty(t, k.Secret, "a listed key never shows its secret")
	}
	rec = do(t, h, "GET", "/v1/api_keys/"+created.ID, admin.APIKey, "")
	require.Equal(t, 200, rec.Code)
	require.NotContains(t, rec.Body.String(), created.Secret)

	rec = do(t, h, "DELETE", "/v1/api_keys/"+created.ID, admin.APIKey, "")
	require.Equal(t, 200, rec.Code, rec.Body.String())
	require.NotNil(t, decodeKey(t, rec.Body.Bytes()).ExpiresAt)
	require.Equal(t, 401, do(t, h, "GET", "/v1/orders", created.Secret, "").Code, "a revoked key stops at once")
	require.Len(t, listKeys(t, h, admin.APIKey), 1, "a revoked key is no longer listed")
}

// TestKeysTenancy: another licensee's key, and the same licensee's key in the other environment,
// are the same 404 as an unknown ID, for every route; lists never show them.
func TestKeysTenancy(t *testing.T) {
	iss, h := keysServer(t, nil, nil, nil)
	mine := issueWith(t, iss)
	theirs := must(iss.Issue(context.Background(), Evaluation{Licensee: "lic_2", Environment: Live}))
	sandboxMine := must(iss.Issue(context.Background(), Evaluation{Licensee: "lic_1", Environment: Sandbox}))
	unknown := do(t, h, "GET", "/v1/api_keys/key_nobody", mine.APIKey, "")
	require.Equal(t, 404, unknown.Code)
	requireConforms(t, unknown)
	for _, other := range []string{theirs.KeyID, sandboxMine.KeyID} {
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/v1/api_keys/" + other, ""},
			{"DELETE", "/v1/api_keys/" + other, ""},
			{"POST", "/v1/api_keys/" + other + "/roll", `{"expires_in":0}`},
		} {
			rec := do(t, h, r.method, r.path, mine.APIKey, r.body)
			require.Equal(t, 404, rec.Code, "%s %s", r.method, r.path)
			require.Equal(t, withoutRequestID(t, unknown.Body.Bytes()), withoutRequestID(t, rec.Body.Bytes()))
		}
	}
	require.Equal(t, 200, do(t, h, "GET", "/v1/orders", theirs.APIKey, "").Code, "their key still works")
	keys := listKeys(t, h, mine.APIKey)
	require.Len(t, keys, 1)
	require.Equal(t, mine.KeyID, keys[0].ID)
}

// TestKeysNoEscalation: a restricted key with api_keys:write hands out only permissions it holds —
// never the full key, never one it lacks — and cannot roll or revoke a broader key.
func TestKeysNoEscalation(t *testing.T) {
	iss, h := keysServer(t, nil, nil, nil)
	full := issueWith(t, iss)
	manager := issueWith(t, iss, "api_keys:write", "orders:write")

	rec := do(t, h, "POST", "/v1/api_keys", manager.APIKey, `{"permissions":["orders:read","events:read"]}`)
	require.Equal(t, 403, rec.Code, rec.Body.String())
	requireConforms(t, rec)
	p := problem(t, rec)
	require.Equal(t, CodePermissionDenied, p.Code)
	require.Equal(t, "/permissions/1", p.Errors[0].Pointer, "located at the permission it lacks")
	require.Contains(t, p.Detail, "events:read")

	rec = do(t, h, "POST", "/v1/api_keys", manager.APIKey, `{"permissions":["orders:read"]}`)
	require.Equal(t, 201, rec.Code, "orders:write includes orders:read: %s", rec.Body.String())
	// Omitted permissions: a key like the caller's, so restricted like it, never the full key.
	rec = do(t, h, "POST", "/v1/api_keys", manager.APIKey, `{}`)
	require.Equal(t, 201, rec.Code, rec.Body.String())
	require.Equal(t, []string{"api_keys:write", "orders:write"}, decodeKey(t, rec.Body.Bytes()).Permissions)

	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/api_keys/" + full.KeyID + "/roll", `{"expires_in":0}`},
		{"DELETE", "/v1/api_keys/" + full.KeyID, ""},
	} {
		rec := do(t, h, r.method, r.path, manager.APIKey, r.body)
		require.Equal(t, 403, rec.Code, "%s %s: %s", r.method, r.path, rec.Body.String())
		require.Equal(t, "id", problem(t, rec).Errors[0].Name)
	}
	require.Equal(t, 200, do(t, h, "GET", "/v1/api_keys", full.APIKey, "").Code, "the full key is untouched")
}

// TestKeysBadInput: every refusal is located.
func TestKeysBadInput(t *testing.T) {
	iss, h := keysServer(t, nil, nil, &KeysHandlerOptions{MaxKeys: 2})
	admin := issueWith(t, iss)
	for _, tc := range []struct {
		name, path, body, code, where string
	}{
		{"no permission", "/v1/api_keys", `{"permissions":[]}`, CodeInvalidPermission, "/permissions"},
		{"undeclared", "/v1/api_keys", `{"permissions":["orders:read","refunds:write"]}`, CodeInvalidPermission, "/permissions/1"},
		{"not a list", "/v1/api_keys", `{"permissions":"orders:read"}`, "", "/permissions"},
		{"unknown field", "/v1/api_keys", `{"scopes":["orders:read"]}`, "", "/scopes"},
		{"negative overlap", "/v1/api_keys/" + admin.KeyID + "/roll", `{"expires_in":-1}`, CodeOutOfRange, "/expires_in"},
		{"overlap too long", "/v1/api_keys/" + admin.KeyID + "/roll", `{"expires_in":604801}`, CodeOutOfRange, "/expires_in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, h, "POST", tc.path, admin.APIKey, tc.body)
			require.Equal(t, 400, rec.Code, rec.Body.String())
			requireConforms(t, rec)
			p := problem(t, rec)
			require.Equal(t, tc.where, p.Errors[0].Pointer)
			if tc.code != "" {
				require.Equal(t, tc.code, p.Errors[0].Code)
			}
		})
	}
	require.Equal(t, 201, do(t, h, "POST", "/v1/api_keys", admin.APIKey, `{"permissions":["orders:read"]}`).Code)
	rec := do(t, h, "POST", "/v1/api_keys", admin.APIKey, `{"permissions":["orders:read"]}`)
	require.Equal(t, 422, rec.Code, "two keys held, the limit: %s", rec.Body.String())
	requireConforms(t, rec)
	require.Equal(t, CodeKeyLimitReached, problem(t, rec).Code)
	// A roll is never refused for the limit: a leaked key must always be replaceable.
	require.Equal(t, 201, do(t, h, "POST", "/v1/api_keys/"+admin.KeyID+"/roll", admin.APIKey, `{"expires_in":60}`).Code)
}

// TestKeyRollOverlap: a rolled key's old secret works until the end the roll set and not a moment
// after, while the new one, with the same permissions, works throughout; a key already rolled cannot
// be rolled again; expires_in 0 ends it at once. Time passes in a synctest bubble.
func TestKeyRollOverlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		iss, h := keysServer(t, nil, time.Now, nil)
		old := issueWith(t, iss, "orders:read", "api_keys:write")
		rec := do(t, h, "POST", "/v1/api_keys/"+old.KeyID+"/roll", old.APIKey, "") // the default, 24 h
		require.Equal(t, 201, rec.Code, rec.Body.String())
		next := decodeKey(t, rec.Body.Bytes())
		require.Equal(t, []string{"api_keys:write", "orders:read"}, next.Permissions)
		require.NotEqual(t, old.APIKey, next.Secret)
		require.Equal(t, old.KeyID, next.Previous.ID)
		require.Equal(t, time.Now().Add(24*time.Hour).Unix(), *next.Previous.ExpiresAt)
		require.Equal(t, "/v1/api_keys/"+next.ID, rec.Header().Get("Location"))

		rec = do(t, h, "POST", "/v1/api_keys/"+old.KeyID+"/roll", next.Secret, `{"expires_in":0}`)
		require.Equal(t, 422, rec.Code, "rolled already: %s", rec.Body.String())
		require.Equal(t, CodeKeyEnding, problem(t, rec).Code)

		time.Sleep(24*time.Hour - time.Second)
		require.Equal(t, 200, do(t, h, "GET", "/v1/orders", old.APIKey, "").Code, "the old key works until its end")
		require.Len(t, listKeys(t, h, next.Secret), 2, "both listed while both work")
		time.Sleep(time.Second)
		require.Equal(t, 401, do(t, h, "GET", "/v1/orders", old.APIKey, "").Code, "and not after")
		require.Equal(t, 200, do(t, h, "GET", "/v1/orders", next.Secret, "").Code)
		require.Len(t, listKeys(t, h, next.Secret), 1)

		rec = do(t, h, "POST", "/v1/api_keys/"+next.ID+"/roll", next.Secret, `{"expires_in":0}`)
		require.Equal(t, 201, rec.Code, rec.Body.String())
		require.Equal(t, 401, do(t, h, "GET", "/v1/orders", next.Secret, "").Code, "expires_in 0 ends it at once")
		require.Equal(t, 200, do(t, h, "GET", "/v1/orders", decodeKey(t, rec.Body.Bytes()).Secret, "").Code)
	})
}

// TestKeyRollEnded: a key that has expired is not rolled either — 422 api_key_ending, like one
// already set to end, not the opaque 500 of the store's ErrCredentialEnded.
func TestKeyRollEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		iss, h := keysServer(t, nil, time.Now, nil)
		short := must(iss.Issue(context.Background(), Evaluation{Licensee: "lic_1", Environment: Live, TTL: time.Hour}))
		admin := issueWith(t, iss)
		time.Sleep(time.Hour)
		rec := do(t, h, "POST", "/v1/api_keys/"+short.KeyID+"/roll", admin.APIKey, `{"expires_in":0}`)
		require.Equal(t, 422, rec.Code, rec.Body.String())
		requireConforms(t, rec)
		p := problem(t, rec)
		require.Equal(t, CodeKeyEnding, p.Code)
		require.Equal(t, "id", p.Errors[0].Name)
		require.Len(t, listKeys(t, h, admin.APIKey), 1, "nothing was issued")
	})
}

// countingStore counts MarkUsed calls and the uses they carry.
type countingStore struct {
	*MemoryCredentialStore
	mu    sync.Mutex
	calls int
	uses  int
	fail  bool
}

func (c *countingStore) MarkUsed(ctx context.Context, used map[string]time.Time) error {
	c.mu.Lock()
	c.calls++
	c.uses += len(used)
	fail := c.fail
	c.mu.Unlock()
	if fail {
		return fmt.Errorf("store down")
	}
	return c.MemoryCredentialStore.MarkUsed(ctx, used)
}

func (c *countingStore) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, c.uses
}

// TestLastUsedAtOncePerMinute: a thousand requests of two keys within a minute write their first
// use in that minute once each, in one call, from Run — not on the requests' path; a failed write is retried at the
// next interval; at shutdown Run writes what is left.
func TestLastUsedAtOncePerMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingStore{MemoryCredentialStore: NewMemoryCredentialStore()}
		iss, h := keysServer(t, store, time.Now, nil)
		a, b := issueWith(t, iss), issueWith(t, iss, "orders:read")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- iss.Run(ctx) }()

		start := time.Now()
		for i := range 1000 {
			key := a.APIKey
			if i%2 == 1 {
				key = b.APIKey
			}
			if i == 500 {
				time.Sleep(UsageInterval / 2)
			}
			require.Equal(t, 200, do(t, h, "GET", "/v1/orders", key, "").Code)
		}
		calls, _ := store.counts()
		require.Equal(t, 0, calls, "no request waited for a write")
		time.Sleep(UsageInterval / 2)
		synctest.Wait()
		calls, uses := store.counts()
		require.Equal(t, 1, calls)
		require.Equal(t, 2, uses)
		for _, k := range listKeys(t, h, a.APIKey) {
			require.Equal(t, start.Unix(), *k.LastUsedAt, k.ID)
		}

		// A minute on, a use is noted again; its write fails, and is retried at the next interval.
		store.mu.Lock()
		store.fail = true
		store.mu.Unlock()
		require.Equal(t, 200, do(t, h, "GET", "/v1/orders", a.APIKey, "").Code)
		used := time.Now()
		time.Sleep(UsageInterval)
		synctest.Wait()
		store.mu.Lock()
		store.fail = false
		store.mu.Unlock()
		time.Sleep(UsageInterval)
		synctest.Wait()
		calls, uses = store.counts()
		require.Equal(t, 3, calls, "the failed write, then its retry")
		require.Equal(t, 4, uses)
		c := must(store.Lookup(context.Background(), a.KeyID))
		require.True(t, c.LastUsedAt.Equal(used), "the retried write carries the use's own time")

		time.Sleep(2 * UsageInterval)
		require.Equal(t, 200, do(t, h, "GET", "/v1/orders", b.APIKey, "").Code)
		cancel()
		require.NoError(t, <-done)
		c = must(store.Lookup(context.Background(), b.KeyID))
		require.True(t, c.LastUsedAt.Equal(time.Now()), "written at shutdown")
	})
}

// TestKeysWithoutPrincipal: mounted without an Authenticator, every route answers the opaque 500.
func TestKeysWithoutPrincipal(t *testing.T) {
	keys := must(NewKeysHandler(must(NewIssuer(nil, nil)), nil))
	mux := http.NewServeMux()
	keys.Register(mux, "", nil)
	for _, r := range [][2]string{{"GET", "/api_keys"}, {"POST", "/api_keys"}, {"GET", "/api_keys/key_1"}, {"DELETE", "/api_keys/key_1"},
		{"POST", "/api_keys/key_1/roll"}} {
		rec := do(t, apierror.WithRequestID(mux), r[0], r[1], "", "")
		require.Equal(t, 500, rec.Code, r)
	}
	_, err := NewKeysHandler(nil, nil)
	require.Error(t, err)
	_, err = NewKeysHandler(must(NewIssuer(nil, nil)), &KeysHandlerOptions{MaxKeys: -1})
	require.Error(t, err)
}

// TestKeysHandlerZeroValue: the zero KeysHandler's routes answer the opaque 500.
func TestKeysHandlerZeroValue(t *testing.T) {
	iss := must(NewIssuer(nil, nil))
	auth := must(NewAuthenticator(iss, nil))
	key := issue(t, iss, "lic_1", Live).APIKey
	mux := http.NewServeMux()
	new(KeysHandler).Register(mux, "", nil)
	rec := do(t, auth.Handler(mux), "GET", "/api_keys", key, "")
	require.Equal(t, 500, rec.Code)
}
