package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
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
	store.log.(*memstore.Log).MaxStreamEvents = 3
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
	require.Equal(t, DefaultMaxStreamEvents, NewMemoryStore().log.(*memstore.Log).MaxStreamEvents)
}

// boundedServer is an in-memory server whose log keeps at most perStream events per endpoint, on an
// injected clock, with a sandbox key.
func boundedServer(t *testing.T, perStream int, wh WebhookOptions) (*testServer, *MemoryStore, *testClock) {
	t.Helper()
	clock := newTestClock()
	store := NewMemoryStore()
	store.log.(*memstore.Log).MaxStreamEvents = perStream
	s, err := New(Config{Store: store, Now: clock.Now, Webhooks: wh})
	require.NoError(t, err)
	sk, err := s.IssueCredentials(context.Background(), "sandbox")
	require.NoError(t, err)
	return &testServer{Server: s, key: sk.APIKey}, store, clock
}

// eventsFrom counts the events of an endpoint's stream from sequence from on.
func eventsFrom(t *testing.T, ts *testServer, id string, from uint64) int {
	t.Helper()
	evs, _, err := ts.store.Log().Range(context.Background(), id, from, math.MaxUint64, producer.MaxRangeLimit)
	require.NoError(t, err)
	return len(evs)
}

// expire moves the clock a minute on and removes every event created before then, as the retention
// does once events are old enough, and returns how many it removed.
func expire(t *testing.T, ts *testServer, clock *testClock) int {
	t.Helper()
	clock.Advance(time.Minute)
	n, err := ts.store.Log().Cleanup(context.Background(), clock.Now(), 1000)
	require.NoError(t, err)
	return n
}

// orderRows counts the orders the store holds, every scope together.
func orderRows(m *MemoryStore) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, os := range m.orders {
		n += len(os)
	}
	return n
}

// TestTriggerRefusalReleasesTheKey: a trigger refused because an endpoint's stream is full publishes
// nothing on any endpoint (all or none) and is not stored as its Idempotency-Key's response: once
// retention has freed room, the same key runs, publishes once on each endpoint, and is replayed after.
func TestTriggerRefusalReleasesTheKey(t *testing.T) {
	ts, _, clock := boundedServer(t, 3, WebhookOptions{})
	a, b := endpointOf(t, ts), endpointOf(t, ts) // listed in this order: a's event would go first
	for range 3 {
		w := ts.do("POST", "/v1/sandbox/events", ts.key, ts.nextKey(), `{"endpoint":"`+b+`"}`)
		require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
	}
	const body = `{"type":"order.created","data":{"n":1}}`
	for i := range 2 {
		w := ts.do("POST", "/v1/sandbox/events", ts.key, "trigger-all", body)
		expectProblem(t, w, http.StatusTooManyRequests, CodeEventsQuotaExceeded)
		require.NotEmpty(t, w.Header().Get("Retry-After"), "attempt %d", i+1)
		require.Empty(t, w.Header().Get("Idempotent-Replayed"), "attempt %d: decided again, not replayed", i+1)
		require.Zero(t, storedEvents(t, ts, a), "attempt %d: nothing published on the endpoint with room", i+1)
		require.Equal(t, 3, storedEvents(t, ts, b))
	}

	// Retention frees room: b's three events are removed. (The log's cleanup with a cutoff a minute on,
	// rather than the dispatcher's 30 days, which would outlast the key's record (24 h) and the
	// sandbox key itself, and prove nothing.)
	require.Equal(t, 3, expire(t, ts, clock))

	w := ts.do("POST", "/v1/sandbox/events", ts.key, "trigger-all", body)
	require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
	require.Empty(t, w.Header().Get("Idempotent-Replayed"))
	var out struct{ Data []sandbox.Triggered }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out))
	require.Len(t, out.Data, 2)
	replay := ts.do("POST", "/v1/sandbox/events", ts.key, "trigger-all", body)
	require.Equal(t, http.StatusCreated, replay.Code, "%s", replay.Body)
	require.Equal(t, "true", replay.Header().Get("Idempotent-Replayed"))
	require.Equal(t, 1, eventsFrom(t, ts, a, 1), "published once on a")
	require.Equal(t, 1, eventsFrom(t, ts, b, 4), "published once on b, after its pruned events")
	require.Equal(t, int64(3+2), ts.Stats().EventsEmitted)
}

// TestRefusedOrderLeavesNothing: an order refused because its event is too large (413) or an
// endpoint's stream is full (429) leaves no order row and no event, and its key is released: the
// same key, once the cause is gone, creates the order once.
func TestRefusedOrderLeavesNothing(t *testing.T) {
	const order = `{"account":"acct_1","side":"buy"}`
	t.Run("event too large", func(t *testing.T) {
		ts, store, _ := boundedServer(t, 3, WebhookOptions{MaxEventBytes: 128}) // an order's event is about 300 bytes
		id := endpointOf(t, ts)
		for range 2 {
			w := ts.do("POST", "/v1/orders", ts.key, "o1", order)
			p := expectProblem(t, w, http.StatusRequestEntityTooLarge, CodeEventTooLarge)
			require.Equal(t, apierror.LocationBody, p.Errors[0].Location)
			require.Empty(t, w.Header().Get("Idempotent-Replayed"))
		}
		require.Zero(t, orderRows(store), "no order row")
		require.Zero(t, storedEvents(t, ts, id))
		require.Zero(t, ts.Stats().OrdersCreated)
	})
	t.Run("stream full", func(t *testing.T) {
		ts, store, clock := boundedServer(t, 1, WebhookOptions{})
		a, b := endpointOf(t, ts), endpointOf(t, ts)
		w := ts.do("POST", "/v1/sandbox/events", ts.key, ts.nextKey(), `{"endpoint":"`+b+`"}`)
		require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
		w = ts.do("POST", "/v1/orders", ts.key, "o1", order)
		expectProblem(t, w, http.StatusTooManyRequests, CodeEventsQuotaExceeded)
		require.Zero(t, orderRows(store), "no order row")
		require.Zero(t, storedEvents(t, ts, a), "no event on the endpoint with room")

		require.Equal(t, 1, expire(t, ts, clock))
		w = ts.do("POST", "/v1/orders", ts.key, "o1", order)
		require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
		w = ts.do("POST", "/v1/orders", ts.key, "o1", order)
		require.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
		require.Equal(t, 1, orderRows(store))
		require.Equal(t, int64(1), ts.Stats().OrdersCreated)
		require.Equal(t, 1, eventsFrom(t, ts, a, 1))
		require.Equal(t, 1, eventsFrom(t, ts, b, 2))
	})
}
