package redisstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/redisstore"
	"github.com/svcplatform/conventions/redisstore/internal/redistest"
	"github.com/svcplatform/conventions/seal"
)

// TestSealedRecordsFailClosedOnRedis: with a Sealer, a writer of the Redis who replaces a sealed
// record with plain text, swaps its status, injects Location or Set-Cookie beside the seal, replaces
// its body, or copies another key's sealed record over it (HSET, as redis-cli would), gets none of it
// replayed, and the handler does not run again: the client gets the opaque 500 problem and the hash
// stays as it was.
func TestSealedRecordsFailClosedOnRedis(t *testing.T) {
	client, prefix := redistest.Client(t)
	ctx := context.Background()
	store := mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix})
	k, err := seal.GenerateKey(1)
	require.NoError(t, err)
	ring := must(seal.NewRing(k))

	const auth = "Bearer sk_sandbox_redis"
	calls := 0
	mw := must(idempotency.New(&idempotency.Options{Store: store, Sealer: ring})).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/orders/ord_1")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ord_1","secret":"whsec_in_the_body"}`))
	}))
	post := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(`{"side":"buy"}`))
		r.Header.Set("Authorization", auth)
		r.Header.Set(idempotency.HeaderKey, key)
		w := httptest.NewRecorder()
		mw.ServeHTTP(w, r)
		return w
	}
	sum := sha256.Sum256([]byte(idempotency.CredentialScope(auth)))
	recordKey := func(key string) string {
		return prefix + "{" + base64.RawURLEncoding.EncodeToString(sum[:]) + "}:idem:" + key
	}
	read := func(key string) map[string]string {
		m, err := client.HGetAll(ctx, recordKey(key)).Result()
		require.NoError(t, err)
		return m
	}

	for i, tc := range []struct {
		name   string
		tamper func(victim, donor map[string]string) map[string]string // the fields to HSET
	}{
		{"not sealed", func(v, _ map[string]string) map[string]string {
			return map[string]string{"hdr": `{"Content-Type":["application/json"],"Location":["https://evil.example/"],"Set-Cookie":["session=evil"]}`,
				"body": `{"id":"ord_evil"}`}
		}},
		{"status swapped", func(v, _ map[string]string) map[string]string { return map[string]string{"code": "200"} }},
		{"Location injected", func(v, _ map[string]string) map[string]string {
			return map[string]string{"hdr": `{"Idempotent-Sealed-Body":["v2"],"Location":["https://evil.example/"]}`}
		}},
		{"Set-Cookie injected", func(v, _ map[string]string) map[string]string {
			return map[string]string{"hdr": `{"Idempotent-Sealed-Body":["v2"],"Set-Cookie":["session=evil"]}`}
		}},
		{"body replaced by plain text", func(v, _ map[string]string) map[string]string {
			return map[string]string{"body": `{"id":"ord_evil"}`}
		}},
		{"moved from another key", func(_, d map[string]string) map[string]string {
			return map[string]string{"code": d["code"], "hdr": d["hdr"], "body": d["body"]}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			victim, donor := "victim-"+string(rune('a'+i)), "donor-"+string(rune('a'+i))
			calls = 0
			for _, key := range []string{victim, donor} {
				require.Equal(t, http.StatusCreated, post(key).Code)
			}
			require.Equal(t, 2, calls)
			genuine := read(victim)
			require.Equal(t, `{"Idempotent-Sealed-Body":["v2"]}`, genuine["hdr"], "nothing but the mark beside the seal")
			require.NotContains(t, genuine["body"], "whsec_")
			ok := post(victim)
			require.Equal(t, http.StatusCreated, ok.Code, "the genuine record replays")
			require.Equal(t, "/v1/orders/ord_1", ok.Header().Get("Location"))

			require.NoError(t, client.HSet(ctx, recordKey(victim), tc.tamper(genuine, read(donor))).Err())
			tampered := read(victim)
			require.NotEqual(t, genuine, tampered)

			for range 2 {
				w := post(victim)
				require.Equal(t, http.StatusInternalServerError, w.Code, "%s", w.Body)
				require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
				require.Empty(t, w.Header().Values("Set-Cookie"))
				require.Empty(t, w.Header().Get("Location"))
				require.Empty(t, w.Header().Get(idempotency.HeaderReplayed))
				var p map[string]any
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
				require.Equal(t, apierror.CodeInternal, p["code"])
				for _, leak := range []string{"evil", "seal", "whsec_", "ord_"} {
					require.NotContains(t, strings.ToLower(w.Body.String()), leak)
				}
			}
			require.Equal(t, 2, calls, "the handler never runs again")
			require.Equal(t, tampered, read(victim), "the record is left as it is")
		})
	}
}
