package e2e

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/webhook"
)

// newKey returns a fresh Idempotency-Key.
func newKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "e2e-" + hex.EncodeToString(b[:])
}

const orderBody = `{"account":"acc_1","side":"buy"}`

// createOrder creates an order and returns its body.
func createOrder(t *testing.T, baseURL, apiKey, body string) map[string]any {
	t.Helper()
	return request{Method: "POST", URL: baseURL + "/v1/orders", Auth: bearer(apiKey), Key: newKey(), Body: body}.
		do(t).expectJSON(t, http.StatusCreated)
}

// issueCredentials starts a new evaluation through the admin route and returns its API key.
func issueCredentials(t *testing.T, srv *orderServer) string {
	t.Helper()
	c := request{Method: "POST", URL: srv.URL + "/v1/sandbox/credentials", Auth: bearer(srv.AdminToken), Key: newKey()}.
		do(t).expectJSON(t, http.StatusCreated)
	key, _ := c["api_key"].(string)
	require.True(t, strings.HasPrefix(key, "sk_sandbox_"), "%v", c)
	return key
}

// registerEndpoint registers a webhook endpoint and returns its ID and secret.
func registerEndpoint(t *testing.T, baseURL, apiKey, url string) (id, secret string) {
	t.Helper()
	ep := request{Method: "POST", URL: baseURL + "/v1/webhook_endpoints", Auth: bearer(apiKey), Key: newKey(),
		Body: fmt.Sprintf(`{"url":%q}`, url)}.do(t).expectJSON(t, http.StatusCreated)
	return ep["id"].(string), ep["secret"].(string)
}

// unreachable is a webhook URL nothing listens on: deliveries fail and are retried, which does not
// matter to tests that read events by range.
const unreachable = "http://127.0.0.1:9/webhooks"

func TestContract(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	sk := bearer(srv.SandboxKey)
	url := func(path string) string { return srv.URL + path }

	t.Run("POST /v1/orders creates an order", func(t *testing.T) {
		before := time.Now().Unix()
		r := request{Method: "POST", URL: url("/v1/orders"), Auth: sk, Key: newKey(), Body: `{"account":"acc-7_X","side":"sell"}`}.do(t)
		o := r.expectJSON(t, http.StatusCreated)
		id, _ := o["id"].(string)
		require.True(t, strings.HasPrefix(id, "ord_"), "id %q", id)
		require.Equal(t, map[string]any{"id": id, "object": "order", "account": "acc-7_X", "side": "sell",
			"status": "created", "created": o["created"]}, o)
		created := int64(o["created"].(float64))
		require.GreaterOrEqual(t, created, before)
		require.LessOrEqual(t, created, time.Now().Unix())
		require.Equal(t, "/v1/orders/"+id, r.Header.Get("Location"))
		require.Equal(t, "v1", r.Header.Get("X-SVC-Version"))
		require.Empty(t, r.Header.Get("Idempotent-Replayed"))
	})

	t.Run("authentication", func(t *testing.T) {
		unknown, err := apikey.New(apikey.Sandbox)
		require.NoError(t, err)
		cases := []struct {
			name, auth, code string
		}{
			{"no Authorization", "", apikey.CodeMissing},
			{"not Bearer", "Basic " + srv.SandboxKey, apikey.CodeSchemeUnsupported},
			{"malformed key", "Bearer sk_sandbox_nope", apikey.CodeMalformed},
			{"checksum broken", "Bearer " + srv.SandboxKey[:len(srv.SandboxKey)-1] + flip(srv.SandboxKey[len(srv.SandboxKey)-1]), apikey.CodeMalformed},
			{"unknown key", bearer(unknown.Reveal()), apikey.CodeInvalid},
			{"admin token is not an API key", bearer(srv.AdminToken), apikey.CodeMalformed},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				for _, rq := range []request{
					{Method: "POST", URL: url("/v1/orders"), Auth: tc.auth, Key: newKey(), Body: orderBody},
					{Method: "GET", URL: url("/v1/orders/ord_x"), Auth: tc.auth},
					{Method: "GET", URL: url("/v1/webhook_endpoints"), Auth: tc.auth},
				} {
					r := rq.do(t)
					p := r.expectProblem(t, http.StatusUnauthorized, tc.code)
					require.True(t, strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer"))
					require.True(t, locates(p, "header", "Authorization"), "%s", r.Body)
					if tc.auth != "" {
						token := strings.TrimPrefix(strings.TrimPrefix(tc.auth, "Bearer "), "Basic ")
						require.NotContains(t, string(r.Body), token, "a problem must never echo a credential")
					}
				}
			})
		}
	})

	t.Run("every POST requires a well-formed Idempotency-Key", func(t *testing.T) {
		posts := []request{
			{Method: "POST", URL: url("/v1/orders"), Auth: sk, Body: orderBody},
			{Method: "POST", URL: url("/v1/webhook_endpoints"), Auth: sk, Body: `{"url":"` + unreachable + `"}`},
			{Method: "POST", URL: url("/v1/sandbox/credentials"), Auth: bearer(srv.AdminToken)},
			{Method: "POST", URL: url("/v1/sandbox/webhook_endpoints/we_x/faults"), Auth: sk, Body: `{"drop":0.5}`},
		}
		for _, rq := range posts {
			t.Run(rq.URL[len(srv.URL):], func(t *testing.T) {
				p := rq.do(t).expectProblem(t, http.StatusBadRequest, "idempotency_key_missing")
				require.True(t, locates(p, "header", "Idempotency-Key"))
				for _, bad := range []string{"has space", strings.Repeat("k", 256), "ключ"} {
					rq.Key = bad
					p := rq.do(t).expectProblem(t, http.StatusBadRequest, "idempotency_key_invalid")
					require.True(t, locates(p, "header", "Idempotency-Key"))
				}
			})
		}
	})

	t.Run("validation names every failing field", func(t *testing.T) {
		cases := []struct {
			name, body, code string
			pointers         []string
		}{
			{"empty object", `{}`, "validation_failed", []string{"/account", "/side"}},
			{"account missing", `{"side":"buy"}`, "field_missing", []string{"/account"}},
			{"account null", `{"account":null,"side":"buy"}`, "field_missing", []string{"/account"}},
			{"account empty", `{"account":"","side":"buy"}`, "invalid_length", []string{"/account"}},
			{"account too long", `{"account":"` + strings.Repeat("a", 65) + `","side":"buy"}`, "invalid_length", []string{"/account"}},
			{"account with a space", `{"account":"acc 1","side":"buy"}`, "invalid_format", []string{"/account"}},
			{"account not a string", `{"account":5,"side":"buy"}`, "wrong_type", []string{"/account"}},
			{"side unknown", `{"account":"acc_1","side":"hold"}`, "invalid_enum", []string{"/side"}},
			{"side missing", `{"account":"acc_1"}`, "field_missing", []string{"/side"}},
			{"both wrong", `{"account":"a/b","side":"BUY"}`, "validation_failed", []string{"/account", "/side"}},
			{"unknown member", `{"account":"acc_1","side":"buy","qty":3}`, "unknown_field", []string{"/qty"}},
			{"not an object", `["acc_1","buy"]`, "wrong_type", []string{""}},
			{"malformed JSON", `{"account":"acc_1",`, "malformed_json", []string{""}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := request{Method: "POST", URL: url("/v1/orders"), Auth: sk, Key: newKey(), Body: tc.body}.do(t)
				p := r.expectProblem(t, http.StatusBadRequest, tc.code)
				for _, ptr := range tc.pointers {
					require.True(t, locates(p, "body", ptr), "expected a violation at %q: %s", ptr, r.Body)
				}
			})
		}
		t.Run("no body", func(t *testing.T) {
			request{Method: "POST", URL: url("/v1/orders"), Auth: sk, Key: newKey()}.do(t).
				expectProblem(t, http.StatusBadRequest, "body_missing")
		})
	})

	t.Run("a repeated key replays the original response", func(t *testing.T) {
		key := newKey()
		rq := request{Method: "POST", URL: url("/v1/orders"), Auth: sk, Key: key, Body: orderBody}
		first := rq.do(t)
		o := first.expectJSON(t, http.StatusCreated)
		for range 3 {
			again := rq.do(t)
			require.Equal(t, http.StatusCreated, again.Status)
			require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
			require.Equal(t, string(first.Body), string(again.Body), "the replay is the original body, byte for byte")
			require.Equal(t, first.Header.Get("Location"), again.Header.Get("Location"))
		}

		t.Run("with another body it is refused", func(t *testing.T) {
			other := rq
			other.Body = `{"account":"acc_1","side":"sell"}`
			p := other.do(t).expectProblem(t, http.StatusUnprocessableEntity, "idempotency_key_reused")
			require.True(t, locates(p, "header", "Idempotency-Key"))
			// The refusal changed nothing: the key still replays the first order.
			require.Equal(t, o["id"], rq.do(t).object(t)["id"])
		})
		t.Run("another licensee's same key is another request", func(t *testing.T) {
			other := rq
			other.Auth = bearer(issueCredentials(t, srv))
			o2 := other.do(t).expectJSON(t, http.StatusCreated)
			require.NotEqual(t, o["id"], o2["id"], "keys are scoped per credential: no cross-licensee replay")
		})
	})

	t.Run("concurrent duplicates run once", func(t *testing.T) {
		const n = 16
		rq := request{Method: "POST", URL: url("/v1/orders"), Auth: sk, Key: newKey(), Body: orderBody}
		responses := make([]response, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-gate
				responses[i], errs[i] = rq.send()
			})
		}
		close(gate)
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		originals, ids := 0, map[any]bool{}
		for _, r := range responses {
			switch r.Status {
			case http.StatusCreated:
				if r.Header.Get("Idempotent-Replayed") != "true" {
					originals++
				}
				ids[r.object(t)["id"]] = true
			case http.StatusConflict:
				r.expectProblem(t, http.StatusConflict, "idempotency_key_in_use")
				require.NotEmpty(t, r.Header.Get("Retry-After"))
			default:
				t.Fatalf("unexpected answer %d: %s", r.Status, r.Body)
			}
		}
		require.Equal(t, 1, originals, "exactly one request ran the handler")
		require.LessOrEqual(t, len(ids), 1, "every 201 carries the same order")
		final := rq.do(t)
		require.Equal(t, "true", final.Header.Get("Idempotent-Replayed"))
		for id := range ids {
			require.Equal(t, id, final.object(t)["id"])
		}
	})

	t.Run("GET /v1/orders/{id}", func(t *testing.T) {
		o := createOrder(t, srv.URL, srv.SandboxKey, orderBody)
		id := o["id"].(string)
		got := request{Method: "GET", URL: url("/v1/orders/" + id), Auth: sk}.do(t).expectJSON(t, http.StatusOK)
		require.Equal(t, o, got)

		notFound := func(t *testing.T, auth, id string) {
			p := request{Method: "GET", URL: url("/v1/orders/" + id), Auth: auth}.do(t).
				expectProblem(t, http.StatusNotFound, "order_not_found")
			require.True(t, locates(p, "path", "id"))
		}
		t.Run("unknown id", func(t *testing.T) { notFound(t, sk, "ord_doesnotexist") })
		t.Run("another licensee's id", func(t *testing.T) { notFound(t, bearer(issueCredentials(t, srv)), id) })
		t.Run("a production key", func(t *testing.T) { notFound(t, bearer(srv.LiveKey), id) })
	})

	t.Run("POST /v1/webhook_endpoints", func(t *testing.T) {
		ep := request{Method: "POST", URL: url("/v1/webhook_endpoints"), Auth: sk, Key: newKey(),
			Body: `{"url":"https://consumer.example/hooks"}`}.do(t).expectJSON(t, http.StatusCreated)
		require.True(t, strings.HasPrefix(ep["id"].(string), "we_"))
		require.True(t, strings.HasPrefix(ep["secret"].(string), "whsec_"))
		require.Equal(t, "https://consumer.example/hooks", ep["url"])
		require.Equal(t, "v1", ep["api_version"])
		for _, tc := range []struct{ body, code string }{
			{`{}`, "field_missing"},
			{`{"url":"ftp://consumer.example/hooks"}`, "scheme_not_allowed"},
			{`{"url":"/relative"}`, "url_not_absolute"},
			{`{"url":"https://user:pw@consumer.example/"}`, "url_has_userinfo"},
			{`{"url":"https://consumer.example/hooks#x"}`, "url_has_fragment"},
			{`{"url":"http://169.254.169.254/latest/meta-data/"}`, "host_blocked"}, // the allow-list opens loopback only
			{`{"url":"http://metadata.google.internal/"}`, "host_blocked"},
			{`{"url":42}`, "wrong_type"},
		} {
			p := request{Method: "POST", URL: url("/v1/webhook_endpoints"), Auth: sk, Key: newKey(), Body: tc.body}.do(t).
				expectProblem(t, http.StatusBadRequest, tc.code)
			require.True(t, locates(p, "body", "/url"), "%s", tc.body)
		}
	})

	t.Run("range retrieval is signed and verifiable", func(t *testing.T) {
		key := issueCredentials(t, srv) // a fresh evaluation: its endpoint sees only these orders
		id, secret := registerEndpoint(t, srv.URL, key, unreachable)
		var orders []map[string]any
		for i := range 3 {
			orders = append(orders, createOrder(t, srv.URL, key, fmt.Sprintf(`{"account":"acc_%d","side":"buy"}`, i)))
		}
		events := func(query string) response {
			return request{Method: "GET", URL: url("/v1/webhook_endpoints/" + id + "/events" + query), Auth: bearer(key)}.do(t)
		}
		r := events("?from=1&to=3")
		list := r.expectJSON(t, http.StatusOK)
		require.Equal(t, "list", list["object"])
		require.Equal(t, false, list["has_more"])
		verifySignature(t, r.Header.Get("X-SVC-Signature"), r.Body, secret)
		v, err := webhook.NewVerifier([]string{secret}, nil)
		require.NoError(t, err)
		require.NoError(t, v.Verify(r.Header.Get("X-SVC-Signature"), r.Body), "the library's verifier agrees")

		var body webhook.EventList
		require.NoError(t, json.Unmarshal(r.Body, &body))
		require.Len(t, body.Data, 3)
		for i, ev := range body.Data {
			require.Equal(t, uint64(i+1), ev.Sequence)
			require.Equal(t, "order.created", ev.Type)
			require.Equal(t, "v1", ev.APIVersion)
			require.True(t, strings.HasPrefix(ev.ID, "evt_"))
			var data map[string]any
			require.NoError(t, json.Unmarshal(ev.Data, &data))
			require.Equal(t, orders[i], data, "the event's data is the order")
		}

		page := events("?from=1&limit=2").expectJSON(t, http.StatusOK)
		require.Len(t, page["data"], 2)
		require.Equal(t, true, page["has_more"])
		rest := events("?from=3").expectJSON(t, http.StatusOK)
		require.Len(t, rest["data"], 1)
		require.Equal(t, false, rest["has_more"])
		past := events("?from=4").expectJSON(t, http.StatusOK)
		require.Empty(t, past["data"])

		for _, tc := range []struct{ query, code, param string }{
			{"", "query_missing", "from"},
			{"?from=0", "out_of_range", "from"},
			{"?from=abc", "not_an_integer", "from"},
			{"?from=3&to=2", "range_inverted", "to"},
			{"?from=1&limit=1001", "out_of_range", "limit"},
			{"?from=1&limit=0", "out_of_range", "limit"},
		} {
			p := events(tc.query).expectProblem(t, http.StatusBadRequest, tc.code)
			require.True(t, locates(p, "query", tc.param), "%s: %v", tc.query, p)
		}
		for name, auth := range map[string]string{"another licensee": sk, "a production key": bearer(srv.LiveKey)} {
			t.Run(name, func(t *testing.T) {
				request{Method: "GET", URL: url("/v1/webhook_endpoints/" + id + "/events?from=1"), Auth: auth}.do(t).
					expectProblem(t, http.StatusNotFound, "webhook_endpoint_not_found")
			})
		}
		request{Method: "GET", URL: url("/v1/webhook_endpoints/we_unknown/events?from=1"), Auth: bearer(key)}.do(t).
			expectProblem(t, http.StatusNotFound, "webhook_endpoint_not_found")
	})

	t.Run("POST /v1/sandbox/credentials", func(t *testing.T) {
		rq := request{Method: "POST", URL: url("/v1/sandbox/credentials"), Auth: bearer(srv.AdminToken), Key: newKey()}
		r := rq.do(t)
		c := r.expectJSON(t, http.StatusCreated)
		require.True(t, strings.HasPrefix(c["api_key"].(string), "sk_sandbox_"))
		require.Equal(t, "sandbox", c["environment"])
		require.Greater(t, int64(c["expires_at"].(float64)), time.Now().Unix())
		require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
		// Without a seal key ring the key is never stored: a retried issuance learns that it happened,
		// not the key (TestSealedReplicas shows the replay with a ring).
		again := rq.do(t)
		require.Equal(t, http.StatusCreated, again.Status)
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		require.Equal(t, "true", again.Header.Get("Idempotent-Body-Omitted"))
		require.Equal(t, "no-store", again.Header.Get("Cache-Control"))
		require.Empty(t, again.Body)
		// The new key works, for a licensee of its own.
		createOrder(t, srv.URL, c["api_key"].(string), orderBody)

		// Whoever is not the operator gets exactly what a route that does not exist gets with the same
		// credentials: the same status, code, detail and challenge; nothing reveals the route.
		for _, tc := range []struct{ name, auth string }{
			{"no token", ""},
			{"wrong token", bearer("adm_wrong")},
			{"the admin token with another scheme", "Basic " + srv.AdminToken},
			{"a sandbox API key", sk},
			{"a live API key", bearer(srv.LiveKey)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := request{Method: "POST", URL: url("/v1/sandbox/credentials"), Auth: tc.auth, Key: newKey()}.do(t)
				unknown := request{Method: "POST", URL: url("/v1/sandbox/no_such_control"), Auth: tc.auth, Key: newKey()}.do(t)
				require.NotEqual(t, http.StatusCreated, r.Status)
				require.Equal(t, unknown.Status, r.Status, "body: %s", r.Body)
				require.Equal(t, unknown.Header.Get("WWW-Authenticate"), r.Header.Get("WWW-Authenticate"))
				p, q := r.object(t), unknown.object(t)
				delete(p, "request_id")
				delete(q, "request_id")
				require.Equal(t, q, p)
				require.NotContains(t, string(r.Body), srv.AdminToken)
				require.NotContains(t, string(r.Body), "admin")
			})
		}
		t.Run("members are refused", func(t *testing.T) {
			p := request{Method: "POST", URL: url("/v1/sandbox/credentials"), Auth: bearer(srv.AdminToken), Key: newKey(),
				Body: `{"licensee":"me"}`}.do(t).expectProblem(t, http.StatusBadRequest, "unknown_field")
			require.True(t, locates(p, "body", "/licensee"))
		})
	})

	t.Run("sandbox controls", func(t *testing.T) {
		key := issueCredentials(t, srv)
		id, _ := registerEndpoint(t, srv.URL, key, unreachable)
		faults := func(auth, endpoint, body string) response {
			return request{Method: "POST", URL: url("/v1/sandbox/webhook_endpoints/" + endpoint + "/faults"), Auth: auth,
				Key: newKey(), Body: body}.do(t)
		}
		set := faults(bearer(key), id, `{"drop":0.2,"duplicate":0.1,"reorder":0.1,"bad_signature":0.05,"delay_ms":0}`).
			expectJSON(t, http.StatusOK)
		require.Equal(t, "webhook_faults", set["object"])
		require.Equal(t, id, set["endpoint"])
		require.Equal(t, 0.2, set["drop"])

		unknownRoute := request{Method: "POST", URL: url("/v1/no_such_route"), Auth: bearer(srv.LiveKey), Key: newKey(), Body: `{}`}.do(t)
		unknownRoute.expectProblem(t, http.StatusNotFound, "route_not_found")
		t.Run("a production key cannot reach or detect them", func(t *testing.T) {
			for _, rq := range []request{
				{Method: "POST", URL: url("/v1/sandbox/webhook_endpoints/" + id + "/faults"), Body: `{"drop":0.5}`},
				{Method: "POST", URL: url("/v1/sandbox/webhook_endpoints/" + id + "/faults")}, // no body, no key either
				{Method: "POST", URL: url("/v1/sandbox/reset"), Key: newKey()},
				{Method: "POST", URL: url("/v1/sandbox/events"), Key: newKey(), Body: `{}`},
			} {
				rq.Auth = bearer(srv.LiveKey)
				r := rq.do(t)
				r.expectProblem(t, http.StatusNotFound, "route_not_found")
				var a, b map[string]any
				require.NoError(t, json.Unmarshal(r.Body, &a))
				require.NoError(t, json.Unmarshal(unknownRoute.Body, &b))
				delete(a, "request_id")
				delete(b, "request_id")
				require.Equal(t, b, a, "identical to an unknown route")
			}
		})
		t.Run("bad rates are located", func(t *testing.T) {
			p := faults(bearer(key), id, `{"drop":2,"bad_signature":-1}`).expectProblem(t, http.StatusBadRequest, "validation_failed")
			require.True(t, locates(p, "body", "/drop"))
			require.True(t, locates(p, "body", "/bad_signature"))
		})
		t.Run("another licensee's endpoint", func(t *testing.T) {
			p := faults(sk, id, `{"drop":0.5}`).expectProblem(t, http.StatusNotFound, "webhook_endpoint_not_found")
			require.True(t, locates(p, "path", "id"))
			faults(bearer(key), "we_unknown", `{"drop":0.5}`).expectProblem(t, http.StatusNotFound, "webhook_endpoint_not_found")
		})
		t.Run("reset deletes the evaluation's orders only", func(t *testing.T) {
			mine := createOrder(t, srv.URL, key, orderBody)["id"].(string)
			theirs := createOrder(t, srv.URL, srv.SandboxKey, orderBody)["id"].(string)
			r := request{Method: "POST", URL: url("/v1/sandbox/reset"), Auth: bearer(key), Key: newKey()}.do(t)
			require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Body)
			request{Method: "GET", URL: url("/v1/orders/" + mine), Auth: bearer(key)}.do(t).
				expectProblem(t, http.StatusNotFound, "order_not_found")
			request{Method: "GET", URL: url("/v1/orders/" + theirs), Auth: sk}.do(t).expectJSON(t, http.StatusOK)
		})
	})

	t.Run("routes and versions", func(t *testing.T) {
		request{Method: "GET", URL: url("/v1/nothing_here"), Auth: sk}.do(t).expectProblem(t, http.StatusNotFound, "route_not_found")
		r := request{Method: "GET", URL: url("/v1/orders"), Auth: sk}.do(t)
		r.expectProblem(t, http.StatusMethodNotAllowed, "method_not_allowed")
		require.Equal(t, "POST", r.Header.Get("Allow"))
		p := request{Method: "GET", URL: url("/v3/orders/ord_x"), Auth: sk}.do(t).expectProblem(t, http.StatusNotFound, "version_unknown")
		require.True(t, locates(p, "path", "version"))
		request{Method: "POST", URL: url("/v0/orders"), Auth: sk, Key: newKey(), Body: orderBody}.do(t).
			expectProblem(t, http.StatusNotFound, "version_unknown")
	})
}

// verifySignature checks X-SVC-Signature by hand, as a consumer in any language would: HMAC-SHA256,
// keyed with the secret string as issued, over "<t>.<raw body>", compared in constant time.
func verifySignature(t *testing.T, header string, body []byte, secret string) {
	t.Helper()
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	require.NotEmpty(t, ts, "header %q", header)
	require.NotEmpty(t, sigs, "header %q", header)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	ok := false
	for _, s := range sigs {
		got, err := hex.DecodeString(s)
		ok = ok || (err == nil && hmac.Equal(got, want))
	}
	require.True(t, ok, "no v1 in %q matches the body", header)
}

func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}
