package producer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions"
	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// endpointsAPI is an EndpointsHandler on a memory registry, mounted under /v1, whose licensee is the
// request's X-Licensee header.
type endpointsAPI struct {
	t   *testing.T
	clk *clock
	reg *memstore.Endpoints
	srv *httptest.Server
}

var testEventTypes = []producer.EventType{
	{Type: "order.created", Description: "An order was placed.", Schema: "#/components/schemas/Order"},
	{Type: "order.settled", Description: "An order settled."},
}

func newEndpointsAPI(t *testing.T, opts *producer.EndpointsHandlerOptions) *endpointsAPI {
	t.Helper()
	a := &endpointsAPI{t: t, clk: newClock(), reg: &memstore.Endpoints{}}
	o := producer.EndpointsHandlerOptions{EventTypes: testEventTypes, Now: a.clk.Now,
		APIVersion:  func(*http.Request) string { return "2026-01-01" },
		APIVersions: func() []string { return []string{"2025-06-01", "2026-01-01"} }}
	if opts != nil {
		o = *opts
		o.Now = a.clk.Now
	}
	h, err := producer.NewEndpointsHandler(a.reg, conventions.CallerFunc(func(r *http.Request) (string, error) {
		return r.Header.Get("X-Licensee"), nil
	}), &o)
	require.NoError(t, err)
	mux := http.NewServeMux()
	h.Register(mux, "v1", nil)
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

// do sends a request as licensee and decodes the JSON answer into a map.
func (a *endpointsAPI) do(licensee, method, path, body string) (int, map[string]any) {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.srv.URL+path, rd)
	require.NoError(a.t, err)
	req.Header.Set("X-Licensee", licensee)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	var out map[string]any
	require.NoError(a.t, json.Unmarshal(data, &out), string(data))
	if resp.StatusCode < 300 {
		require.Equal(a.t, "no-store", resp.Header.Get("Cache-Control"))
	} else {
		require.NoError(a.t, apierror.Check(resp.StatusCode, resp.Header, data))
	}
	return resp.StatusCode, out
}

func (a *endpointsAPI) create(licensee, body string) map[string]any {
	a.t.Helper()
	st, out := a.do(licensee, http.MethodPost, "/v1/webhook_endpoints", body)
	require.Equal(a.t, http.StatusCreated, st, out)
	return out
}

// violations returns the located errors of a problem as "pointer code" strings.
func violations(out map[string]any) []string {
	var vs []string
	errs, _ := out["errors"].([]any)
	for _, e := range errs {
		m := e.(map[string]any)
		vs = append(vs, fmt.Sprint(m["pointer"], " ", m["code"]))
	}
	return vs
}

func TestEndpointsAPICreateAndRead(t *testing.T) {
	a := newEndpointsAPI(t, nil)
	ep := a.create("lic_1", `{"url":"https://hooks.example/a","description":"EU desk","enabled_events":["order.created"],
		"metadata":{"team":"payments"},"headers":{"X-Tenant":"eu-1"}}`)
	id := ep["id"].(string)
	require.True(t, strings.HasPrefix(id, "we_"))
	require.True(t, strings.HasPrefix(ep["secret"].(string), "whsec_"), "the secret is shown once, at registration")
	require.Equal(t, map[string]any{"id": id, "object": "webhook_endpoint", "url": "https://hooks.example/a", "api_version": "2026-01-01",
		"description": "EU desk", "enabled_events": []any{"order.created"}, "metadata": map[string]any{"team": "payments"},
		"headers": map[string]any{"X-Tenant": "eu-1"}, "status": "enabled", "disabled_reason": nil, "disabled_at": nil,
		"created": float64(t0.Unix()), "previous_secret_expires_at": nil, "rate_limit": nil, "failing_since": nil, "secret": ep["secret"]}, ep)

	st, got := a.do("lic_1", http.MethodGet, "/v1/webhook_endpoints/"+id, "")
	require.Equal(t, http.StatusOK, st)
	delete(ep, "secret")
	require.Equal(t, ep, got, "GET shows the endpoint without its secret")

	// Defaults: every type, the licensee's version.
	a.clk.Advance(time.Second)
	ep2 := a.create("lic_1", `{"url":"https://hooks.example/b"}`)
	require.Equal(t, []any{"*"}, ep2["enabled_events"])
	require.Equal(t, "2026-01-01", ep2["api_version"])

	// Listed oldest first, without secrets; another licensee's list is its own.
	st, list := a.do("lic_1", http.MethodGet, "/v1/webhook_endpoints", "")
	require.Equal(t, http.StatusOK, st)
	data := list["data"].([]any)
	require.Len(t, data, 2)
	require.Equal(t, id, data[0].(map[string]any)["id"])
	require.Equal(t, ep2["id"], data[1].(map[string]any)["id"])
	for _, d := range data {
		require.NotContains(t, d, "secret")
	}
	require.Equal(t, false, list["has_more"])
	_, other := a.do("lic_2", http.MethodGet, "/v1/webhook_endpoints", "")
	require.Empty(t, other["data"])

	// Another licensee's endpoint is the 404 of one that does not exist.
	for _, path := range []string{"/v1/webhook_endpoints/" + id, "/v1/webhook_endpoints/we_nope"} {
		st, prob := a.do("lic_2", http.MethodGet, path, "")
		require.Equal(t, http.StatusNotFound, st)
		require.Equal(t, producer.CodeEndpointNotFound, prob["code"])
	}
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPatch, "/v1/webhook_endpoints/" + id, `{"description":"mine now"}`},
		{http.MethodDelete, "/v1/webhook_endpoints/" + id, ""},
		{http.MethodPost, "/v1/webhook_endpoints/" + id + "/roll_secret", ""},
	} {
		st, prob := a.do("lic_2", tc.method, tc.path, tc.body)
		require.Equal(t, http.StatusNotFound, st, tc.method)
		require.Equal(t, producer.CodeEndpointNotFound, prob["code"])
	}
	stored, err := a.reg.Lookup(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, "EU desk", stored.Description, "another licensee changed nothing")
	require.Len(t, stored.Secrets, 1)
	require.True(t, stored.DeletedAt.IsZero())
}

func TestEndpointsAPIRefusalsAreLocated(t *testing.T) {
	a := newEndpointsAPI(t, nil)
	for _, tc := range []struct {
		body string
		want []string
	}{
		{`{}`, []string{"/url field_missing"}},
		{`{"url":"http://hooks.example/"}`, []string{"/url " + ssrf.CodeSchemeNotAllowed}},
		{`{"url":"https://10.0.0.1/"}`, []string{"/url " + ssrf.CodeHostBlocked}},
		{`{"url":"https://hooks.example/","enabled_events":["order.created","order.exploded"]}`,
			[]string{"/enabled_events/1 " + producer.CodeUnknownEventType}},
		{`{"url":"https://hooks.example/","enabled_events":["*","order.created"]}`, []string{"/enabled_events/0 wildcard_not_alone"}},
		{`{"url":"https://hooks.example/","headers":{"Host":"evil.example","X-SVC-Sequence":"1"}}`,
			[]string{"/headers/Host header_not_allowed", "/headers/X-SVC-Sequence header_not_allowed"}},
		{`{"url":"https://hooks.example/","description":"` + strings.Repeat("d", 257) + `"}`, []string{"/description too_long"}},
		{`{"url":"https://hooks.example/","api_version":"2019-01-01"}`, []string{"/api_version " + producer.CodeUnsupportedVersion}},
		{`{"url":"https://hooks.example/","metadata":{"k":1}}`, []string{"/metadata wrong_type"}},
		{`{"url":"https://hooks.example/","secret":"whsec_mine"}`, []string{"/secret unknown_field"}},
	} {
		st, prob := a.do("lic_1", http.MethodPost, "/v1/webhook_endpoints", tc.body)
		require.Equal(t, http.StatusBadRequest, st, tc.body)
		got := violations(prob)
		for _, want := range tc.want {
			require.Contains(t, got, want, tc.body)
		}
	}
	_, list := a.do("lic_1", http.MethodGet, "/v1/webhook_endpoints", "")
	require.Empty(t, list["data"], "nothing refused was registered")
}

func TestEndpointsAPILimitCountsLiveEndpoints(t *testing.T) {
	a := newEndpointsAPI(t, &producer.EndpointsHandlerOptions{MaxEndpoints: 2})
	first := a.create("lic_1", `{"url":"https://hooks.example/1"}`)
	a.create("lic_1", `{"url":"https://hooks.example/2"}`)
	st, prob := a.do("lic_1", http.MethodPost, "/v1/webhook_endpoints", `{"url":"https://hooks.example/3"}`)
	require.Equal(t, http.StatusUnprocessableEntity, st)
	require.Equal(t, producer.CodeEndpointLimitReached, prob["code"])
	a.create("lic_2", `{"url":"https://hooks.example/1"}`)

	st, del := a.do("lic_1", http.MethodDelete, "/v1/webhook_endpoints/"+first["id"].(string), "")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, map[string]any{"id": first["id"], "object": "webhook_endpoint", "deleted": true}, del)
	a.create("lic_1", `{"url":"https://hooks.example/3"}`)

	// Deleted: gone from reads and writes, still in the registry for range retrieval.
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "", ""}, {http.MethodDelete, "", ""}, {http.MethodPatch, "", `{}`}, {http.MethodPost, "/roll_secret", ""},
	} {
		st, prob := a.do("lic_1", tc.method, "/v1/webhook_endpoints/"+first["id"].(string)+tc.path, tc.body)
		require.Equal(t, http.StatusNotFound, st, tc.method)
		require.Equal(t, producer.CodeEndpointNotFound, prob["code"])
	}
	ep, err := a.reg.Lookup(context.Background(), first["id"].(string))
	require.NoError(t, err)
	require.Equal(t, t0, ep.DeletedAt)
	_, list := a.do("lic_1", http.MethodGet, "/v1/webhook_endpoints", "")
	require.Len(t, list["data"], 2)
}

func TestEndpointsAPIPatch(t *testing.T) {
	a := newEndpointsAPI(t, nil)
	ep := a.create("lic_1", `{"url":"https://hooks.example/a","metadata":{"a":"1","b":"2"},"headers":{"X-A":"1"}}`)
	path := "/v1/webhook_endpoints/" + ep["id"].(string)

	a.clk.Advance(time.Minute)
	st, got := a.do("lic_1", http.MethodPatch, path, `{"url":"https://hooks.example/moved","description":"moved",
		"enabled_events":["order.settled"],"api_version":"2025-06-01","metadata":{"a":null,"c":"3"},"headers":null,"status":"disabled"}`)
	require.Equal(t, http.StatusOK, st, got)
	require.Equal(t, "https://hooks.example/moved", got["url"])
	require.Equal(t, "moved", got["description"])
	require.Equal(t, []any{"order.settled"}, got["enabled_events"])
	require.Equal(t, "2025-06-01", got["api_version"])
	require.Equal(t, map[string]any{"b": "2", "c": "3"}, got["metadata"], "merge patch: null removes a key, others are set")
	require.Equal(t, map[string]any{}, got["headers"], "headers: null removes them all")
	require.Equal(t, "disabled", got["status"])
	require.Equal(t, producer.DisabledManual, got["disabled_reason"])
	require.Equal(t, float64(t0.Add(time.Minute).Unix()), got["disabled_at"])
	require.NotContains(t, got, "secret")

	// Absent members stay; disabling again keeps the first time; enabling clears both.
	a.clk.Advance(time.Minute)
	_, got = a.do("lic_1", http.MethodPatch, path, `{"status":"disabled"}`)
	require.Equal(t, float64(t0.Add(time.Minute).Unix()), got["disabled_at"])
	require.Equal(t, "moved", got["description"])
	_, got = a.do("lic_1", http.MethodPatch, path, `{"status":"enabled","enabled_events":["*"]}`)
	require.Equal(t, "enabled", got["status"])
	require.Nil(t, got["disabled_reason"])
	require.Nil(t, got["disabled_at"])
	require.Equal(t, []any{"*"}, got["enabled_events"])
	stored, err := a.reg.Lookup(context.Background(), ep["id"].(string))
	require.NoError(t, err)
	require.Nil(t, stored.EnabledEvents, `["*"] is stored as every type`)

	// Header names are matched without regard to case: x-b replaces X-B, x-b: null removes it.
	_, got = a.do("lic_1", http.MethodPatch, path, `{"headers":{"X-B":"1"}}`)
	require.Equal(t, map[string]any{"X-B": "1"}, got["headers"])
	_, got = a.do("lic_1", http.MethodPatch, path, `{"headers":{"x-b":"2"}}`)
	require.Equal(t, map[string]any{"x-b": "2"}, got["headers"])
	_, got = a.do("lic_1", http.MethodPatch, path, `{"headers":{"X-b":null}}`)
	require.Equal(t, map[string]any{}, got["headers"])

	// Refusals are located and change nothing.
	for _, tc := range []struct{ body, want string }{
		{`{"status":"paused"}`, "/status " + producer.CodeInvalidSetting},
		{`{"url":"https://127.0.0.1/"}`, "/url " + ssrf.CodeHostBlocked},
		{`{"enabled_events":[]}`, "/enabled_events empty"},
		{`{"headers":{"Authorization":"Bearer x"}}`, "/headers/Authorization header_not_allowed"},
		{`{"metadata":{"` + strings.Repeat("k", 41) + `":"v"}}`, "/metadata/" + strings.Repeat("k", 41) + " too_long"},
		{`{"api_version":"v0"}`, "/api_version " + producer.CodeUnsupportedVersion},
		{`{"owner":"lic_2"}`, "/owner unknown_field"},
	} {
		st, prob := a.do("lic_1", http.MethodPatch, path, tc.body)
		require.Equal(t, http.StatusBadRequest, st, tc.body)
		require.Contains(t, violations(prob), tc.want, tc.body)
	}
	after, err := a.reg.Lookup(context.Background(), ep["id"].(string))
	require.NoError(t, err)
	require.Equal(t, "https://hooks.example/moved", after.URL)
	require.Equal(t, "2025-06-01", after.APIVersion)
	require.Empty(t, after.Headers)
}

func TestEndpointsAPIRollSecret(t *testing.T) {
	a := newEndpointsAPI(t, nil)
	ep := a.create("lic_1", `{"url":"https://hooks.example/a"}`)
	id, first := ep["id"].(string), ep["secret"].(string)
	path := "/v1/webhook_endpoints/" + id + "/roll_secret"

	st, rolled := a.do("lic_1", http.MethodPost, path, "")
	require.Equal(t, http.StatusOK, st, rolled)
	second := rolled["secret"].(string)
	require.NotEqual(t, first, second)
	require.Equal(t, float64(t0.Add(producer.DefaultRollExpiry).Unix()), rolled["previous_secret_expires_at"])
	stored, err := a.reg.Lookup(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, []string{second, first}, stored.Secrets)

	// Rolling again keeps only the newest old secret.
	st, rolled = a.do("lic_1", http.MethodPost, path, `{"expires_in":3600}`)
	require.Equal(t, http.StatusOK, st)
	third := rolled["secret"].(string)
	require.Equal(t, float64(t0.Add(time.Hour).Unix()), rolled["previous_secret_expires_at"])
	stored, err = a.reg.Lookup(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, []string{third, second}, stored.Secrets)

	// Past the expiry the object shows no previous secret; 0 ends the old one at once.
	a.clk.Advance(time.Hour)
	_, got := a.do("lic_1", http.MethodGet, "/v1/webhook_endpoints/"+id, "")
	require.Nil(t, got["previous_secret_expires_at"])
	_, rolled = a.do("lic_1", http.MethodPost, path, `{"expires_in":0}`)
	require.Nil(t, rolled["previous_secret_expires_at"])
	stored, err = a.reg.Lookup(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, []string{rolled["secret"].(string)}, stored.Secrets)

	for _, body := range []string{`{"expires_in":-1}`, `{"expires_in":604801}`, `{"expires_in":"soon"}`, `{"expires":1}`} {
		st, prob := a.do("lic_1", http.MethodPost, path, body)
		require.Equal(t, http.StatusBadRequest, st, body)
		require.NotEmpty(t, violations(prob), body)
	}
}

func TestEndpointsAPIEventTypes(t *testing.T) {
	a := newEndpointsAPI(t, nil)
	st, got := a.do("lic_1", http.MethodGet, "/v1/event_types", "")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, map[string]any{"object": "list", "has_more": false, "data": []any{
		map[string]any{"object": "event_type", "type": "order.created", "description": "An order was placed.", "schema": "#/components/schemas/Order"},
		map[string]any{"object": "event_type", "type": "order.settled", "description": "An order settled."},
	}}, got)

	_, err := producer.NewEndpointsHandler(&memstore.Endpoints{}, func(*http.Request) (string, error) { return "", nil },
		&producer.EndpointsHandlerOptions{EventTypes: []producer.EventType{{Type: "a"}, {Type: "a"}}})
	require.ErrorContains(t, err, "declared twice")
	_, err = producer.NewEndpointsHandler(&memstore.Endpoints{}, func(*http.Request) (string, error) { return "", nil },
		&producer.EndpointsHandlerOptions{EventTypes: []producer.EventType{{Type: "*"}}})
	require.Error(t, err)
	_, err = producer.NewEndpointsHandler(failingEndpoints{}, func(*http.Request) (string, error) { return "", nil }, nil)
	require.ErrorContains(t, err, "cannot list and edit")
}

// TestEndpointsAPIConcurrentEdits: PATCH, roll and DELETE racing on one endpoint each see the last
// change (no update is lost), never leave more than two secrets, and after the DELETE every write is
// a 404.
func TestEndpointsAPIConcurrentEdits(t *testing.T) {
	a := newEndpointsAPI(t, nil)
	ep := a.create("lic_1", `{"url":"https://hooks.example/a"}`)
	path := "/v1/webhook_endpoints/" + ep["id"].(string)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		patched int
	)
	for g := range 6 {
		wg.Go(func() {
			for i := range 10 {
				var st int
				switch {
				case g == 0 && i == 7:
					st, _ = a.do("lic_1", http.MethodDelete, path, "")
				case g%2 == 0:
					st, _ = a.do("lic_1", http.MethodPost, path+"/roll_secret", `{"expires_in":60}`)
				default:
					st, _ = a.do("lic_1", http.MethodPatch, path, fmt.Sprintf(`{"metadata":{"g%d":"%d"}}`, g, i))
					if st == http.StatusOK {
						mu.Lock()
						patched++
						mu.Unlock()
					}
				}
				if st != http.StatusOK && st != http.StatusNotFound {
					t.Errorf("status %d", st)
				}
			}
		})
	}
	wg.Wait()
	stored, err := a.reg.Lookup(context.Background(), ep["id"].(string))
	require.NoError(t, err)
	require.False(t, stored.DeletedAt.IsZero())
	require.LessOrEqual(t, len(stored.Secrets), 2)
	require.LessOrEqual(t, len(stored.Metadata), 3, "one key per patching goroutine")
	st, _ := a.do("lic_1", http.MethodPatch, path, `{}`)
	require.Equal(t, http.StatusNotFound, st)
	t.Logf("%d patches landed before the delete", patched)
}
