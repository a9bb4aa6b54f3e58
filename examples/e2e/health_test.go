package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/webhook"
)

// TestDeliveryHealthAcrossReplicas: two order servers on one PostgreSQL schema. An endpoint that
// answers 410 is disabled at once, and the licensee's watcher endpoint receives
// webhook_endpoint.disabled; the stats show each endpoint's attempts and backlog; resend and recover,
// asked of either replica, push retained events again — the same bytes and sequence, marked
// X-SVC-Redelivery — in order; a disabled endpoint, an unknown event and a range too large are
// refused, located.
func TestDeliveryHealthAcrossReplicas(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	a := startOrderServerEnv(t, "health-a", []string{loopbackAllow, postgresEnv(dsn)})
	b := startOrderServerEnv(t, "health-b", []string{loopbackAllow, postgresEnv(dsn)})
	key := issueCredentials(t, a)
	// "/gone" answers 410, every other path 204.
	sink, hooks := newAnsweringSink(t, a.URL, func(path string) int {
		if path == "/gone" {
			return http.StatusGone
		}
		return http.StatusNoContent
	})

	call := func(base, method, path, body string) response {
		t.Helper()
		rq := request{Method: method, URL: base + "/v1" + path, Auth: bearer(key), Body: body}
		if method != http.MethodGet {
			rq.Key = newKey()
		}
		return rq.do(t)
	}
	register := func(name, events string) string {
		t.Helper()
		ep := call(a.URL, http.MethodPost, "/webhook_endpoints",
			fmt.Sprintf(`{"url":%q,"enabled_events":%s}`, hooks.URL+"/"+name, events)).expectJSON(t, http.StatusCreated)
		return ep["id"].(string)
	}
	orders := register("orders", `["order.created"]`)
	gone := register("gone", `["sandbox.test"]`)
	register("watch", `["webhook_endpoint.disabled"]`)

	// A 410 disables the endpoint at once; the watcher is told.
	call(b.URL, http.MethodPost, "/sandbox/events", fmt.Sprintf(`{"endpoint":%q}`, gone)).expectJSON(t, http.StatusCreated)
	eventually(t, deliveryTimeout, func() bool { return len(sink.of("/watch")) >= 1 }, "the watcher was told")
	notice := sink.of("/watch")[0]
	require.Equal(t, "webhook_endpoint.disabled", notice.Type)
	var data struct {
		Endpoint struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"endpoint"`
		Reason    string `json:"reason"`
		LastError struct {
			StatusCode int `json:"status_code"`
		} `json:"last_error"`
	}
	var ev webhook.Event
	require.NoError(t, json.Unmarshal(notice.Body, &ev))
	require.NoError(t, json.Unmarshal(ev.Data, &data))
	require.Equal(t, gone, data.Endpoint.ID)
	require.Equal(t, "disabled", data.Endpoint.Status)
	require.Equal(t, "gone", data.Reason)
	require.Equal(t, http.StatusGone, data.LastError.StatusCode)
	ep := call(b.URL, http.MethodGet, "/webhook_endpoints/"+gone, "").expectJSON(t, http.StatusOK)
	require.Equal(t, "disabled", ep["status"])
	require.Equal(t, "gone", ep["disabled_reason"])
	require.Len(t, sink.of("/gone"), 1, "nothing after the 410")

	// Orders, delivered; their statistics on either replica.
	for range 3 {
		createOrder(t, a.URL, key, orderBody)
	}
	eventually(t, deliveryTimeout, func() bool { return len(sink.of("/orders")) >= 3 }, "the orders' events")
	var st map[string]any
	eventually(t, deliveryTimeout, func() bool {
		// The sink has the request before the server has recorded its answer.
		st = call(b.URL, http.MethodGet, "/webhook_endpoints/"+orders+"/stats", "").expectJSON(t, http.StatusOK)
		return st["week"].(map[string]any)["delivered"] == float64(3)
	}, "the statistics count the three deliveries")
	require.Equal(t, "enabled", st["status"])
	for _, window := range []string{"hour", "day", "week"} {
		w := st[window].(map[string]any)
		require.Equal(t, float64(3), w["delivered"], window)
		require.Equal(t, float64(1), w["success_rate"], window)
		require.NotNil(t, w["latency_ms"], window)
	}
	require.Equal(t, map[string]any{"events": float64(0), "oldest_age": nil}, st["backlog"])
	st = call(a.URL, http.MethodGet, "/webhook_endpoints/"+gone+"/stats", "").expectJSON(t, http.StatusOK)
	require.Equal(t, "gone", st["disabled_reason"])
	require.Equal(t, float64(1), st["hour"].(map[string]any)["failed"], "the 410")

	// Resend one event through one replica, recover a range through the other: the same bytes.
	first := sink.of("/orders")
	require.Equal(t, []uint64{1, 2, 3}, seqs(first))
	r := call(a.URL, http.MethodPost, "/webhook_endpoints/"+orders+"/events/2/resend", "").expectJSON(t, http.StatusAccepted)
	require.Equal(t, map[string]any{"object": "webhook_redelivery", "endpoint": orders, "from": float64(2), "to": float64(2),
		"queued": float64(1)}, r)
	eventually(t, deliveryTimeout, func() bool {
		// Recorded, not only received: until then it is still queued, and recover would skip it.
		h := call(a.URL, http.MethodGet, "/webhook_endpoints/"+orders+"/deliveries?sequence=2&outcome=delivered", "").
			expectJSON(t, http.StatusOK)
		return len(h["data"].([]any)) == 2
	}, "the resent event delivered")
	r = call(b.URL, http.MethodPost, "/webhook_endpoints/"+orders+"/recover", `{"from":1,"to":3}`).expectJSON(t, http.StatusAccepted)
	require.Equal(t, float64(3), r["queued"])
	eventually(t, deliveryTimeout, func() bool { return len(sink.of("/orders")) >= 7 }, "the recovered events")
	got := sink.of("/orders")
	require.Equal(t, []uint64{1, 2, 3, 2, 1, 2, 3}, seqs(got), "in order, behind the normal stream")
	for i, d := range got[3:] {
		require.Equal(t, "true", d.Header.Get(webhook.HeaderRedelivery), "redelivery %d", i)
		require.True(t, bytes.Equal(first[d.Sequence-1].Body, d.Body), "the same bytes for sequence %d", d.Sequence)
	}
	for _, d := range first {
		require.Empty(t, d.Header.Get(webhook.HeaderRedelivery))
	}

	// Refusals, located.
	call(a.URL, http.MethodPost, "/webhook_endpoints/"+gone+"/events/1/resend", "").
		expectProblem(t, http.StatusUnprocessableEntity, "webhook_endpoint_disabled")
	call(b.URL, http.MethodPost, "/webhook_endpoints/"+gone+"/recover", `{"from":1,"to":1}`).
		expectProblem(t, http.StatusUnprocessableEntity, "webhook_endpoint_disabled")
	call(a.URL, http.MethodPost, "/webhook_endpoints/"+orders+"/events/99/resend", "").
		expectProblem(t, http.StatusNotFound, "event_not_found")
	p := call(a.URL, http.MethodPost, "/webhook_endpoints/"+orders+"/recover", `{"from":1,"to":20000}`).
		expectProblem(t, http.StatusBadRequest, "range_too_large")
	require.Equal(t, "/to", p["errors"].([]any)[0].(map[string]any)["pointer"])
	call(a.URL, http.MethodPost, "/webhook_endpoints/we_nope/recover", `{"from":1,"to":2}`).
		expectProblem(t, http.StatusNotFound, "webhook_endpoint_not_found")
}
