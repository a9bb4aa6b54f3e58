package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/webhook"
)

// lifecycleSink is a webhook receiver for several endpoints, one path each: it records every delivery
// (checked against the server's OpenAPI document) and answers 204, or what its answer function
// (newAnsweringSink) picks for the path.
type lifecycleSink struct {
	mu   sync.Mutex
	got  map[string][]sinkDelivery // by path
	errs []error
}

type sinkDelivery struct {
	Sequence  uint64
	Type      string
	Signature string
	Body      []byte
	Header    http.Header
}

func newLifecycleSink(t *testing.T, baseURL string) (*lifecycleSink, *httptest.Server) {
	t.Helper()
	return newAnsweringSink(t, baseURL, func(string) int { return http.StatusNoContent })
}

// newAnsweringSink is a lifecycleSink that answers each delivery with answer(path).
func newAnsweringSink(t *testing.T, baseURL string, answer func(path string) int) (*lifecycleSink, *httptest.Server) {
	t.Helper()
	s := &lifecycleSink{got: map[string][]sinkDelivery{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = contract.checkDelivery(baseURL, r, body)
		}
		var ev webhook.Event
		if err == nil {
			err = json.Unmarshal(body, &ev)
		}
		s.mu.Lock()
		if err != nil {
			s.errs = append(s.errs, err)
		}
		s.got[r.URL.Path] = append(s.got[r.URL.Path], sinkDelivery{Sequence: ev.Sequence, Type: ev.Type,
			Signature: r.Header.Get(webhook.HeaderSignature), Body: body, Header: r.Header.Clone()})
		s.mu.Unlock()
		w.WriteHeader(answer(r.URL.Path))
	}))
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, err := range s.errs {
			t.Errorf("webhook delivery: %v", err)
		}
	})
	t.Cleanup(srv.Close)
	return s, srv
}

func (s *lifecycleSink) of(path string) []sinkDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got[path])
}

func seqs(ds []sinkDelivery) []uint64 {
	out := make([]uint64, len(ds))
	for i, d := range ds {
		out[i] = d.Sequence
	}
	return out
}

// verifiesWith reports whether a verifier holding only secret accepts the delivery.
func verifiesWith(t *testing.T, secret string, d sinkDelivery) bool {
	t.Helper()
	v, err := webhook.NewVerifier([]string{secret}, nil)
	require.NoError(t, err)
	return v.Verify(d.Signature, d.Body) == nil
}

// TestEndpointLifecycleAcrossReplicas: two order servers on one PostgreSQL schema, every change made
// through one seen by the other's dispatcher and API. Subscriptions route events and keep each
// endpoint's sequence gap-free; a disabled endpoint is pushed nothing and recovers its missed events
// by range; a rolled secret signs beside the new one until it expires, not after; a deleted endpoint
// gets nothing more and its stream is still served by range.
func TestEndpointLifecycleAcrossReplicas(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	a := startOrderServerEnv(t, "lifecycle-a", []string{loopbackAllow, postgresEnv(dsn)})
	b := startOrderServerEnv(t, "lifecycle-b", []string{loopbackAllow, postgresEnv(dsn)})
	key := issueCredentials(t, a)
	sink, hooks := newLifecycleSink(t, a.URL)

	call := func(base, method, path, body string) response {
		t.Helper()
		rq := request{Method: method, URL: base + "/v1" + path, Auth: bearer(key), Body: body}
		if method != http.MethodGet {
			rq.Key = newKey()
		}
		return rq.do(t)
	}
	register := func(base, name, events string) (id, secret string) {
		t.Helper()
		ep := call(base, http.MethodPost, "/webhook_endpoints",
			fmt.Sprintf(`{"url":%q,"enabled_events":%s,"description":%q}`, hooks.URL+"/"+name, events, name)).
			expectJSON(t, http.StatusCreated)
		return ep["id"].(string), ep["secret"].(string)
	}
	order := func(base string) { createOrder(t, base, key, orderBody) }
	trigger := func(base string) {
		call(base, http.MethodPost, "/sandbox/events", `{}`).expectJSON(t, http.StatusCreated)
	}
	waitFor := func(path string, n int) []sinkDelivery {
		t.Helper()
		eventually(t, deliveryTimeout, func() bool { return len(sink.of(path)) >= n },
			"%s received %d of %d deliveries", path, len(sink.of(path)), n)
		return sink.of(path)
	}

	catalogue := call(b.URL, http.MethodGet, "/event_types", "").expectJSON(t, http.StatusOK)
	var types []string
	for _, et := range catalogue["data"].([]any) {
		types = append(types, et.(map[string]any)["type"].(string))
	}
	require.Equal(t, []string{"order.created", "webhook_endpoint.disabled", "sandbox.test"}, types)

	orders, orderSecret := register(a.URL, "orders", `["order.created"]`)
	tests, _ := register(b.URL, "tests", `["sandbox.test"]`)
	all, allSecret := register(a.URL, "all", `["*"]`)

	{ // subscriptions route events, each sequence gap-free
		t.Log("subscriptions route events, each sequence gap-free")
		order(a.URL)
		trigger(b.URL)
		order(b.URL)
		order(a.URL)
		require.Equal(t, []uint64{1, 2, 3}, seqs(waitFor("/orders", 3)))
		require.Equal(t, []uint64{1}, seqs(waitFor("/tests", 1)))
		got := waitFor("/all", 4)
		require.Equal(t, []uint64{1, 2, 3, 4}, seqs(got))
		for _, d := range sink.of("/orders") {
			require.Equal(t, "order.created", d.Type)
			require.True(t, verifiesWith(t, orderSecret, d))
		}
		require.Equal(t, "sandbox.test", sink.of("/tests")[0].Type)
	}

	{ // a disabled endpoint gets nothing and recovers by range after enable
		t.Log("a disabled endpoint gets nothing and recovers by range after enable")
		ep := call(b.URL, http.MethodPatch, "/webhook_endpoints/"+orders, `{"status":"disabled"}`).expectJSON(t, http.StatusOK)
		require.Equal(t, "disabled", ep["status"])
		require.Equal(t, "manual", ep["disabled_reason"])
		// The other replica sees the change.
		require.Equal(t, "disabled", call(a.URL, http.MethodGet, "/webhook_endpoints/"+orders, "").expectJSON(t, http.StatusOK)["status"])
		order(a.URL)
		order(b.URL)
		waitFor("/all", 6) // both orders went out to the endpoint still enabled
		eventually(t, deliveryTimeout, func() bool {
			return len(deliveries(t, a.URL, key, orders, "?outcome=abandoned").Data) == 2
		}, "the disabled endpoint's two events are abandoned unsent")
		for _, at := range deliveries(t, b.URL, key, orders, "?outcome=abandoned").Data {
			require.Equal(t, "endpoint_disabled", at.ErrorClass)
			require.Nil(t, at.StatusCode, "no request was made")
		}
		require.Len(t, sink.of("/orders"), 3, "nothing pushed while disabled")

		call(a.URL, http.MethodPatch, "/webhook_endpoints/"+orders, `{"status":"enabled"}`).expectJSON(t, http.StatusOK)
		order(b.URL)
		got := waitFor("/orders", 4)
		require.Equal(t, []uint64{1, 2, 3, 6}, seqs(got), "the next delivery shows the gap 4–5, and nothing floods in")
		page := call(a.URL, http.MethodGet, "/webhook_endpoints/"+orders+"/events?from=4&to=5", "")
		require.Equal(t, http.StatusOK, page.Status, "%s", page.Body)
		var evs struct{ Data []webhook.Event }
		require.NoError(t, json.Unmarshal(page.Body, &evs))
		require.Len(t, evs.Data, 2)
		require.Equal(t, []uint64{4, 5}, []uint64{evs.Data[0].Sequence, evs.Data[1].Sequence})
		v, err := webhook.NewVerifier([]string{orderSecret}, nil)
		require.NoError(t, err)
		require.NoError(t, v.Verify(page.Header.Get(webhook.HeaderSignature), page.Body))
	}

	{ // a rolled secret signs until it expires, then only the new one
		t.Log("a rolled secret signs until it expires, then only the new one")
		rolled := call(b.URL, http.MethodPost, "/webhook_endpoints/"+all+"/roll_secret", `{"expires_in":3600}`).expectJSON(t, http.StatusOK)
		newSecret := rolled["secret"].(string)
		require.NotEqual(t, allSecret, newSecret)
		require.NotNil(t, rolled["previous_secret_expires_at"])
		n := len(sink.of("/all"))
		order(a.URL)
		d := waitFor("/all", n+1)[n]
		require.Len(t, strings.Split(d.Signature, ","), 3, "t= and two v1")
		require.True(t, verifiesWith(t, allSecret, d), "a consumer still on the old secret verifies")
		require.True(t, verifiesWith(t, newSecret, d), "one already on the new secret verifies too")

		// Ending the overlap at once: only the newest secret signs.
		ended := call(a.URL, http.MethodPost, "/webhook_endpoints/"+all+"/roll_secret", `{"expires_in":0}`).expectJSON(t, http.StatusOK)
		newest := ended["secret"].(string)
		require.Nil(t, ended["previous_secret_expires_at"])
		order(b.URL)
		d = waitFor("/all", n+2)[n+1]
		require.Len(t, strings.Split(d.Signature, ","), 2, "t= and one v1")
		require.False(t, verifiesWith(t, allSecret, d))
		require.False(t, verifiesWith(t, newSecret, d))
		require.True(t, verifiesWith(t, newest, d))
		allSecret = newest
	}

	{ // a deleted endpoint gets nothing more, and its stream is still served
		t.Log("a deleted endpoint gets nothing more, and its stream is still served")
		del := call(b.URL, http.MethodDelete, "/webhook_endpoints/"+tests, "").expectJSON(t, http.StatusOK)
		require.Equal(t, map[string]any{"id": tests, "object": "webhook_endpoint", "deleted": true}, del)
		call(a.URL, http.MethodGet, "/webhook_endpoints/"+tests, "").expectProblem(t, http.StatusNotFound, "webhook_endpoint_not_found")
		n := len(sink.of("/all"))
		trigger(a.URL)
		waitFor("/all", n+1) // the trigger reached the live endpoint subscribed to it
		require.Len(t, sink.of("/tests"), 1, "no delivery after the delete")
		page := call(a.URL, http.MethodGet, "/webhook_endpoints/"+tests+"/events?from=1&to=10", "")
		require.Equal(t, http.StatusOK, page.Status, "%s", page.Body)
		var evs struct{ Data []webhook.Event }
		require.NoError(t, json.Unmarshal(page.Body, &evs))
		require.Len(t, evs.Data, 1, "the stream stays readable by range until retention")
		list := call(b.URL, http.MethodGet, "/webhook_endpoints", "").expectJSON(t, http.StatusOK)
		var ids []string
		for _, ep := range list["data"].([]any) {
			ids = append(ids, ep.(map[string]any)["id"].(string))
		}
		require.ElementsMatch(t, []string{orders, all}, ids)
	}

	{ // settings change on either replica and show on the other
		t.Log("settings change on either replica and show on the other")
		ep := call(a.URL, http.MethodPatch, "/webhook_endpoints/"+all,
			`{"description":"every event","metadata":{"team":"payments"},"headers":{"X-Tenant":"eu-1"}}`).expectJSON(t, http.StatusOK)
		require.Equal(t, "every event", ep["description"])
		got := call(b.URL, http.MethodGet, "/webhook_endpoints/"+all, "").expectJSON(t, http.StatusOK)
		require.Equal(t, map[string]any{"team": "payments"}, got["metadata"])
		n := len(sink.of("/all"))
		order(b.URL)
		d := waitFor("/all", n+1)[n]
		require.Equal(t, "eu-1", d.Header.Get("X-Tenant"), "the endpoint's headers go with the next delivery")
		require.True(t, verifiesWith(t, allSecret, d))
	}
}
