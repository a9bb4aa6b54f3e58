package idempotency_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/internal/strictjson"
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

// FuzzCanonicalJSON checks the canonicalizer of CanonicalJSONFingerprint on arbitrary bodies: it never
// panics and is deterministic; what it accepts is JSON, and the same JSON re-serialized by
// encoding/json (maps sorted by UTF-8, indented, HTML escaped, every string re-escaped) has the same
// canonical form; what it refuses is not strict JSON (invalid, invalid UTF-8, a lone surrogate, a
// member named twice, too deep), exactly what apierror's strict decoder (internal/strictjson) refuses
// too: the two parsers do different work (one decodes and re-writes every token, the other checks a
// body against a Go type without decoding it), but they share one definition of strict JSON.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{
		`{"account":"acc_1","side":"buy"}`, ` { "b" : [ 1 , 2.50 , -0 , 1e2 ] , "a" : { "y" : null , "x" : true } } `,
		`"\u0041\/\ud83d\ude00\u2028"`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `"\ud800"`, "\"\xff\"",
		`[9007199254740993,0.1e-5,1E+21]`, `{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
		`side=buy`, ``, `[[[[[]]]]]`, `{"":{"":{"":""}}}`, `{"a":1} x`, `1e400`, `"\ud800\u0041"`,
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001), // too deep; the deepest accepted is in TestCanonicalJSONDepth
	} {
		f.Add([]byte(s))
	}
	loneSurrogate := regexp.MustCompile(`(?i)\\ud[89a-f]`)
	f.Fuzz(func(t *testing.T, data []byte) {
		form, ok := idempotency.CanonicalJSON(data)
		again, ok2 := idempotency.CanonicalJSON(data)
		if ok != ok2 || !bytes.Equal(form, again) {
			t.Fatalf("not deterministic for %q", data)
		}
		if err := strictjson.Decode(data, new(json.RawMessage), strictjson.Options{}); ok != (err == nil) {
			t.Fatalf("canonical form ok=%v for %q, which the strict decoder answers %v", ok, data, err)
		}
		if !ok {
			if json.Valid(data) && utf8.Valid(data) && !loneSurrogate.Match(data) && !hasDuplicateMember(data) {
				t.Fatalf("refused strict JSON %q", data)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("accepted %q, which encoding/json cannot decode: %v", data, err)
		}
		re, err := json.MarshalIndent(v, "", "\t")
		if err != nil {
			t.Fatalf("re-encode %q: %v", data, err)
		}
		reForm, ok := idempotency.CanonicalJSON(re)
		if !ok || !bytes.Equal(form, reForm) {
			t.Fatalf("%q re-serialized as %q: canonical forms differ (ok=%v)", data, re, ok)
		}
	})
}

// hasDuplicateMember reports whether some object in data (valid JSON) names a member twice, after
// unescaping, as a strict decoder sees it.
func hasDuplicateMember(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type level struct {
		names  map[string]bool
		object bool
		key    bool // the next string token of an object is a member name
	}
	var stack []level
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{':
				if top != nil && top.object {
					top.key = true
				}
				stack = append(stack, level{names: map[string]bool{}, object: true, key: true})
			case '[':
				if top != nil && top.object {
					top.key = true
				}
				stack = append(stack, level{})
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.object && top.key {
				if top.names[tok] {
					return true
				}
				top.names[tok] = true
				top.key = false
				continue
			}
			if top != nil && top.object {
				top.key = true
			}
		default:
			if top != nil && top.object {
				top.key = true
			}
		}
	}
}
