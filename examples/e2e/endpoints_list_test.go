package e2e

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/internal/testenv"
)

// TestListWebhookEndpoints: GET /v1/webhook_endpoints lists the caller's endpoints, oldest first and
// without their secrets, on memory and on PostgreSQL (whose endpoint IDs are random, so only a
// column of its own keeps the order); another licensee and a production key see none of them, and an
// empty list is "data":[], never null.
func TestListWebhookEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  func(t *testing.T) []string
	}{
		{"memory", func(*testing.T) []string { return nil }},
		{"postgres", func(t *testing.T) []string { return []string{postgresEnv(testenv.PostgresDSN(t))} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startOrderServerEnv(t, "orderserver-"+tc.name, append([]string{loopbackAllow}, tc.env(t)...))
			testListWebhookEndpoints(t, srv)
		})
	}
}

func testListWebhookEndpoints(t *testing.T, srv *orderServer) {
	list := func(t *testing.T, key, version string) []map[string]any {
		t.Helper()
		r := request{Method: "GET", URL: srv.URL + "/" + version + "/webhook_endpoints", Auth: bearer(key)}.do(t)
		l := r.expectJSON(t, http.StatusOK)
		require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
		require.Equal(t, "list", l["object"])
		require.Equal(t, false, l["has_more"])
		require.NotContains(t, string(r.Body), "whsec_", "a secret is shown once, at registration")
		data, ok := l["data"].([]any)
		require.True(t, ok, "data is a list, never null: %s", r.Body)
		if len(data) == 0 {
			require.Contains(t, string(r.Body), `"data":[]`)
		}
		eps := make([]map[string]any, len(data))
		for i, d := range data {
			eps[i] = d.(map[string]any)
			require.NotContains(t, eps[i], "secret")
		}
		return eps
	}
	ids := func(eps []map[string]any) []string {
		out := make([]string, len(eps))
		for i, ep := range eps {
			out[i] = ep["id"].(string)
		}
		return out
	}

	key := issueCredentials(t, srv) // a licensee with no endpoint yet
	require.Empty(t, list(t, key, "v1"))
	first, _ := registerEndpoint(t, srv.URL, key, "http://127.0.0.1:9/first")
	second, _ := registerEndpoint(t, srv.URL, key, "http://127.0.0.1:9/second")

	t.Run("oldest first, without secrets", func(t *testing.T) {
		eps := list(t, key, "v1")
		require.Len(t, eps, 2)
		for i, want := range []map[string]any{
			{"id": first, "object": "webhook_endpoint", "url": "http://127.0.0.1:9/first", "api_version": "v1", "status": "enabled"},
			{"id": second, "object": "webhook_endpoint", "url": "http://127.0.0.1:9/second", "api_version": "v1", "status": "enabled"},
		} {
			for k, v := range want {
				require.Equal(t, v, eps[i][k], "endpoint %d: %s", i, k)
			}
		}
		// A sandbox key may try v2: the same endpoints, still rendered at the version they were
		// registered at.
		require.Equal(t, eps, list(t, key, "v2"))
	})

	t.Run("another licensee sees an empty list", func(t *testing.T) {
		require.Empty(t, list(t, issueCredentials(t, srv), "v1"))
	})

	t.Run("a production key sees its own endpoints only", func(t *testing.T) {
		require.Empty(t, list(t, srv.LiveKey, "v1"))
		live, _ := registerEndpoint(t, srv.URL, srv.LiveKey, "https://consumer.example/live")
		require.Equal(t, []string{live}, ids(list(t, srv.LiveKey, "v1")))
		require.Equal(t, []string{first, second}, ids(list(t, key, "v1")))
	})

	t.Run("without a valid key, 401", func(t *testing.T) {
		for _, auth := range []string{"", "Bearer sk_sandbox_nope"} {
			r := request{Method: "GET", URL: srv.URL + "/v1/webhook_endpoints", Auth: auth}.do(t)
			r.expectProblem(t, http.StatusUnauthorized, r.object(t)["code"].(string))
			require.Equal(t, "v1", r.Header.Get("X-SVC-Version"))
		}
	})

	t.Run("other methods are 405 naming GET and POST", func(t *testing.T) {
		for _, m := range []string{"PUT", "PATCH", "DELETE"} {
			r := request{Method: m, URL: srv.URL + "/v1/webhook_endpoints", Auth: bearer(key), Key: newKey()}.do(t)
			r.expectProblem(t, http.StatusMethodNotAllowed, "method_not_allowed")
			require.Equal(t, "GET, POST", r.Header.Get("Allow"), m)
		}
	})
}
