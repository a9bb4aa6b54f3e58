package server

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
)

// apiKey is a key as the keys API answers it.
type apiKey struct {
	Object      string   `json:"object"`
	ID          string   `json:"id"`
	Environment string   `json:"environment"`
	Restricted  bool     `json:"restricted"`
	Permissions []string `json:"permissions"`
	Created     int64    `json:"created"`
	ExpiresAt   *int64   `json:"expires_at"`
	LastUsedAt  *int64   `json:"last_used_at"`
	Secret      string   `json:"secret"`
	Previous    *apiKey  `json:"previous_key"`
}

func decodeAPIKey(t *testing.T, w *httptest.ResponseRecorder) apiKey {
	t.Helper()
	var k apiKey
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &k), "%s", w.Body)
	require.Equal(t, "api_key", k.Object)
	return k
}

// createKey creates a key through the keys API with the key by, restricted to perms (nil: a key
// like by), and returns it with its secret.
func (ts *testServer) createKey(t *testing.T, by string, perms ...string) apiKey {
	t.Helper()
	body := `{}`
	if perms != nil {
		b, err := json.Marshal(map[string]any{"permissions": perms})
		require.NoError(t, err)
		body = string(b)
	}
	w := ts.do("POST", "/v1/api_keys", by, ts.nextKey(), body)
	require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
	k := decodeAPIKey(t, w)
	require.NotEmpty(t, k.Secret)
	return k
}

// expectDenied checks a 403 permission_denied located at the Authorization header that names the
// permission the route requires.
func expectDenied(t *testing.T, w *httptest.ResponseRecorder, permission string) {
	t.Helper()
	p := expectProblem(t, w, http.StatusForbidden, apikey.CodePermissionDenied)
	require.Len(t, p.Errors, 1, "%s", w.Body)
	require.Equal(t, apierror.LocationHeader, p.Errors[0].Location)
	require.Equal(t, apikey.HeaderAuthorization, p.Errors[0].Name)
	require.Contains(t, p.Detail, permission)
	require.Equal(t, permission, p.Extensions["required_permission"])
}

// TestRoutePermissions is the table of what each route requires; the OpenAPI documents show the
// same (TestOpenAPIPermissions), generated from the same declarations.
func TestRoutePermissions(t *testing.T) {
	ts := newTestServer(t)
	want := map[string]string{
		"POST /orders":                                          "orders:write",
		"GET /orders/{id}":                                      "orders:read",
		"POST /webhook_endpoints":                               "webhook_endpoints:write",
		"GET /webhook_endpoints":                                "webhook_endpoints:read",
		"GET /webhook_endpoints/{id}":                           "webhook_endpoints:read",
		"PATCH /webhook_endpoints/{id}":                         "webhook_endpoints:write",
		"DELETE /webhook_endpoints/{id}":                        "webhook_endpoints:write",
		"POST /webhook_endpoints/{id}/roll_secret":              "webhook_endpoints:write",
		"GET /event_types":                                      "webhook_endpoints:read",
		"GET /webhook_endpoints/{id}/stats":                     "webhook_endpoints:read",
		"GET /webhook_endpoints/{id}/events":                    "events:read",
		"GET /webhook_endpoints/{id}/deliveries":                "events:read",
		"POST /webhook_endpoints/{id}/events/{sequence}/resend": "events:write",
		"POST /webhook_endpoints/{id}/recover":                  "events:write",
		"GET /api_keys":                                         "api_keys:read",
		"GET /api_keys/{id}":                                    "api_keys:read",
		"POST /api_keys":                                        "api_keys:write",
		"DELETE /api_keys/{id}":                                 "api_keys:write",
		"POST /api_keys/{id}/roll":                              "api_keys:write",
		"GET /requests":                                         "requests:read",
		"GET /requests/{request_id}":                            "requests:read",
		"GET /version_pin":                                      "version_pin:read",
		"POST /version_pin":                                     "version_pin:write",
		"GET /changelog":                                        "", // any key
		"POST /sandbox/events":                                  "sandbox:write",
		"POST /sandbox/reset":                                   "sandbox:write",
		"POST /sandbox/webhook_endpoints/{id}/faults":           "sandbox:write",
		"PUT /sandbox/webhook_endpoints/{id}/faults":            "sandbox:write",
		"DELETE /sandbox/webhook_endpoints/{id}/faults":         "sandbox:write",
	}
	for route, perm := range want {
		method, path, _ := strings.Cut(route, " ")
		got, ok := ts.permissionOf(method, path)
		require.True(t, ok, route)
		require.Equal(t, perm, got, route)
	}
	// The routes that only refuse need none.
	for _, route := range []string{"GET /nothing", "GET /sandbox/events", "POST /sandbox/nothing"} {
		method, path, _ := strings.Cut(route, " ")
		_, ok := ts.permissionOf(method, path)
		require.False(t, ok, route)
	}
}

// TestCheckRules: a declaration that does not do what it says stops New.
func TestCheckRules(t *testing.T) {
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, tc := range []struct {
		name    string
		declare func(s *Server, api *http.ServeMux)
		want    string
	}{
		{"a permission outside the vocabulary", func(s *Server, api *http.ServeMux) {
			s.route(api, "invoices:write", "POST /invoices", h)
		}, `"POST /invoices" requires "invoices:write", which is not one of the API's permissions`},
		{"a pattern nothing registered", func(s *Server, api *http.ServeMux) {
			api.Handle("GET /things/{id}", h)
			s.declare("orders:read", "GET /thing/{id}")
		}, `"GET /thing/{id}" is declared, but a request for it goes to ""`},
		{"a pattern declared twice", func(s *Server, api *http.ServeMux) {
			s.route(api, "orders:read", "GET /orders/{id}", h)
			s.declare("orders:write", "GET /orders/{id}")
		}, `"GET /orders/{id}" is declared twice`},
		{"a declaration without a permission", func(s *Server, api *http.ServeMux) {
			api.Handle("GET /things", h)
			s.declare("", "GET /things")
		}, `declared without a permission`},
		{"a permission no route needs", func(*Server, *http.ServeMux) {}, `no route requires the permission "orders:read"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := http.NewServeMux()
			s := &Server{api: api, rules: map[string]routeRule{}}
			tc.declare(s, api)
			require.ErrorContains(t, s.checkRules(), tc.want)
		})
	}
}

// TestRestrictedKeys: a restricted key reaches the routes of its permissions (write includes read),
// and every other route answers 403 permission_denied, located at the Authorization header and naming
// the permission — for orders, webhook endpoints, events, keys and the sandbox controls alike. The
// refusal stores nothing: the same Idempotency-Key then works for a key that has the permission.
func TestRestrictedKeys(t *testing.T) {
	ts, live := newWebhookServer(t, WebhookOptions{SandboxGuard: loopbackGuard()}, nil)
	o := ts.do("POST", "/v1/orders", ts.key, ts.nextKey(), `{"account":"acc_1","side":"buy"}`)
	require.Equal(t, http.StatusCreated, o.Code, "%s", o.Body)
	var order Order
	require.NoError(t, json.Unmarshal(o.Body.Bytes(), &order))
	var ep WebhookEndpoint
	require.NoError(t, json.Unmarshal(ts.register(ts.key, "http://127.0.0.1:9/hooks").Body.Bytes(), &ep))

	reader := ts.createKey(t, ts.key, "orders:read")
	require.True(t, reader.Restricted)
	require.Equal(t, []string{"orders:read"}, reader.Permissions)
	writer := ts.createKey(t, ts.key, "orders:write", "webhook_endpoints:read")

	t.Run("inside its permissions", func(t *testing.T) {
		require.Equal(t, http.StatusOK, ts.do("GET", "/v1/orders/"+order.ID, reader.Secret, "", "").Code)
		require.Equal(t, http.StatusOK, ts.do("GET", "/v1/orders/"+order.ID, writer.Secret, "", "").Code, "write includes read")
		require.Equal(t, http.StatusCreated, ts.do("POST", "/v1/orders", writer.Secret, ts.nextKey(), `{"account":"acc_1","side":"buy"}`).Code)
		require.Equal(t, http.StatusOK, ts.do("GET", "/v1/webhook_endpoints/"+ep.ID, writer.Secret, "", "").Code)
		require.Equal(t, http.StatusOK, ts.do("GET", "/v1/event_types", writer.Secret, "", "").Code)
	})
	t.Run("outside them", func(t *testing.T) {
		for _, tc := range []struct{ method, path, body, permission string }{
			{"POST", "/v1/orders", `{"account":"acc_1","side":"buy"}`, "orders:write"},
			{"GET", "/v1/webhook_endpoints", "", "webhook_endpoints:read"},
			{"POST", "/v1/webhook_endpoints", `{"url":"http://127.0.0.1:9/hooks"}`, "webhook_endpoints:write"},
			{"PATCH", "/v1/webhook_endpoints/" + ep.ID, `{"description":"x"}`, "webhook_endpoints:write"},
			{"GET", "/v1/webhook_endpoints/" + ep.ID + "/events?from=1", "", "events:read"},
			{"POST", "/v1/webhook_endpoints/" + ep.ID + "/recover", `{"from":1,"to":1}`, "events:write"},
			{"GET", "/v1/api_keys", "", "api_keys:read"},
			{"POST", "/v1/api_keys", `{}`, "api_keys:write"},
			{"POST", "/v1/sandbox/events", `{}`, "sandbox:write"},
			{"DELETE", "/v1/sandbox/webhook_endpoints/" + ep.ID + "/faults", "", "sandbox:write"},
		} {
			t.Run(tc.method+" "+tc.path, func(t *testing.T) {
				expectDenied(t, ts.do(tc.method, tc.path, reader.Secret, ts.nextKey(), tc.body), tc.permission)
			})
		}
		// The webhook endpoint routes, for a key that may read them and not write them.
		expectDenied(t, ts.do("DELETE", "/v1/webhook_endpoints/"+ep.ID, writer.Secret, ts.nextKey(), ""), "webhook_endpoints:write")
	})
	t.Run("a refusal stores nothing", func(t *testing.T) {
		key := ts.nextKey()
		body := `{"account":"acc_1","side":"sell"}`
		expectDenied(t, ts.do("POST", "/v1/orders", reader.Secret, key, body), "orders:write")
		w := ts.do("POST", "/v1/orders", writer.Secret, key, body)
		require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
		require.Empty(t, w.Header().Get(idempotency.HeaderReplayed))
	})
	t.Run("what is no route is refused as such, not as a permission", func(t *testing.T) {
		expectProblem(t, ts.do("GET", "/v1/nothing", reader.Secret, "", ""), http.StatusNotFound, CodeRouteNotFound)
		for _, key := range []string{reader.Secret, ts.key, live} {
			expectProblem(t, ts.do("GET", "/v1/sandbox", key, "", ""), http.StatusNotFound, CodeRouteNotFound) // not a redirect
		}
		w := ts.do("PUT", "/v1/orders/"+order.ID, reader.Secret, ts.nextKey(), `{}`)
		expectProblem(t, w, http.StatusMethodNotAllowed, CodeMethodNotAllowed)
		require.Equal(t, "GET", w.Header().Get("Allow"))
		w = ts.do("GET", "/v1/sandbox/events", reader.Secret, "", "")
		expectProblem(t, w, http.StatusMethodNotAllowed, CodeMethodNotAllowed)
		require.Equal(t, "POST", w.Header().Get("Allow"))
	})
	t.Run("a production key is told nothing of the sandbox controls", func(t *testing.T) {
		liveReader := ts.createKey(t, live, "orders:read")
		full := ts.do("POST", "/v1/sandbox/events", live, ts.nextKey(), `{}`)
		restricted := ts.do("POST", "/v1/sandbox/events", liveReader.Secret, ts.nextKey(), `{}`)
		expectProblem(t, full, http.StatusNotFound, CodeRouteNotFound)
		expectProblem(t, restricted, http.StatusNotFound, CodeRouteNotFound)
	})
	t.Run("a sandbox key with the permission reaches them", func(t *testing.T) {
		tester := ts.createKey(t, ts.key, "sandbox:write")
		require.Equal(t, http.StatusCreated, ts.do("POST", "/v1/sandbox/events", tester.Secret, ts.nextKey(), `{}`).Code)
	})
}

// TestUndeclaredRouteAdmitsTheFullKeyOnly: a route registered without a declared permission is
// closed to restricted keys (default deny) and open to the full key.
func TestUndeclaredRouteAdmitsTheFullKeyOnly(t *testing.T) {
	ts := newTestServer(t)
	ts.api.HandleFunc("GET /undeclared", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	restricted := ts.createKey(t, ts.key, permissions...)
	require.Equal(t, http.StatusNoContent, ts.do("GET", "/v1/undeclared", ts.key, "", "").Code)
	p := expectProblem(t, ts.do("GET", "/v1/undeclared", restricted.Secret, "", ""), http.StatusForbidden, apikey.CodePermissionDenied)
	require.Equal(t, apierror.LocationHeader, p.Errors[0].Location)
	require.Equal(t, apikey.HeaderAuthorization, p.Errors[0].Name)
}

// TestKeysAPI drives the keys API through the server: create with an Idempotency-Key (the secret
// shown once, never stored for a replay), list and get without any secret, revoke, and the refusals.
func TestKeysAPI(t *testing.T) {
	ts := newTestServer(t)
	w := ts.do("POST", "/v1/api_keys", ts.key, "create-1", `{"permissions":["orders:write","events:read"]}`)
	require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
	created := decodeAPIKey(t, w)
	require.True(t, strings.HasPrefix(created.Secret, "sk_sandbox_"), created.Secret)
	require.Equal(t, "sandbox", created.Environment)
	require.Equal(t, []string{"events:read", "orders:write"}, created.Permissions, "sorted")
	require.Equal(t, "/v1/api_keys/"+created.ID, w.Header().Get("Location"), "the version is put back into the path")
	require.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	require.NotNil(t, created.ExpiresAt, "a sandbox key expires")

	t.Run("a replay does the work once, without the secret", func(t *testing.T) {
		r := ts.do("POST", "/v1/api_keys", ts.key, "create-1", `{"permissions":["orders:write","events:read"]}`)
		require.Equal(t, http.StatusCreated, r.Code)
		require.Equal(t, "true", r.Header().Get(idempotency.HeaderReplayed))
		require.Equal(t, "true", r.Header().Get(idempotency.HeaderBodyOmitted))
		require.Empty(t, r.Body.String())
		require.Equal(t, "/v1/api_keys/"+created.ID, r.Header().Get("Location"))
	})
	t.Run("list and get never show a secret", func(t *testing.T) {
		l := ts.do("GET", "/v1/api_keys", ts.key, "", "")
		require.Equal(t, http.StatusOK, l.Code)
		require.NotContains(t, l.Body.String(), "sk_")
		require.NotContains(t, l.Body.String(), `"secret"`)
		var list struct {
			Object string   `json:"object"`
			Data   []apiKey `json:"data"`
		}
		require.NoError(t, json.Unmarshal(l.Body.Bytes(), &list))
		require.Len(t, list.Data, 2, "the server's key and the new one, nothing else")
		require.Equal(t, "list", list.Object)
		byID := map[string]apiKey{list.Data[0].ID: list.Data[0], list.Data[1].ID: list.Data[1]}
		require.Contains(t, byID, created.ID)
		delete(byID, created.ID)
		for _, full := range byID {
			require.False(t, full.Restricted, "the server's key is the full key")
			require.Nil(t, full.Permissions)
		}

		g := ts.do("GET", "/v1/api_keys/"+created.ID, ts.key, "", "")
		require.Equal(t, http.StatusOK, g.Code)
		require.NotContains(t, g.Body.String(), "sk_")
		got := decodeAPIKey(t, g)
		require.Empty(t, got.Secret)
		require.Equal(t, created.Permissions, got.Permissions)
	})
	t.Run("refusals", func(t *testing.T) {
		p := expectProblem(t, ts.do("POST", "/v1/api_keys", ts.key, "", `{}`), http.StatusBadRequest, "idempotency_key_missing")
		require.Equal(t, apierror.LocationHeader, p.Errors[0].Location)
		p = expectProblem(t, ts.do("POST", "/v1/api_keys", ts.key, ts.nextKey(), `{"permissions":["orders:write","invoices:read"]}`),
			http.StatusBadRequest, apikey.CodeInvalidPermission)
		require.Equal(t, "/permissions/1", p.Errors[0].Pointer)
		require.Equal(t, apikey.CodeInvalidPermission, p.Errors[0].Code)
		expectProblem(t, ts.do("POST", "/v1/api_keys", ts.key, ts.nextKey(), `{"permissions":[]}`), http.StatusBadRequest, apikey.CodeInvalidPermission)
		// A restricted key hands out only what it has.
		manager := ts.createKey(t, ts.key, "api_keys:write", "orders:read")
		p = expectProblem(t, ts.do("POST", "/v1/api_keys", manager.Secret, ts.nextKey(), `{"permissions":["orders:write"]}`),
			http.StatusForbidden, apikey.CodePermissionDenied)
		require.Equal(t, "/permissions/0", p.Errors[0].Pointer)
		expectProblem(t, ts.do("DELETE", "/v1/api_keys/"+created.ID, manager.Secret, ts.nextKey(), ""), http.StatusForbidden, apikey.CodePermissionDenied)
	})
	t.Run("revoke ends the key at once", func(t *testing.T) {
		read := func() *httptest.ResponseRecorder {
			return ts.do("GET", "/v1/webhook_endpoints/we_x/events?from=1", created.Secret, "", "")
		}
		expectProblem(t, read(), http.StatusNotFound, "webhook_endpoint_not_found") // let in, and no such endpoint
		w := ts.do("DELETE", "/v1/api_keys/"+created.ID, ts.key, ts.nextKey(), "")
		require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
		revoked := decodeAPIKey(t, w)
		require.Equal(t, ts.now().Unix(), *revoked.ExpiresAt)
		expectProblem(t, read(), http.StatusUnauthorized, apikey.CodeInvalid)
		l := ts.do("GET", "/v1/api_keys", ts.key, "", "")
		require.NotContains(t, l.Body.String(), created.ID, "a revoked key is no longer listed")
	})
}

// TestKeysTenancy: another licensee's key, and the same licensee's key in the other environment, is
// the same 404 as an unknown ID on every route of the keys API, and no list shows it.
func TestKeysTenancy(t *testing.T) {
	ts, live := newWebhookServer(t, WebhookOptions{}, nil)
	other, err := ts.IssueCredentials(context.Background(), apikey.Sandbox) // another licensee
	require.NoError(t, err)
	mine := ts.createKey(t, ts.key, "orders:read")
	theirs := ts.createKey(t, other.APIKey, "orders:read")
	liveKey := ts.createKey(t, live, "orders:read")

	unknown := expectProblem(t, ts.do("GET", "/v1/api_keys/key_nobody", ts.key, "", ""), http.StatusNotFound, apikey.CodeKeyNotFound)
	require.Equal(t, apierror.LocationPath, unknown.Errors[0].Location)
	for _, id := range []string{theirs.ID, liveKey.ID, other.KeyID} {
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/v1/api_keys/" + id, ""},
			{"DELETE", "/v1/api_keys/" + id, ""},
			{"POST", "/v1/api_keys/" + id + "/roll", `{"expires_in":0}`},
		} {
			p := expectProblem(t, ts.do(r.method, r.path, ts.key, ts.nextKey(), r.body), http.StatusNotFound, apikey.CodeKeyNotFound)
			require.Equal(t, unknown.Detail, p.Detail)
			require.Equal(t, unknown.Errors, p.Errors)
		}
	}
	l := ts.do("GET", "/v1/api_keys", ts.key, "", "")
	for _, id := range []string{theirs.ID, liveKey.ID, other.KeyID} {
		require.NotContains(t, l.Body.String(), id)
	}
	require.Contains(t, l.Body.String(), mine.ID)
	require.Equal(t, http.StatusNotFound, ts.do("GET", "/v1/orders/ord_x", theirs.Secret, "", "").Code, "their key still works")
}

// TestKeyRoll: a roll issues a new key with the same permissions, its secret shown once, and ends the
// old one after expires_in — both work until then, and the old one not a second after — on the
// server's injected clock.
func TestKeyRoll(t *testing.T) {
	clock := newTestClock()
	ts, _ := newWebhookServer(t, WebhookOptions{}, clock)
	old := ts.createKey(t, ts.key, "orders:read", "api_keys:write")
	works := func(secret string) bool {
		w := ts.do("GET", "/v1/orders/ord_x", secret, "", "")
		require.Contains(t, []int{http.StatusNotFound, http.StatusUnauthorized}, w.Code, "%s", w.Body)
		return w.Code == http.StatusNotFound
	}

	w := ts.do("POST", "/v1/api_keys/"+old.ID+"/roll", ts.key, "roll-1", `{"expires_in":3600}`)
	require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
	next := decodeAPIKey(t, w)
	require.NotEqual(t, old.ID, next.ID)
	require.True(t, strings.HasPrefix(next.Secret, "sk_sandbox_"))
	require.Equal(t, old.Permissions, next.Permissions)
	require.Equal(t, "/v1/api_keys/"+next.ID, w.Header().Get("Location"))
	require.NotNil(t, next.Previous)
	require.Equal(t, old.ID, next.Previous.ID)
	require.Equal(t, clock.Now().Add(time.Hour).Unix(), *next.Previous.ExpiresAt)
	require.Empty(t, next.Previous.Secret)

	replay := ts.do("POST", "/v1/api_keys/"+old.ID+"/roll", ts.key, "roll-1", `{"expires_in":3600}`)
	require.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed), "a replay rolls nothing again")
	require.Equal(t, "/v1/api_keys/"+next.ID, replay.Header().Get("Location"))

	require.True(t, works(old.Secret))
	require.True(t, works(next.Secret))
	clock.Advance(time.Hour - time.Second)
	require.True(t, works(old.Secret), "until its end")
	clock.Advance(time.Second)
	require.False(t, works(old.Secret), "not after")
	require.True(t, works(next.Secret))

	t.Run("a key set to end is not rolled again", func(t *testing.T) {
		expectProblem(t, ts.do("POST", "/v1/api_keys/"+old.ID+"/roll", ts.key, ts.nextKey(), ""), http.StatusUnprocessableEntity, apikey.CodeKeyEnding)
	})
	t.Run("the default overlap is a day; 0 ends the old key at once", func(t *testing.T) {
		w := ts.do("POST", "/v1/api_keys/"+next.ID+"/roll", ts.key, ts.nextKey(), "")
		require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
		third := decodeAPIKey(t, w)
		require.Equal(t, clock.Now().Add(24*time.Hour).Unix(), *third.Previous.ExpiresAt)
		// A restricted key with api_keys:write rolls a key it covers, itself included.
		w = ts.do("POST", "/v1/api_keys/"+third.ID+"/roll", third.Secret, ts.nextKey(), `{"expires_in":0}`)
		require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
		fourth := decodeAPIKey(t, w)
		require.False(t, works(third.Secret), "ended at once")
		require.True(t, works(fourth.Secret))
	})
	t.Run("expires_in out of range", func(t *testing.T) {
		for _, body := range []string{`{"expires_in":-1}`, `{"expires_in":604801}`} {
			p := expectProblem(t, ts.do("POST", "/v1/api_keys/"+next.ID+"/roll", ts.key, ts.nextKey(), body), http.StatusBadRequest, apikey.CodeOutOfRange)
			require.Equal(t, "/expires_in", p.Errors[0].Pointer)
			require.Equal(t, apikey.CodeOutOfRange, p.Errors[0].Code)
		}
	})
}

// TestServeRecordsLastUse: Serve runs the Issuer's writer of last uses beside the dispatcher, and
// writes what it noted when it shuts down.
func TestServeRecordsLastUse(t *testing.T) {
	clock := newTestClock()
	ts, _ := newWebhookServer(t, WebhookOptions{}, clock)
	k := ts.createKey(t, ts.key, "orders:read")
	get := func() apiKey {
		w := ts.do("GET", "/v1/api_keys/"+k.ID, ts.key, "", "")
		require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
		return decodeAPIKey(t, w)
	}
	require.Nil(t, get().LastUsedAt, "never used")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ts.Serve(ctx, ln) }()
	req, err := http.NewRequest("GET", "http://"+ln.Addr().String()+"/v1/orders/ord_x", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+k.Secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	cancel()
	require.NoError(t, <-served)

	used := get().LastUsedAt
	require.NotNil(t, used, "written at shutdown")
	require.Equal(t, clock.Now().Unix(), *used)
}

// TestMutatingLocationKeepsTheVersion: the Location a library handler writes from the path it is
// served (without the version, which the router strips) gets the version back, for every version.
func TestMutatingLocationKeepsTheVersion(t *testing.T) {
	for _, v := range []string{"v1", "v2"} {
		ts := newTestServer(t) // a licensee of its own: pinned to the version of its first request
		w := ts.do("POST", "/"+v+"/webhook_endpoints", ts.key, ts.nextKey(), `{"url":"http://127.0.0.1:9/hooks"}`)
		require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
		var ep WebhookEndpoint
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &ep))
		require.Equal(t, "/"+v+"/webhook_endpoints/"+ep.ID, w.Header().Get("Location"))
	}
}
