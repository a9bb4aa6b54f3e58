package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// newDeliveriesAPI serves an endpoint's statistics, resend and recover as the reference server does —
// producer's DeliveriesHandler on a memory log, its writes behind the idempotency middleware — for
// testKey's licensee, whose endpoint we_a has had three events delivered. It returns the base URL and
// a function that delivers what is due.
func newDeliveriesAPI(t *testing.T) (string, func() int) {
	t.Helper()
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(sink.Close)
	eps, err := memstore.NewEndpoints(producer.Endpoint{ID: "we_a", URL: sink.URL, Owner: "lic_test", Secrets: []string{webhook.NewSecret()}})
	require.NoError(t, err)
	log := memstore.NewLog()
	pub, err := producer.NewPublisher(log, eps, nil)
	require.NoError(t, err)
	d, err := producer.NewDispatcher(log, eps, &producer.DispatcherOptions{
		Guard: &ssrf.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	require.NoError(t, err)
	deliver := func() int {
		st, err := d.DeliverDue(context.Background())
		require.NoError(t, err)
		return st.Delivered
	}
	for range 3 {
		_, err := pub.Publish(context.Background(), "we_a", "order.created", json.RawMessage(`{}`))
		require.NoError(t, err)
	}
	require.Equal(t, 3, deliver())
	h, err := producer.NewDeliveriesHandler(log, eps, func(r *http.Request) (string, error) {
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			return "", apierror.Unauthenticated("invalid_api_key", "the API key is not valid")
		}
		return "lic_test", nil
	}, nil)
	require.NoError(t, err)
	idem, err := idempotency.New(nil)
	require.NoError(t, err)
	mux := http.NewServeMux()
	h.Register(mux, "v1", idem.Handler)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, deliver
}

// TestEndpointsStats: the windows as a table, the status and the backlog above it; --json the answer.
func TestEndpointsStats(t *testing.T) {
	base, _ := newDeliveriesAPI(t)
	vars := map[string]string{envAPIKey: testKey, envBaseURL: base, envEndpoint: "we_a"}
	r := runSvc(t, vars, "", "endpoints", "stats")
	require.Equal(t, exitOK, r.code, r.stderr)
	for _, want := range []string{"webhook endpoint we_a\n", "status   enabled\n", "backlog  nothing waits\n",
		"WINDOW  ATTEMPTS  DELIVERED  FAILED  ABANDONED  SUCCESS", "  hour         3          3       0          0   100.0%"} {
		require.Contains(t, r.stdout, want)
	}
	r = runSvc(t, vars, "", "endpoints", "stats", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, "webhook_endpoint_stats", st["object"])
	require.Equal(t, float64(3), st["week"].(map[string]any)["delivered"])
}

// TestEventsResendAndRecover: what was queued, said plainly; a range the server refuses is its problem.
func TestEventsResendAndRecover(t *testing.T) {
	base, deliver := newDeliveriesAPI(t)
	vars := map[string]string{envAPIKey: testKey, envBaseURL: base, envEndpoint: "we_a"}
	r := runSvc(t, vars, "", "events", "resend", "--sequence", "2")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "webhook endpoint we_a, event 2: 1 queued for redelivery\n", r.stdout)
	r = runSvc(t, vars, "", "events", "recover", "--from", "1", "--to", "3")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "webhook endpoint we_a, events 1–3: 2 queued for redelivery\n", r.stdout, "2 was queued already")
	require.Equal(t, 3, deliver(), "pushed again")
	r = runSvc(t, vars, "", "events", "recover", "--from", "1", "--to", "3", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var out map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Equal(t, float64(3), out["queued"])

	r = runSvc(t, vars, "", "events", "resend", "--sequence", "9")
	require.Equal(t, exitRefused, r.code)
	require.Contains(t, r.stderr, "404 Not Found (event_not_found)")
	r = runSvc(t, vars, "", "events", "recover", "--from", "1", "--to", "20000")
	require.Equal(t, exitRefused, r.code)
	require.Contains(t, r.stderr, "body /to: a recovery pushes at most 10000 events")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"events", "resend"}, "--sequence is required"},
		{[]string{"events", "recover", "--to", "3"}, "--from is required"},
		{[]string{"events", "recover", "--from", "3"}, "--to is required"},
		{[]string{"events", "recover", "--from", "3", "--to", "1"}, "--to 1 is before --from 3"},
	} {
		r := runSvc(t, vars, "", tc.args...)
		require.Equal(t, exitUsage, r.code, r.stderr)
		require.Contains(t, r.stderr, tc.want)
	}
}
