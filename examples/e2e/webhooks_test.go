package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// webhookSetup is an order server, an endpoint and a consumer process receiving it.
type webhookSetup struct {
	srv      *orderServer
	consumer *consumerProc
	endpoint string
	apiKey   string
}

// startWebhookSetup registers an endpoint for a consumer on a free port, then starts the consumer
// with the endpoint's ID and secret. env is more of the consumer's environment (postgresEnv).
func startWebhookSetup(t *testing.T, srv *orderServer, apiKey string, env ...string) *webhookSetup {
	t.Helper()
	addr := freeAddr(t)
	id, secret := registerEndpoint(t, srv.URL, apiKey, "http://"+addr+"/webhooks")
	args := []string{"-endpoint", id, "-base-url", srv.URL, "-catch-up", "300ms"}
	return &webhookSetup{srv: srv, endpoint: id, apiKey: apiKey,
		consumer: startConsumer(t, "consumer", addr, append(consumerEnv(secret, apiKey), env...), args...)}
}

// createOrders creates n orders with the given number of concurrent clients and returns their IDs.
func createOrders(t *testing.T, baseURL, apiKey string, n, workers int) map[string]bool {
	t.Helper()
	var mu sync.Mutex
	ids := make(map[string]bool, n)
	work := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range work {
				r, err := request{Method: "POST", URL: baseURL + "/v1/orders", Auth: bearer(apiKey), Key: newKey(),
					Body: fmt.Sprintf(`{"account":"acc_%d","side":"sell"}`, i)}.send()
				var o struct{ ID string }
				if err == nil && r.Status != http.StatusCreated {
					err = fmt.Errorf("status %d: %s", r.Status, r.Body)
				}
				if err == nil {
					err = json.Unmarshal(r.Body, &o)
				}
				if err != nil {
					t.Errorf("creating an order: %v", err)
					continue
				}
				mu.Lock()
				ids[o.ID] = true
				mu.Unlock()
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	require.Len(t, ids, n)
	return ids
}

// waitProcessed waits until the consumer has logged n processed events, then checks that they are the
// sequences 1..n, each exactly once, in order, and that they carry exactly the given orders.
func waitProcessed(t *testing.T, c *consumerProc, n int, orders map[string]bool) []processedEvent {
	t.Helper()
	eventually(t, deliveryTimeout, func() bool { return len(c.processed()) >= n },
		"the consumer processed %d of %d events", len(c.processed()), n)
	evs := c.processed()
	require.Len(t, evs, n, "no event is processed twice")
	seen := make(map[string]bool)
	for i, ev := range evs {
		require.Equal(t, uint64(i+1), ev.Sequence, "events are processed in sequence order, none skipped")
		require.False(t, seen[ev.EventID], "event %s processed twice", ev.EventID)
		seen[ev.EventID] = true
		require.True(t, orders[ev.Order], "event %d carries order %s, which was not created", ev.Sequence, ev.Order)
		delete(orders, ev.Order)
	}
	require.Empty(t, orders, "every created order's event was processed")
	return evs
}

func TestWebhookDelivery(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	w := startWebhookSetup(t, srv, srv.SandboxKey)
	orders := createOrders(t, srv.URL, srv.SandboxKey, 20, 1)
	waitProcessed(t, w.consumer, 20, orders)

	t.Run("another licensee's orders do not reach this endpoint", func(t *testing.T) {
		createOrders(t, srv.URL, issueCredentials(t, srv), 3, 1)
		mine := createOrders(t, srv.URL, srv.SandboxKey, 1, 1)
		eventually(t, deliveryTimeout, func() bool { return len(w.consumer.processed()) >= 21 }, "the 21st event")
		last := w.consumer.processed()[20]
		require.Equal(t, uint64(21), last.Sequence)
		require.True(t, mine[last.Order])
	})
}

func TestGapRecoveryUnderFaults(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	w := startWebhookSetup(t, srv, srv.SandboxKey)
	r := request{Method: "POST", URL: srv.URL + "/v1/sandbox/webhook_endpoints/" + w.endpoint + "/faults",
		Auth: bearer(srv.SandboxKey), Key: newKey(),
		Body: `{"drop":0.25,"duplicate":0.2,"reorder":0.2,"bad_signature":0.1,"delay_ms":0}`}.do(t)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	const n = 40
	orders := createOrders(t, srv.URL, srv.SandboxKey, n, 4)
	evs := waitProcessed(t, w.consumer, n, orders)
	recovered := 0
	for _, ev := range evs {
		if ev.Recovered {
			recovered++
		}
	}
	require.Positive(t, recovered, "dropped and reordered deliveries are recovered through range retrieval")
	t.Logf("%d of %d events were recovered by range fetch", recovered, n)
}

// A licensee pinned to v2 whose consumer loses deliveries gets them back through range retrieval
// under /v2/ (the consumer's -api-version), in v2's shape. Before, the consumer asked under /v1/, the
// router refused the v2 licensee, and a dropped event was never recovered.
func TestGapRecoveryPinnedToV2(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	key := issueCredentials(t, srv)
	addr := freeAddr(t)
	// The licensee's first request pins it to v2.
	ep := request{Method: "POST", URL: srv.URL + "/v2/webhook_endpoints", Auth: bearer(key), Key: newKey(),
		Body: `{"url":"http://` + addr + `/webhooks"}`}.do(t).expectJSON(t, http.StatusCreated)
	require.Equal(t, "v2", ep["api_version"])
	id, secret := ep["id"].(string), ep["secret"].(string)
	c := startConsumer(t, "consumer-v2", addr, consumerEnv(secret, key),
		"-endpoint", id, "-base-url", srv.URL, "-api-version", "v2", "-catch-up", "300ms")
	request{Method: "POST", URL: srv.URL + "/v2/sandbox/webhook_endpoints/" + id + "/faults", Auth: bearer(key),
		Key: newKey(), Body: `{"drop":0.4}`}.do(t).expectJSON(t, http.StatusOK)

	const n = 20
	orders := make(map[string]bool, n)
	for i := range n {
		o := request{Method: "POST", URL: srv.URL + "/v2/orders", Auth: bearer(key), Key: newKey(),
			Body: fmt.Sprintf(`{"account":"acc_%d","direction":"buy"}`, i)}.do(t).expectJSON(t, http.StatusCreated)
		require.Equal(t, "buy", o["direction"])
		orders[o["id"].(string)] = true
	}
	evs := waitProcessed(t, c, n, orders)
	recovered := 0
	for _, ev := range evs {
		require.Equal(t, "v2", ev.APIVersion, "event %d", ev.Sequence)
		if ev.Recovered {
			recovered++
		}
	}
	require.Positive(t, recovered, "dropped deliveries are recovered under /v2/")
	// What was fetched reads as v2 too.
	r := request{Method: "GET", URL: srv.URL + "/v2/webhook_endpoints/" + id + "/events?from=1&to=1", Auth: bearer(key)}.do(t)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Contains(t, string(r.Body), `"direction":"buy"`)
	require.NotContains(t, string(r.Body), `"side"`)
}
