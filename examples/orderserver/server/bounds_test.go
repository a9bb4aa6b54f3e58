package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/webhook/producer"
)

// endpointOf registers an endpoint for the test server's key and returns its ID.
func endpointOf(t *testing.T, ts *testServer) string {
	t.Helper()
	w := ts.register(ts.key, "https://hooks.example.com/")
	require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
	var ep WebhookEndpoint
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &ep))
	return ep.ID
}

func storedEvents(t *testing.T, ts *testServer, id string) int {
	t.Helper()
	evs, _, err := ts.store.Log().Range(context.Background(), id, 1, math.MaxUint64, producer.MaxRangeLimit)
	require.NoError(t, err)
	return len(evs)
}

// TestTriggerEventTooLarge: a trigger whose event is over the publisher's maximum is a 413 located at
// body /data, and nothing is published.
func TestTriggerEventTooLarge(t *testing.T) {
	ts, _ := newWebhookServer(t, WebhookOptions{MaxEventBytes: 1024}, nil)
	id := endpointOf(t, ts)
	body := fmt.Sprintf(`{"type":"order.created","data":{"pad":"%s"}}`, strings.Repeat("x", 2048))
	w := ts.do("POST", "/v1/sandbox/events", ts.key, ts.nextKey(), body)
	p := expectProblem(t, w, http.StatusRequestEntityTooLarge, CodeEventTooLarge)
	require.Len(t, p.Errors, 1)
	require.Equal(t, apierror.LocationBody, p.Errors[0].Location)
	require.Equal(t, "/data", p.Errors[0].Pointer)
	require.Contains(t, p.Detail, "1024")
	require.Zero(t, storedEvents(t, ts, id), "nothing published")

	w = ts.do("POST", "/v1/sandbox/events", ts.key, ts.nextKey(), `{"type":"order.created","data":{"small":true}}`)
	require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
}

// TestEventsPerEndpointBounded: once an endpoint's stream holds as many events as the log keeps, an
// order (whose event would go there) and a trigger are 429 events_quota_exceeded with Retry-After;
// the order is not created and its key is released, so the same request may succeed later.
func TestEventsPerEndpointBounded(t *testing.T) {
	store := NewMemoryStore()
	store.log.(*producer.MemoryLog).MaxStreamEvents = 3
	s, err := New(Config{Store: store, Now: newTestClock().Now})
	require.NoError(t, err)
	sk, err := s.IssueCredentials(context.Background(), "sandbox")
	require.NoError(t, err)
	ts := &testServer{Server: s, key: sk.APIKey}
	id := endpointOf(t, ts)
	const order = `{"account":"acct_1","side":"buy"}`
	for range 3 {
		w := ts.do("POST", "/v1/orders", ts.key, ts.nextKey(), order)
		require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
	}
	w := ts.do("POST", "/v1/orders", ts.key, "fourth", order)
	p := expectProblem(t, w, http.StatusTooManyRequests, CodeEventsQuotaExceeded)
	require.NotEmpty(t, w.Header().Get("Retry-After"))
	require.Contains(t, p.Detail, "retention")
	require.Equal(t, int64(3), s.Stats().OrdersCreated, "the order was not created")
	again := ts.do("POST", "/v1/orders", ts.key, "fourth", order)
	require.Equal(t, http.StatusTooManyRequests, again.Code)
	require.Empty(t, again.Header().Get("Idempotent-Replayed"), "the refusal was not stored: it is decided again")

	w = ts.do("POST", "/v1/sandbox/events", ts.key, ts.nextKey(), `{"type":"order.created"}`)
	expectProblem(t, w, http.StatusTooManyRequests, CodeEventsQuotaExceeded)
	require.Equal(t, 3, storedEvents(t, ts, id))
}

// TestReferenceServerBoundsEvents: the reference server's stores keep DefaultMaxStreamEvents per
// endpoint.
func TestReferenceServerBoundsEvents(t *testing.T) {
	require.Equal(t, DefaultMaxStreamEvents, NewMemoryStore().log.(*producer.MemoryLog).MaxStreamEvents)
}
