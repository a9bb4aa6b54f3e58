package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// loopbackGuard allows what tests on one machine need: loopback, and the name localhost.
func loopbackGuard() *ssrf.Guard {
	return &ssrf.Guard{
		Allow:      []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		AllowHosts: []string{"localhost"},
	}
}

// testClock is an injected clock that only moves when a test advances it.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Unix(1767225600, 0).UnixNano())
	return c
}

func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// newWebhookServer is an in-memory server with the given webhook options, a sandbox key and a
// production key, on an injected clock.
func newWebhookServer(t *testing.T, wh WebhookOptions, clock *testClock) (ts *testServer, live string) {
	t.Helper()
	if clock == nil {
		clock = newTestClock()
	}
	s, err := New(Config{Now: clock.Now, Webhooks: wh})
	require.NoError(t, err)
	sk, err := s.IssueCredentials(context.Background(), apikey.Sandbox)
	require.NoError(t, err)
	lk, err := s.IssueCredentials(context.Background(), apikey.Live)
	require.NoError(t, err)
	return &testServer{Server: s, key: sk.APIKey}, lk.APIKey
}

// register posts a webhook endpoint with the given key.
func (ts *testServer) register(key, url string) *httptest.ResponseRecorder {
	body, _ := json.Marshal(map[string]string{"url": url})
	return ts.do("POST", "/v1/webhook_endpoints", key, ts.nextKey(), string(body))
}

// expectProblem checks that w is a conforming problem with the status and code, and returns it.
func expectProblem(t *testing.T, w *httptest.ResponseRecorder, status int, code string) *apierror.Error {
	t.Helper()
	require.Equal(t, status, w.Code, "%s", w.Body)
	require.NoError(t, apierror.Check(w.Code, w.Header(), w.Body.Bytes()), "%s", w.Body)
	p, err := apierror.Parse(w.Result())
	require.NoError(t, err)
	require.Equal(t, code, p.Code, "%s", w.Body)
	return p
}

// TestEndpointURLPolicy: every hostile URL form of issue 14 is refused at registration with a 400
// located at body /url, carrying the URL policy's code; the allow-list opens loopback and nothing else.
func TestEndpointURLPolicy(t *testing.T) {
	hostile := []struct {
		name, url, code string
	}{
		{"cloud metadata", "http://169.254.169.254/latest/meta-data/", ssrf.CodeHostBlocked},
		{"loopback name with a Redis port", "http://localhost:6379/", ssrf.CodeHostBlocked},
		{"private network", "http://10.0.0.1/hooks", ssrf.CodeHostBlocked},
		{"metadata name", "http://metadata.google.internal/computeMetadata/v1/", ssrf.CodeHostBlocked},
		{"decimal IPv4 of 127.0.0.1", "http://2130706433/", ssrf.CodeHostBlocked},
		{"short hex IPv4 of 127.0.0.1", "http://0x7f.1/", ssrf.CodeHostBlocked},
		{"unique local IPv6", "http://[fd00::1]/", ssrf.CodeHostBlocked},
		{"IPv4-mapped loopback", "http://[::ffff:127.0.0.1]/", ssrf.CodeHostBlocked},
		{"user information", "http://user:s3cr3tpw@hooks.example.com/", ssrf.CodeURLHasUserinfo},
		{"fragment", "http://hooks.example.com/hooks#frag", ssrf.CodeURLHasFragment},
		{"longer than 2048 bytes", "http://hooks.example.com/" + strings.Repeat("a", 2048), ssrf.CodeURLTooLong},
		{"not http", "ftp://hooks.example.com/", ssrf.CodeSchemeNotAllowed},
		{"relative", "/hooks", ssrf.CodeURLNotAbsolute},
	}
	check := func(t *testing.T, ts *testServer, key, url, code string) {
		t.Helper()
		p := expectProblem(t, ts.register(key, url), http.StatusBadRequest, code)
		require.Len(t, p.Errors, 1)
		v := p.Errors[0]
		require.Equal(t, apierror.LocationBody, v.Location)
		require.Equal(t, "/url", v.Pointer)
		require.Equal(t, code, v.Code)
		require.NotEmpty(t, v.Detail)
		require.NotContains(t, p.Detail+v.Detail, "s3cr3tpw", "the URL's user information is never echoed")
	}
	for _, guard := range []struct {
		name  string
		guard *ssrf.Guard
	}{{"default guard", nil}, {"loopback allow-listed", loopbackGuard()}} {
		t.Run(guard.name, func(t *testing.T) {
			ts, live := newWebhookServer(t, WebhookOptions{SandboxGuard: guard.guard}, nil)
			for _, tc := range hostile {
				if guard.guard != nil && strings.Contains(tc.name, "loopback") {
					continue // allowed on purpose: see below
				}
				if guard.guard != nil && strings.Contains(tc.name, "127.0.0.1") {
					continue
				}
				t.Run(tc.name+" (sandbox key)", func(t *testing.T) { check(t, ts, ts.key, tc.url, tc.code) })
				https := strings.Replace(tc.url, "http://", "https://", 1)
				t.Run(tc.name+" (live key)", func(t *testing.T) { check(t, ts, live, https, tc.code) })
			}
			t.Run("http on a live key", func(t *testing.T) {
				check(t, ts, live, "http://hooks.example.com/hooks", ssrf.CodeSchemeNotAllowed)
			})
			t.Run("public URLs pass", func(t *testing.T) {
				require.Equal(t, http.StatusCreated, ts.register(live, "https://hooks.example.com/hooks").Code)
				require.Equal(t, http.StatusCreated, ts.register(ts.key, "http://hooks.example.com/hooks").Code,
					"a sandbox key may use http")
			})
		})
	}

	t.Run("the allow-list opens loopback, and only loopback", func(t *testing.T) {
		ts, live := newWebhookServer(t, WebhookOptions{SandboxGuard: loopbackGuard()}, nil)
		for _, u := range []string{"http://127.0.0.1:9/hooks", "http://localhost:6379/", "http://[::1]:8080/",
			"http://2130706433/", "http://[::ffff:127.0.0.1]/"} {
			w := ts.register(ts.key, u)
			if strings.Contains(u, "2130706433") {
				// Allowed, but not written as Go's resolver would read it.
				expectProblem(t, w, http.StatusBadRequest, ssrf.CodeHostNotCanonical)
				continue
			}
			require.Equal(t, http.StatusCreated, w.Code, "%s: %s", u, w.Body)
		}
		check(t, ts, live, "http://127.0.0.1:9/hooks", ssrf.CodeSchemeNotAllowed)
		check(t, ts, ts.key, "http://169.254.169.254/", ssrf.CodeHostBlocked)
	})

	t.Run("https can be required of sandbox keys, and http allowed to live keys", func(t *testing.T) {
		ts, live := newWebhookServer(t, WebhookOptions{SandboxRequireHTTPS: true, LiveAllowHTTP: true}, nil)
		check(t, ts, ts.key, "http://hooks.example.com/", ssrf.CodeSchemeNotAllowed)
		require.Equal(t, http.StatusCreated, ts.register(live, "http://hooks.example.com/").Code)
	})

	t.Run("a refusal stores nothing: the corrected request may reuse its key", func(t *testing.T) {
		ts, _ := newWebhookServer(t, WebhookOptions{}, nil)
		w := ts.do("POST", "/v1/webhook_endpoints", ts.key, "same", `{"url":"http://10.0.0.1/"}`)
		require.Equal(t, http.StatusBadRequest, w.Code)
		w = ts.do("POST", "/v1/webhook_endpoints", ts.key, "same", `{"url":"https://hooks.example.com/"}`)
		require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
	})
}

// TestEndpointLimit: past the limit, registration is a conforming 422 with the limit in the detail;
// each licensee and environment has a limit of its own; nothing is stored for the refusal.
func TestEndpointLimit(t *testing.T) {
	ts, live := newWebhookServer(t, WebhookOptions{MaxEndpoints: 3}, nil)
	for range 3 {
		require.Equal(t, http.StatusCreated, ts.register(ts.key, "https://hooks.example.com/").Code)
	}
	w := ts.do("POST", "/v1/webhook_endpoints", ts.key, "fourth", `{"url":"https://hooks.example.com/"}`)
	p := expectProblem(t, w, http.StatusUnprocessableEntity, producer.CodeEndpointLimitReached)
	require.Contains(t, p.Detail, "3 webhook endpoints")
	require.Len(t, p.Errors, 1)
	require.Equal(t, apierror.LocationBody, p.Errors[0].Location)
	require.Empty(t, w.Header().Get("Retry-After"), "waiting does not free an endpoint slot")

	again := ts.do("POST", "/v1/webhook_endpoints", ts.key, "fourth", `{"url":"https://hooks.example.com/"}`)
	require.Equal(t, http.StatusUnprocessableEntity, again.Code)
	require.Empty(t, again.Header().Get("Idempotent-Replayed"), "the refusal was not stored: it is decided again")

	ids, err := ts.store.EndpointIDs(context.Background(), "sandbox:"+mustLicensee(t, ts.Server, ts.key))
	require.NoError(t, err)
	require.Len(t, ids, 3)

	require.Equal(t, http.StatusCreated, ts.register(live, "https://hooks.example.com/").Code,
		"the same licensee's production scope has a limit of its own")
	other, err := ts.IssueCredentials(context.Background(), apikey.Sandbox)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, ts.register(other.APIKey, "https://hooks.example.com/").Code,
		"another licensee is not affected")

	t.Run("the default is 16", func(t *testing.T) {
		ts, _ := newWebhookServer(t, WebhookOptions{}, nil)
		for range DefaultMaxEndpoints {
			require.Equal(t, http.StatusCreated, ts.register(ts.key, "https://hooks.example.com/").Code)
		}
		p := expectProblem(t, ts.register(ts.key, "https://hooks.example.com/"), http.StatusUnprocessableEntity, producer.CodeEndpointLimitReached)
		require.Contains(t, p.Detail, "16 webhook endpoints")
	})
	t.Run("negative means no limit", func(t *testing.T) {
		ts, _ := newWebhookServer(t, WebhookOptions{MaxEndpoints: -1}, nil)
		for range DefaultMaxEndpoints + 1 {
			require.Equal(t, http.StatusCreated, ts.register(ts.key, "https://hooks.example.com/").Code)
		}
	})
}

// mustLicensee returns the licensee of an API key.
func mustLicensee(t *testing.T, s *Server, key string) string {
	t.Helper()
	r := httptest.NewRequest("GET", "/v1/orders/x", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	p, err := s.auth.Authenticate(r)
	require.NoError(t, err)
	return p.Licensee
}

// countingReceiver is a webhook consumer on loopback that counts requests and answers 204 to a
// correctly signed delivery and 400 to any other.
type countingReceiver struct {
	*httptest.Server
	requests atomic.Int64
	verifier atomic.Pointer[webhook.Verifier]
}

func newCountingReceiver(t *testing.T) *countingReceiver {
	t.Helper()
	rc := &countingReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.requests.Add(1)
		body, err := io.ReadAll(r.Body)
		v := rc.verifier.Load()
		if err != nil || v == nil || v.Verify(r.Header.Get(webhook.HeaderSignature), body) != nil {
			http.Error(w, "bad signature", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *countingReceiver) trust(t *testing.T, secret string, now func() time.Time) {
	t.Helper()
	v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: now})
	require.NoError(t, err)
	rc.verifier.Store(v)
}

// TestDeliveryGuardedAtDialTime: without an allow-list, a loopback URL is refused at registration,
// and an endpoint that points at loopback anyway (stored without registration's check, as a name
// that resolved elsewhere at registration would be) is never connected to: the attempt fails as
// blocked_address and the consumer receives nothing.
func TestDeliveryGuardedAtDialTime(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	ts, _ := newWebhookServer(t, WebhookOptions{}, clock)
	rc := newCountingReceiver(t)
	url := rc.URL + "/webhooks"

	p := expectProblem(t, ts.register(ts.key, url), http.StatusBadRequest, ssrf.CodeHostBlocked)
	require.Equal(t, "/url", p.Errors[0].Pointer)

	owner := "sandbox:" + mustLicensee(t, ts.Server, ts.key)
	ep := producer.Endpoint{ID: endpointIDs.New(), URL: url, Secrets: []string{webhook.NewSecret()}, Owner: owner, APIVersion: "v1"}
	require.NoError(t, ts.store.CreateEndpoint(ctx, ep, 0))
	rc.trust(t, ep.Secrets[0], clock.Now)
	require.Equal(t, http.StatusCreated, ts.do("POST", "/v1/orders", ts.key, ts.nextKey(), `{"account":"acc_1","side":"buy"}`).Code)

	_, err := ts.DeliverDue(ctx)
	require.NoError(t, err)
	atts, _, err := ts.store.Log().Attempts(ctx, driver.AttemptQuery{Stream: ep.ID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, atts, 1)
	require.Equal(t, driver.OutcomeFailed, atts[0].Outcome)
	require.Equal(t, producer.ClassBlockedAddress, atts[0].Class)
	require.NotContains(t, atts[0].Reason, "127.0.0.1", "the failure names the class, never our address")
	require.Zero(t, rc.requests.Load(), "the consumer on loopback received nothing")

	// The history shows the same, through the API.
	var list deliveryList
	getJSON(t, ts, ts.key, "/v1/webhook_endpoints/"+ep.ID+"/deliveries", &list)
	require.Len(t, list.Data, 1)
	require.Equal(t, "failed", list.Data[0].Outcome)
	require.Equal(t, producer.ClassBlockedAddress, list.Data[0].ErrorClass)

	// A retry is refused the same way.
	clock.Advance(time.Hour)
	_, err = ts.DeliverDue(ctx)
	require.NoError(t, err)
	atts, _, err = ts.store.Log().Attempts(ctx, driver.AttemptQuery{Stream: ep.ID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, atts, 2)
	require.Equal(t, producer.ClassBlockedAddress, atts[0].Class)
	require.Zero(t, rc.requests.Load())

	t.Run("with the allow-list the same consumer receives its events", func(t *testing.T) {
		clock := newTestClock()
		ts, _ := newWebhookServer(t, WebhookOptions{SandboxGuard: loopbackGuard()}, clock)
		rc := newCountingReceiver(t)
		w := ts.register(ts.key, rc.URL+"/webhooks")
		require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
		var ep WebhookEndpoint
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &ep))
		rc.trust(t, ep.Secret, clock.Now)
		ts.do("POST", "/v1/orders", ts.key, ts.nextKey(), `{"account":"acc_1","side":"buy"}`)
		_, err := ts.DeliverDue(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), rc.requests.Load())
	})
}

// deliveryList is the body of GET /v1/webhook_endpoints/{id}/deliveries.
type deliveryList struct {
	Object  string `json:"object"`
	HasMore bool   `json:"has_more"`
	Data    []struct {
		ID         string `json:"id"`
		Object     string `json:"object"`
		Endpoint   string `json:"endpoint"`
		Event      string `json:"event"`
		Sequence   uint64 `json:"sequence"`
		Attempt    int    `json:"attempt"`
		Outcome    string `json:"outcome"`
		StatusCode *int   `json:"status_code"`
		ErrorClass string `json:"error_class"`
		NextAt     *int64 `json:"next_attempt_at"`
	} `json:"data"`
}

func getJSON(t *testing.T, ts *testServer, key, path string, dst any) {
	t.Helper()
	w := ts.do("GET", path, key, "", "")
	require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), dst))
}

// TestDeliveryHistory: a sandbox endpoint whose deliveries get a bad signature shows its failed and
// retried attempts in GET /v1/webhook_endpoints/{id}/deliveries — paginated, filtered by sequence
// and by outcome — and to its own licensee only. The clock is injected and every delivery pass is
// made by the test: no sleeps, no timing.
func TestDeliveryHistory(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	ts, live := newWebhookServer(t, WebhookOptions{SandboxGuard: loopbackGuard()}, clock)
	rc := newCountingReceiver(t)
	w := ts.register(ts.key, rc.URL+"/webhooks")
	require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
	var ep WebhookEndpoint
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &ep))
	rc.trust(t, ep.Secret, clock.Now)

	faults := ts.do("POST", "/v1/sandbox/webhook_endpoints/"+ep.ID+"/faults", ts.key, ts.nextKey(), `{"bad_signature":1}`)
	require.Equal(t, http.StatusOK, faults.Code, "%s", faults.Body)
	const orders = 3
	for i := range orders {
		require.Equal(t, http.StatusCreated, ts.do("POST", "/v1/orders", ts.key, ts.nextKey(),
			fmt.Sprintf(`{"account":"acc_%d","side":"buy"}`, i)).Code)
	}
	// Two passes with every signature corrupted: the first event fails twice, and the others wait
	// behind it (an endpoint's deliveries stop at its first failure).
	for range 2 {
		_, err := ts.DeliverDue(ctx)
		require.NoError(t, err)
		clock.Advance(time.Hour) // past any retry delay of the schedule's start, jitter included
	}
	require.Equal(t, http.StatusOK, ts.do("DELETE", "/v1/sandbox/webhook_endpoints/"+ep.ID+"/faults", ts.key, ts.nextKey(), "").Code)
	for range orders {
		_, err := ts.DeliverDue(ctx)
		require.NoError(t, err)
		clock.Advance(time.Hour)
	}
	require.Equal(t, int64(2+orders), rc.requests.Load(), "two rejected deliveries, then each event once")
	require.Equal(t, int64(2), ts.Stats().Faults["bad_signature"])

	path := "/v1/webhook_endpoints/" + ep.ID + "/deliveries"
	t.Run("every attempt, newest first", func(t *testing.T) {
		var list deliveryList
		getJSON(t, ts, ts.key, path, &list)
		require.Equal(t, "list", list.Object)
		require.False(t, list.HasMore)
		require.Len(t, list.Data, 2+orders)
		failed := 0
		for _, a := range list.Data {
			require.True(t, strings.HasPrefix(a.ID, producer.AttemptIDPrefix))
			require.Equal(t, "webhook_delivery_attempt", a.Object)
			require.Equal(t, ep.ID, a.Endpoint)
			if a.Outcome == "failed" {
				failed++
				require.Equal(t, uint64(1), a.Sequence)
				require.Equal(t, producer.ClassStatus, a.ErrorClass)
				require.NotNil(t, a.StatusCode)
				require.Equal(t, http.StatusBadRequest, *a.StatusCode, "the consumer rejected the signature")
				require.NotNil(t, a.NextAt, "a failed attempt has its retry scheduled")
			} else {
				require.Equal(t, "delivered", a.Outcome)
			}
		}
		require.Equal(t, 2, failed)
		require.Equal(t, "failed", list.Data[len(list.Data)-1].Outcome, "the oldest attempt is the first failure")
	})

	t.Run("paginated with starting_after", func(t *testing.T) {
		var all []string
		cursor := ""
		for page := 0; ; page++ {
			require.Less(t, page, 10)
			var list deliveryList
			getJSON(t, ts, ts.key, path+"?limit=2"+cursor, &list)
			require.LessOrEqual(t, len(list.Data), 2)
			for _, a := range list.Data {
				all = append(all, a.ID)
			}
			if !list.HasMore {
				break
			}
			cursor = "&starting_after=" + list.Data[len(list.Data)-1].ID
		}
		require.Len(t, all, 2+orders)
		seen := map[string]bool{}
		for _, id := range all {
			require.False(t, seen[id], "no attempt on two pages")
			seen[id] = true
		}
	})

	t.Run("filtered by sequence: the retried event's attempts", func(t *testing.T) {
		var list deliveryList
		getJSON(t, ts, ts.key, path+"?sequence=1", &list)
		require.Len(t, list.Data, 3)
		for i, a := range list.Data {
			require.Equal(t, uint64(1), a.Sequence)
			require.Equal(t, 3-i, a.Attempt, "attempts are numbered per event, newest first")
		}
		require.Equal(t, "delivered", list.Data[0].Outcome)
	})

	t.Run("filtered by outcome", func(t *testing.T) {
		var list deliveryList
		getJSON(t, ts, ts.key, path+"?outcome=failed", &list)
		require.Len(t, list.Data, 2)
		getJSON(t, ts, ts.key, path+"?outcome=delivered", &list)
		require.Len(t, list.Data, orders)
		getJSON(t, ts, ts.key, path+"?outcome=abandoned", &list)
		require.Empty(t, list.Data)
		getJSON(t, ts, ts.key, path+"?sequence=1&outcome=failed&limit=1", &list)
		require.Len(t, list.Data, 1)
		require.True(t, list.HasMore)
	})

	t.Run("a bad parameter is a located 400", func(t *testing.T) {
		p := expectProblem(t, ts.do("GET", path+"?outcome=lost", ts.key, "", ""), http.StatusBadRequest, producer.CodeInvalidOutcome)
		require.Equal(t, apierror.LocationQuery, p.Errors[0].Location)
		require.Equal(t, "outcome", p.Errors[0].Name)
	})

	t.Run("another licensee, the production key and an unknown id get the same 404", func(t *testing.T) {
		other, err := ts.IssueCredentials(ctx, apikey.Sandbox)
		require.NoError(t, err)
		unknown := ts.do("GET", "/v1/webhook_endpoints/we_unknown/deliveries", ts.key, "", "")
		require.Equal(t, http.StatusNotFound, unknown.Code)
		pu, err := apierror.Parse(unknown.Result())
		require.NoError(t, err)
		for _, key := range []string{other.APIKey, live} {
			w := ts.do("GET", path, key, "", "")
			require.Equal(t, http.StatusNotFound, w.Code, "%s", w.Body)
			require.NoError(t, apierror.Check(w.Code, w.Header(), w.Body.Bytes()))
			pa, err := apierror.Parse(w.Result())
			require.NoError(t, err)
			require.Equal(t, pu.Code, pa.Code)
			require.Equal(t, strings.ReplaceAll(pu.Detail, "we_unknown", ep.ID), pa.Detail, "nothing tells it exists")
		}
	})

	t.Run("without a key, 401", func(t *testing.T) {
		require.Equal(t, http.StatusUnauthorized, ts.do("GET", path, "", "", "").Code)
	})
}

// TestListEndpoints: GET /{version}/webhook_endpoints lists the caller's endpoints oldest first,
// without their secrets, in the document's shape; the same licensee's production endpoints and
// another licensee's never appear, and a scope without endpoints gets "data":[], never null.
func TestListEndpoints(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	ts, _ := newWebhookServer(t, WebhookOptions{}, clock)
	// The same licensee in production: a scope of its own.
	live, err := ts.issuer.Issue(ctx, apikey.Evaluation{Licensee: mustLicensee(t, ts.Server, ts.key), Environment: apikey.Live})
	require.NoError(t, err)
	other, err := ts.IssueCredentials(ctx, apikey.Sandbox)
	require.NoError(t, err)
	schemas := map[string]*openapi3.Schema{}
	for _, v := range []string{"v1", "v2"} {
		doc := loadDocument(t, ts.do(http.MethodGet, "/"+v+"/openapi.json", "", "", "").Body.Bytes())
		schemas[v] = doc.Components.Schemas["WebhookEndpointList"].Value
	}

	// list lists key's endpoints on version and checks what every list must be.
	list := func(t *testing.T, key, version string) []map[string]any {
		t.Helper()
		w := ts.do(http.MethodGet, "/"+version+"/webhook_endpoints", key, "", "")
		require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
		require.Equal(t, "application/json", w.Header().Get("Content-Type"))
		require.Equal(t, "no-store", w.Header().Get("Cache-Control"))
		require.NotContains(t, w.Body.String(), "whsec_", "a secret is shown once, at registration")
		var doc any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &doc))
		require.NoError(t, schemas[version].VisitJSON(doc, openapi3.EnableJSONSchema2020()), "%s", w.Body)
		var body struct {
			Object  string           `json:"object"`
			Data    []map[string]any `json:"data"`
			HasMore bool             `json:"has_more"`
		}
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
		require.Equal(t, "list", body.Object)
		require.False(t, body.HasMore)
		require.NotNil(t, body.Data, "data is [], never null: %s", w.Body)
		for _, ep := range body.Data {
			require.Subset(t, slices.Collect(maps.Keys(ep)), []string{"id", "object", "url", "api_version", "status", "enabled_events"})
			require.NotContains(t, ep, "secret")
			require.Equal(t, "webhook_endpoint", ep["object"])
		}
		return body.Data
	}
	ids := func(eps []map[string]any) []string {
		out := make([]string, len(eps))
		for i, ep := range eps {
			out[i] = ep["id"].(string)
		}
		return out
	}
	register := func(t *testing.T, key, url string) WebhookEndpoint {
		t.Helper()
		clock.Advance(time.Millisecond) // oldest first: by creation time
		w := ts.register(key, url)
		require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
		var ep WebhookEndpoint
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &ep))
		return ep
	}

	t.Run("none yet: an empty list", func(t *testing.T) {
		for _, v := range []string{"v1", "v2"} {
			require.Empty(t, list(t, ts.key, v))
			require.Contains(t, ts.do(http.MethodGet, "/"+v+"/webhook_endpoints", ts.key, "", "").Body.String(), `"data":[]`)
		}
	})

	var registered []WebhookEndpoint
	for i := range 3 {
		registered = append(registered, register(t, ts.key, fmt.Sprintf("https://hooks.example.com/%d", i)))
	}
	t.Run("oldest first, without secrets", func(t *testing.T) {
		for _, v := range []string{"v1", "v2"} {
			eps := list(t, ts.key, v)
			require.Len(t, eps, len(registered))
			for i, ep := range eps {
				require.Equal(t, registered[i].ID, ep["id"], "%s: endpoint %d", v, i)
				require.Equal(t, registered[i].URL, ep["url"], "%s: endpoint %d", v, i)
				require.Equal(t, "v1", ep["api_version"], "%s: endpoint %d", v, i)
			}
		}
	})

	t.Run("the same licensee's production endpoints are apart", func(t *testing.T) {
		require.Empty(t, list(t, live.APIKey, "v1"))
		mine := register(t, live.APIKey, "https://hooks.example.com/live")
		require.Equal(t, []string{mine.ID}, ids(list(t, live.APIKey, "v1")))
		require.Equal(t, []string{registered[0].ID, registered[1].ID, registered[2].ID}, ids(list(t, ts.key, "v1")))
	})

	t.Run("another licensee sees none of them", func(t *testing.T) {
		require.Empty(t, list(t, other.APIKey, "v1"))
	})

	t.Run("without a key, 401", func(t *testing.T) {
		expectProblem(t, ts.do(http.MethodGet, "/v1/webhook_endpoints", "", "", ""), http.StatusUnauthorized, apikey.CodeMissing)
	})

	t.Run("other methods are 405 naming GET and POST", func(t *testing.T) {
		for _, m := range []string{http.MethodPut, http.MethodPatch, http.MethodDelete} {
			w := ts.do(m, "/v1/webhook_endpoints", ts.key, ts.nextKey(), "")
			expectProblem(t, w, http.StatusMethodNotAllowed, CodeMethodNotAllowed)
			require.Equal(t, "GET, POST", w.Header().Get("Allow"), m)
		}
	})
}

// endpointsStore is a Store whose endpoint listing a test decides.
type endpointsStore struct {
	Store
	list func(ctx context.Context, q driver.EndpointQuery) ([]producer.Endpoint, bool, error)
}

func (s endpointsStore) ListEndpoints(ctx context.Context, q driver.EndpointQuery) ([]producer.Endpoint, bool, error) {
	return s.list(ctx, q)
}

// TestListEndpointsStoreMistakes: a store that fails, or that lists an endpoint of another scope, is an
// opaque 500 — never another licensee's URL.
func TestListEndpointsStoreMistakes(t *testing.T) {
	ctx := context.Background()
	mem := NewMemoryStore()
	foreign := producer.Endpoint{ID: endpointIDs.New(), URL: "https://hooks.example.com/theirs", Secrets: []string{webhook.NewSecret()},
		Owner: "sandbox:lic_theirs", APIVersion: "v1"}
	require.NoError(t, mem.CreateEndpoint(ctx, foreign, 0))
	for _, tc := range []struct {
		name string
		list func(ctx context.Context, q driver.EndpointQuery) ([]producer.Endpoint, bool, error)
	}{
		{"the store fails", func(context.Context, driver.EndpointQuery) ([]producer.Endpoint, bool, error) {
			return nil, false, errors.New("boom")
		}},
		{"the store lists another scope's endpoint", func(context.Context, driver.EndpointQuery) ([]producer.Endpoint, bool, error) {
			return []producer.Endpoint{foreign}, false, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{Store: endpointsStore{Store: mem, list: tc.list}})
			require.NoError(t, err)
			c, err := s.IssueCredentials(ctx, apikey.Sandbox)
			require.NoError(t, err)
			ts := &testServer{Server: s, key: c.APIKey}
			w := ts.do(http.MethodGet, "/v1/webhook_endpoints", ts.key, "", "")
			expectProblem(t, w, http.StatusInternalServerError, apierror.CodeInternal)
			require.NotContains(t, w.Body.String(), foreign.URL)
			require.NotContains(t, w.Body.String(), foreign.ID)
		})
	}
}
