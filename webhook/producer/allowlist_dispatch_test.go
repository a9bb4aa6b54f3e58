package producer_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// Issue 30: a sandbox key read an internal loopback service's secret from the response snippet of
// the delivery history. A delivery to a destination that only the allow-list let through is recorded
// by its status alone.
func TestNoSnippetFromAllowListedDestination(t *testing.T) {
	const secret = `{"root_password":"hunter2-internal"}`
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, secret)
	}))
	t.Cleanup(internal.Close)
	eps := mustEndpoints(t,
		producer.Endpoint{ID: "we_a", URL: internal.URL + "/hooks", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	l := memstore.NewLog()
	publishN(t, l, "we_a", 1, t0)
	clk := newClock()
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now, Jitter: -1, Guard: loopback,
		Schedule: []time.Duration{time.Minute}})
	st, err := d.DeliverDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, st.Failed)

	recs, _, err := l.Attempts(context.Background(), driver.AttemptQuery{Stream: "we_a", Limit: 10})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, http.StatusForbidden, recs[0].StatusCode, "the status is recorded")
	require.Empty(t, recs[0].Response, "nothing of the answer is")

	mux := http.NewServeMux()
	mux.Handle(producer.DeliveriesPattern("v1"), must(producer.NewDeliveriesHandler(l, eps,
		func(*http.Request) (string, error) { return "lic_1", nil }, nil)))
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/webhook_endpoints/we_a/deliveries", nil))
	require.Equal(t, http.StatusOK, w.Code)
	require.NotContains(t, w.Body.String(), "hunter2")
	require.Contains(t, w.Body.String(), `"status_code":403`)
	require.Contains(t, w.Body.String(), `"response":""`)

	// A client of the operator's own (no guard, so no allow-list) keeps the snippet: TestDeliveryHistory.
	require.False(t, strings.Contains(recs[0].Reason, "hunter2"))
}

// ClientFor sends each endpoint's deliveries through the client of its environment: the production
// endpoint's guard opens nothing, so its delivery to loopback is refused while the sandbox's goes.
func TestClientForPerEnvironment(t *testing.T) {
	sk, srv := startSink(t, nil)
	eps := mustEndpoints(t,
		producer.Endpoint{ID: "we_sbx", URL: srv.URL + "/s", Owner: "sandbox:lic_1", Secrets: []string{webhook.NewSecret()}},
		producer.Endpoint{ID: "we_live", URL: srv.URL + "/l", Owner: "live:lic_1", Secrets: []string{webhook.NewSecret()}})
	l := memstore.NewLog()
	publishN(t, l, "we_sbx", 1, t0)
	publishN(t, l, "we_live", 1, t0)
	sandboxClient, liveClient := ssrf.NewClient(loopback), ssrf.NewClient(nil)
	clk := newClock()
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now, Jitter: -1, Guard: loopback,
		ClientFor: func(ep producer.Endpoint) *http.Client {
			if strings.HasPrefix(ep.Owner, "sandbox:") {
				return sandboxClient
			}
			return liveClient
		}})
	st, err := d.DeliverDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, st.Delivered)
	require.Equal(t, 1, st.Failed)
	require.Len(t, sk.deliveries(), 1)
	live, _, err := l.Attempts(context.Background(), driver.AttemptQuery{Stream: "we_live", Limit: 10})
	require.NoError(t, err)
	require.Len(t, live, 1)
	require.Equal(t, producer.ClassBlockedAddress, live[0].Class)
}
