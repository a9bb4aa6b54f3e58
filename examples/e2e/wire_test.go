package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

// rawResponse is what the server answered to one request written byte for byte, for the requests a
// net/http client refuses to send or would rewrite.
func rawRequest(t *testing.T, addr, head string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, head+"\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

// TestWireStrictness checks the running reference server the way a careful integrator or an auditor
// would on day one: every error it can intercept is a problem, nothing a client sends in the wrong
// place is reflected, challenges follow RFC 6750, bodies are strict JSON of a JSON media type.
func TestWireStrictness(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	sk := bearer(srv.SandboxKey)
	url := func(path string) string { return srv.URL + path }
	addr := strings.TrimPrefix(srv.URL, "http://")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	send := func(t *testing.T, method, path, contentType, body string, header http.Header) response {
		t.Helper()
		req, err := http.NewRequest(method, url(path), strings.NewReader(body))
		require.NoError(t, err)
		for k, vs := range header {
			req.Header[k] = vs
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NotEmpty(t, resp.Header.Get("X-Request-Id"), "%s %s", method, path)
		return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}
	withAuth := func(extra ...string) http.Header {
		h := http.Header{"Authorization": {sk}, "Idempotency-Key": {newKey()}}
		for i := 0; i+1 < len(extra); i += 2 {
			h.Set(extra[i], extra[i+1])
		}
		return h
	}

	t.Run("router answers are problems", func(t *testing.T) {
		send(t, "GET", "/v1/no_such_route", "", "", withAuth()).expectProblem(t, http.StatusNotFound, "route_not_found")
		r := send(t, "DELETE", "/v1/orders/ord_x", "", "", withAuth())
		r.expectProblem(t, http.StatusMethodNotAllowed, "method_not_allowed")
		require.Equal(t, "GET", r.Header.Get("Allow"))
		// ServeMux would redirect these with an HTML body; an empty ID must not land elsewhere.
		for _, p := range []string{"/v1//orders", "/v1/webhook_endpoints//events", "/v1/orders/./x", "/v1/orders/../orders"} {
			send(t, "GET", p, "", "", withAuth()).expectProblem(t, http.StatusNotFound, "route_not_found")
		}
		resp, body := rawRequest(t, addr, "CONNECT "+addr+" HTTP/1.1\r\nHost: "+addr)
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		require.NoError(t, apierror.Check(resp.StatusCode, resp.Header, body), "%s", body)
	})

	t.Run("a malformed query string is located, never dropped", func(t *testing.T) {
		id, _ := registerEndpoint(t, srv.URL, srv.SandboxKey, unreachable)
		for _, q := range []string{"from=1&to=%zz", "from=1&to=5%2", "from=1;to=5", "from=1&to=%ff"} {
			r := send(t, "GET", "/v1/webhook_endpoints/"+id+"/events?"+q, "", "", withAuth())
			p := r.expectProblem(t, http.StatusBadRequest, apierror.CodeQueryMalformed)
			require.True(t, locates(p, "query", "to") || locates(p, "query", "from"), "%s: %s", q, r.Body)
		}
	})

	t.Run("a malformed escape in the path is net/http's documented plain 400", func(t *testing.T) {
		// net/http refuses a request-target it cannot parse before any handler runs: one of the
		// exceptions listed in docs/decisions.md.
		resp, _ := rawRequest(t, addr, "GET /v1/orders/%zz HTTP/1.1\r\nHost: x")
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	})

	t.Run("X-Request-Id is the server's own, never the client's", func(t *testing.T) {
		for _, sent := range []string{srv.LiveKey, "trace-1234", "req_mine"} {
			h := withAuth()
			h.Set("X-Request-Id", sent)
			r := send(t, "GET", "/v1/orders/ord_missing", "", "", h)
			r.expectProblem(t, http.StatusNotFound, "order_not_found")
			got := r.Header.Get("X-Request-Id")
			require.True(t, strings.HasPrefix(got, "req_") && got != sent, got)
			require.NotContains(t, string(r.Body), sent)
		}
	})

	t.Run("no detail echoes a credential", func(t *testing.T) {
		for _, path := range []string{
			"/v1/orders/" + srv.LiveKey,
			"/v1/webhook_endpoints/" + srv.LiveKey + "/events?from=1",
			"/v1/webhook_endpoints/" + srv.LiveKey + "/deliveries",
			"/v1/sandbox/webhook_endpoints/" + srv.LiveKey + "/faults",
		} {
			r := send(t, "GET", path, "", "", withAuth())
			require.GreaterOrEqual(t, r.Status, 400, path)
			require.NoError(t, apierror.Check(r.Status, r.Header, r.Body), "%s: %s", path, r.Body)
			require.NotContains(t, string(r.Body), srv.LiveKey, path)
			require.NotContains(t, string(r.Body), strings.TrimPrefix(srv.LiveKey, "sk_live_"), path)
		}
	})

	t.Run("RFC 6750 challenges", func(t *testing.T) {
		for _, tc := range []struct{ name, auth, code, challenge string }{
			{"none", "", "api_key_missing", `Bearer realm="svcplatform"`},
			{"another scheme", "Basic dXNlcjpwYXNz", "auth_scheme_unsupported", `Bearer realm="svcplatform"`},
			{"malformed token", "Bearer not-a-key", "api_key_malformed", `Bearer realm="svcplatform", error="invalid_token"`},
			{"checksum fails", "Bearer " + srv.SandboxKey[:len(srv.SandboxKey)-1] + flip(srv.SandboxKey[len(srv.SandboxKey)-1]),
				"api_key_malformed", `Bearer realm="svcplatform", error="invalid_token"`},
			{"scheme only", "Bearer", "api_key_malformed", `Bearer realm="svcplatform", error="invalid_request"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := http.Header{}
				if tc.auth != "" {
					h.Set("Authorization", tc.auth)
				}
				r := send(t, "GET", "/v1/orders/ord_x", "", "", h)
				r.expectProblem(t, http.StatusUnauthorized, tc.code)
				require.Equal(t, tc.challenge, r.Header.Get("WWW-Authenticate"))
			})
		}
	})

	t.Run("bodies are JSON of a JSON media type", func(t *testing.T) {
		for _, ct := range []string{"text/plain", "application/xml", "application/x-www-form-urlencoded", "application/json; charset=latin1"} {
			r := send(t, "POST", "/v1/orders", ct, orderBody, withAuth())
			p := r.expectProblem(t, http.StatusUnsupportedMediaType, "unsupported_media_type")
			require.True(t, locates(p, "header", "Content-Type"), "%s", r.Body)
			require.Equal(t, "application/json", r.Header.Get("Accept-Post"))
		}
		r := send(t, "POST", "/v1/orders", "", orderBody, withAuth())
		r.expectProblem(t, http.StatusUnsupportedMediaType, "unsupported_media_type")
		send(t, "POST", "/v1/orders", "application/json; charset=UTF-8", orderBody, withAuth()).expectJSON(t, http.StatusCreated)
		send(t, "POST", "/v1/orders", "application/merge-patch+json", orderBody, withAuth()).expectJSON(t, http.StatusCreated)
	})

	t.Run("strict JSON", func(t *testing.T) {
		for _, tc := range []struct{ name, body, code, pointer string }{
			{"duplicate member", `{"account":"acc_1","side":"buy","side":"sell"}`, "duplicate_member", "/side"},
			{"member names differ in case", `{"ACCOUNT":"acc_1","Side":"buy"}`, "unknown_field", "/ACCOUNT"},
			{"invalid UTF-8", "{\"account\":\"acc_\xff\",\"side\":\"buy\"}", "invalid_utf8", "/account"},
			{"lone surrogate", `{"account":"acc_\ud800","side":"buy"}`, "invalid_utf8", "/account"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := send(t, "POST", "/v1/orders", "application/json", tc.body, withAuth())
				p := r.expectProblem(t, http.StatusBadRequest, tc.code)
				require.True(t, locates(p, "body", tc.pointer), "%s", r.Body)
			})
		}
		r := send(t, "POST", "/v1/webhook_endpoints", "application/json", "{\"url\":\"http://127.0.0.1:9/\xff\"}", withAuth())
		p := r.expectProblem(t, http.StatusBadRequest, "invalid_utf8")
		require.True(t, locates(p, "body", "/url"), "%s", r.Body)
	})
}
