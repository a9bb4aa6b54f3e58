package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/webhook"
)

// noAllowList is the orderserver's environment without SVC_WEBHOOK_ALLOW: public addresses only.
var noAllowList = []string{"SVC_WEBHOOK_ALLOW="}

// countingConsumer is a webhook receiver on loopback that counts the requests it gets and checks each
// against the webhooks of baseURL's OpenAPI document (contract); the test fails for any that breaks it.
func countingConsumer(t *testing.T, baseURL string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	var mu sync.Mutex
	var errs []error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = contract.checkDelivery(baseURL, r, body)
		}
		if err != nil { // the handler's goroutine must not stop the test: the cleanup reports it
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	// Cleanups run last in, first out: the server is closed, so no handler still runs, then errs is read.
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, err := range errs {
			t.Errorf("webhook delivery: %v", err)
		}
	})
	t.Cleanup(srv.Close)
	return srv, &n
}

// attemptList is the body of GET /v1/webhook_endpoints/{id}/deliveries.
type attemptList struct {
	Object  string `json:"object"`
	HasMore bool   `json:"has_more"`
	Data    []struct {
		ID         string `json:"id"`
		Object     string `json:"object"`
		Endpoint   string `json:"endpoint"`
		Sequence   uint64 `json:"sequence"`
		Attempt    int    `json:"attempt"`
		Outcome    string `json:"outcome"`
		StatusCode *int   `json:"status_code"`
		ErrorClass string `json:"error_class"`
		Error      string `json:"error"`
		Response   string `json:"response"`
	} `json:"data"`
}

func deliveries(t *testing.T, baseURL, apiKey, endpoint, query string) attemptList {
	t.Helper()
	r := request{Method: "GET", URL: baseURL + "/v1/webhook_endpoints/" + endpoint + "/deliveries" + query, Auth: bearer(apiKey)}.do(t)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var l attemptList
	require.NoError(t, json.Unmarshal(r.Body, &l))
	return l
}

// TestLoopbackRefusedWithoutAllowList: an orderserver started without SVC_WEBHOOK_ALLOW refuses a
// consumer on loopback at registration, with a 400 located at body /url.
func TestLoopbackRefusedWithoutAllowList(t *testing.T) {
	srv := startOrderServerEnv(t, "orderserver", noAllowList)
	consumer, _ := countingConsumer(t, srv.URL)
	port := consumer.URL[strings.LastIndexByte(consumer.URL, ':')+1:]
	for _, u := range []string{consumer.URL + "/webhooks", "http://localhost:" + port + "/webhooks",
		"http://[::1]:" + port + "/", "http://0x7f.1:" + port + "/"} {
		p := request{Method: "POST", URL: srv.URL + "/v1/webhook_endpoints", Auth: bearer(srv.SandboxKey), Key: newKey(),
			Body: fmt.Sprintf(`{"url":%q}`, u)}.do(t).expectProblem(t, http.StatusBadRequest, "host_blocked")
		require.True(t, locates(p, "body", "/url"), "%s", u)
	}
	p := request{Method: "POST", URL: srv.URL + "/v1/webhook_endpoints", Auth: bearer(srv.LiveKey), Key: newKey(),
		Body: `{"url":"http://hooks.example.com/"}`}.do(t).expectProblem(t, http.StatusBadRequest, "scheme_not_allowed")
	require.True(t, locates(p, "body", "/url"))
}

// TestDeliveryBlockedAtDialTime: an endpoint on loopback that got into the database without passing
// registration (a name that resolved to a public address then and to 127.0.0.1 now would be the
// same) is never connected to: its history shows failed blocked_address attempts and the consumer
// receives nothing.
func TestDeliveryBlockedAtDialTime(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	srv := startOrderServerEnv(t, "orderserver", append(noAllowList, postgresEnv(dsn)))
	c := request{Method: "POST", URL: srv.URL + "/v1/sandbox/credentials", Auth: bearer(srv.AdminToken), Key: newKey()}.
		do(t).expectJSON(t, http.StatusCreated)
	key, licensee := c["api_key"].(string), c["licensee"].(string)
	consumer, received := countingConsumer(t, srv.URL)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	const id = "we_bypassedregistration0000000"
	_, err = conn.Exec(ctx, `INSERT INTO webhook_endpoints (id, owner, url, secrets, api_version) VALUES ($1, $2, $3, $4, 'v1')`,
		id, "sandbox:"+licensee, consumer.URL+"/webhooks", []string{webhook.NewSecret()})
	require.NoError(t, err)

	createOrder(t, srv.URL, key, orderBody)
	var l attemptList
	eventually(t, deliveryTimeout, func() bool {
		l = deliveries(t, srv.URL, key, id, "")
		return len(l.Data) > 0
	}, "no delivery attempt was recorded")
	a := l.Data[0]
	require.Equal(t, "failed", a.Outcome)
	require.Equal(t, "blocked_address", a.ErrorClass)
	require.Nil(t, a.StatusCode)
	require.NotContains(t, a.Error, "127.0.0.1", "the failure names the class, never the address")
	require.Zero(t, received.Load(), "the consumer on loopback received nothing")
}

// TestDeliveryHistoryUnderFaults: the bad_signature fault makes the consumer reject an event's first
// deliveries; GET /v1/webhook_endpoints/{id}/deliveries shows the failed attempts and the retry that
// succeeded once the fault was cleared, filtered by sequence and outcome, paginated, and to its own
// licensee only.
func TestDeliveryHistoryUnderFaults(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	key := issueCredentials(t, srv)
	w := startWebhookSetup(t, srv, key)
	faults := srv.URL + "/v1/sandbox/webhook_endpoints/" + w.endpoint + "/faults"
	request{Method: "POST", URL: faults, Auth: bearer(key), Key: newKey(), Body: `{"bad_signature":1}`}.do(t).
		expectJSON(t, http.StatusOK)
	order := createOrder(t, srv.URL, key, orderBody)

	// The retry schedule starts at one second and doubles: two rejections take a few seconds.
	eventually(t, deliveryTimeout, func() bool {
		return len(deliveries(t, srv.URL, key, w.endpoint, "?outcome=failed").Data) >= 2
	}, "two failed attempts")
	request{Method: "DELETE", URL: faults, Auth: bearer(key), Key: newKey()}.do(t).expectJSON(t, http.StatusOK)
	eventually(t, deliveryTimeout, func() bool {
		return len(deliveries(t, srv.URL, key, w.endpoint, "?outcome=delivered").Data) == 1
	}, "the retry after the fault was cleared is delivered")
	waitProcessed(t, w.consumer, 1, map[string]bool{order["id"].(string): true})

	all := deliveries(t, srv.URL, key, w.endpoint, "?sequence=1")
	require.Equal(t, "list", all.Object)
	require.GreaterOrEqual(t, len(all.Data), 3)
	require.Equal(t, "delivered", all.Data[0].Outcome, "newest first: the successful retry")
	for i, a := range all.Data {
		require.Equal(t, "webhook_delivery_attempt", a.Object)
		require.Equal(t, w.endpoint, a.Endpoint)
		require.Equal(t, uint64(1), a.Sequence)
		require.Equal(t, len(all.Data)-i, a.Attempt)
		if i > 0 {
			require.Equal(t, "failed", a.Outcome)
			require.Equal(t, "http_status", a.ErrorClass)
			require.NotNil(t, a.StatusCode)
			require.GreaterOrEqual(t, *a.StatusCode, 400, "the consumer rejected the corrupted signature")
		}
	}

	page := deliveries(t, srv.URL, key, w.endpoint, "?limit=1&outcome=failed")
	require.Len(t, page.Data, 1)
	require.True(t, page.HasMore)
	next := deliveries(t, srv.URL, key, w.endpoint, "?limit=1&outcome=failed&starting_after="+page.Data[0].ID)
	require.Len(t, next.Data, 1)
	require.Less(t, next.Data[0].Attempt, page.Data[0].Attempt, "the next page is older")

	none := deliveries(t, srv.URL, key, w.endpoint, "?sequence=2")
	require.Empty(t, none.Data)

	for _, other := range []string{issueCredentials(t, srv), srv.LiveKey} {
		request{Method: "GET", URL: srv.URL + "/v1/webhook_endpoints/" + w.endpoint + "/deliveries", Auth: bearer(other)}.
			do(t).expectProblem(t, http.StatusNotFound, "webhook_endpoint_not_found")
	}
	p := request{Method: "GET", URL: srv.URL + "/v1/webhook_endpoints/" + w.endpoint + "/deliveries?limit=0", Auth: bearer(key)}.
		do(t).expectProblem(t, http.StatusBadRequest, "out_of_range")
	require.True(t, locates(p, "query", "limit"))
}

// TestAllowListPerEnvironment (issue 30): with the README's allow-list, which is the sandbox's, a live
// key cannot register a loopback URL; a sandbox endpoint on an internal loopback service gets its
// status recorded in the history but nothing of its answer; and an address:port entry opens that port
// only.
func TestAllowListPerEnvironment(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	for _, u := range []string{"https://127.0.0.1:9/hooks", "https://localhost:9/hooks"} {
		p := request{Method: "POST", URL: srv.URL + "/v1/webhook_endpoints", Auth: bearer(srv.LiveKey), Key: newKey(),
			Body: fmt.Sprintf(`{"url":%q}`, u)}.do(t).expectProblem(t, http.StatusBadRequest, "host_blocked")
		require.True(t, locates(p, "body", "/url"), "%s", u)
	}

	const secret = "internal-admin-password-0f3c"
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"password":"`+secret+`"}`)
	}))
	t.Cleanup(internal.Close)
	id, _ := registerEndpoint(t, srv.URL, srv.SandboxKey, internal.URL+"/hooks")
	createOrder(t, srv.URL, srv.SandboxKey, orderBody)
	var l attemptList
	eventually(t, deliveryTimeout, func() bool {
		l = deliveries(t, srv.URL, srv.SandboxKey, id, "")
		return len(l.Data) > 0
	}, "no delivery attempt was recorded")
	a := l.Data[len(l.Data)-1]
	require.NotNil(t, a.StatusCode)
	require.Equal(t, http.StatusForbidden, *a.StatusCode, "the status is recorded")
	require.Empty(t, a.Response, "the answer of a destination only the allow-list admits is not")
	raw := request{Method: "GET", URL: srv.URL + "/v1/webhook_endpoints/" + id + "/deliveries", Auth: bearer(srv.SandboxKey)}.do(t)
	require.NotContains(t, string(raw.Body), secret)

	consumer, received := countingConsumer(t, srv.URL)
	port := consumer.URL[strings.LastIndexByte(consumer.URL, ':')+1:]
	ported := startOrderServerEnv(t, "orderserver-ports", []string{"SVC_WEBHOOK_ALLOW=sandbox=127.0.0.1:" + port})
	registerEndpoint(t, ported.URL, ported.SandboxKey, consumer.URL+"/webhooks")
	for _, u := range []string{"http://127.0.0.1:9/hooks", "http://localhost:" + port + "/hooks"} {
		p := request{Method: "POST", URL: ported.URL + "/v1/webhook_endpoints", Auth: bearer(ported.SandboxKey), Key: newKey(),
			Body: fmt.Sprintf(`{"url":%q}`, u)}.do(t).expectProblem(t, http.StatusBadRequest, "host_blocked")
		require.True(t, locates(p, "body", "/url"), "%s", u)
	}
	createOrder(t, ported.URL, ported.SandboxKey, orderBody)
	eventually(t, deliveryTimeout, func() bool { return received.Load() > 0 }, "the listed address:port got no delivery")
}
