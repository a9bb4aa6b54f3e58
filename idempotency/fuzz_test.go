package idempotency_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/svcplatform/conventions/idempotency"
)

func FuzzKeyFromHeader(f *testing.F) {
	for _, s := range []string{"", "k", "8e03978e-40d5-43e8-bc93-6894a57f9324", `"quoted"`, " lead", "trail ",
		"tab\there", "caf\u00e9", strings.Repeat("€", 85), strings.Repeat("a", 255), strings.Repeat("a", 256), "\x00", "\x7f", "~!"} {
		f.Add(s, false)
	}
	f.Add("k", true)
	f.Fuzz(func(t *testing.T, key string, twice bool) {
		h := http.Header{idempotency.HeaderKey: {key}}
		if twice {
			h.Add(idempotency.HeaderKey, key)
		}
		got, err := idempotency.KeyFromHeader(h)
		valid := len(key) >= 1 && len(key) <= idempotency.MaxKeyLen
		for i := 0; i < len(key); i++ {
			valid = valid && key[i] >= 0x21 && key[i] <= 0x7e
		}
		if valid != idempotency.ValidKey(key) {
			t.Fatalf("ValidKey(%q) = %v, want %v", key, !valid, valid)
		}
		switch {
		case twice || !valid:
			if err != idempotency.ErrKeyInvalid || got != "" {
				t.Fatalf("KeyFromHeader(%q, twice=%v) = %q, %v; want ErrKeyInvalid", key, twice, got, err)
			}
		case err != nil || got != key:
			t.Fatalf("KeyFromHeader(%q) = %q, %v; want the key as sent", key, got, err)
		}
	})
}

// FuzzMiddlewareHeaders throws arbitrary keys, credentials, methods, queries and bodies at the
// middleware. It must never panic, never run the handler for a request it rejects, never echo a
// credential, and always replay a completed request exactly.
func FuzzMiddlewareHeaders(f *testing.F) {
	f.Add("k1", "abc", "POST", "", []byte(`{"a":1}`), false)
	f.Add("", "abc", "POST", "a=1", []byte{}, false)
	f.Add("k 1", "abc", "PUT", "a=%zz", []byte("x"), true)
	f.Add(strings.Repeat("k", 256), "", "DELETE", "", []byte(nil), false)
	f.Add("caf\u00e9", "abc", "PATCH", "b=2&a=1", []byte("\x00\xff"), false)
	f.Add("k1", "abc", "GET", "", []byte("ignored"), false)
	f.Add("k1", "", "POST", "", []byte("no credential"), false)
	f.Fuzz(func(t *testing.T, key, secret, method, query string, body []byte, dupKey bool) {
		if method == "" {
			method = "POST"
		}
		var calls int
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls++
			got, _ := io.ReadAll(r.Body)
			if !bytes.Equal(got, body) {
				t.Fatalf("handler got a different body")
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte("created"))
		})
		mw := must(idempotency.New(&idempotency.Options{MaxRequestBytes: 1 << 16})).Handler(h)
		auth := ""
		if secret != "" {
			auth = "Bearer sk_" + secret
		}
		newReq := func() *http.Request {
			r := &http.Request{
				Method: method, URL: &url.URL{Path: "/v1/orders", RawQuery: query},
				Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
			}
			r = r.WithContext(t.Context())
			if key != "" {
				r.Header[idempotency.HeaderKey] = []string{key}
				if dupKey {
					r.Header[idempotency.HeaderKey] = append(r.Header[idempotency.HeaderKey], key)
				}
			}
			if auth != "" {
				r.Header["Authorization"] = []string{auth}
			}
			return r
		}
		w := httptest.NewRecorder()
		mw.ServeHTTP(w, newReq())
		if strings.Contains(w.Body.String(), "sk_") {
			t.Fatalf("response echoes the credential: %s", w.Body.String())
		}
		governed := method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE"
		if !governed {
			if w.Code != http.StatusCreated || calls != 1 {
				t.Fatalf("%s must pass through: %d, %d calls", method, w.Code, calls)
			}
			return
		}
		switch {
		case auth == "":
			if w.Code != 401 || calls != 0 {
				t.Fatalf("no credential: %d, %d calls", w.Code, calls)
			}
		case key == "":
			if w.Code != 400 || calls != 0 {
				t.Fatalf("missing key: %d, %d calls", w.Code, calls)
			}
		case dupKey || !idempotency.ValidKey(key):
			if w.Code != 400 || calls != 0 {
				t.Fatalf("invalid key %q: %d, %d calls", key, w.Code, calls)
			}
		default:
			if w.Code != http.StatusCreated || calls != 1 {
				t.Fatalf("first request: %d, %d calls: %s", w.Code, calls, w.Body.String())
			}
			again := httptest.NewRecorder()
			mw.ServeHTTP(again, newReq())
			if again.Code != http.StatusCreated || again.Body.String() != "created" || again.Header().Get(idempotency.HeaderReplayed) != "true" || calls != 1 {
				t.Fatalf("replay: %d %q replayed=%q, %d calls", again.Code, again.Body.String(), again.Header().Get(idempotency.HeaderReplayed), calls)
			}
		}
	})
}
