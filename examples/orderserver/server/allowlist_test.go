package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// TestAllowListPerEnvironment (issue 30): with the loopback allow-list given to the sandbox only, a
// production key can neither register https://127.0.0.1:9/… nor have a delivery connect there (an
// endpoint stored past registration, as a name that resolved elsewhere then would be), while the
// sandbox's endpoint on loopback is delivered to.
func TestAllowListPerEnvironment(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	ts, live := newWebhookServer(t, WebhookOptions{SandboxGuard: loopbackGuard()}, clock)

	for _, u := range []string{"https://127.0.0.1:9/hooks", "https://localhost:9/hooks", "https://[::1]:9/hooks"} {
		p := expectProblem(t, ts.register(live, u), http.StatusBadRequest, ssrf.CodeHostBlocked)
		require.Equal(t, "/url", p.Errors[0].Pointer, u)
	}
	require.Equal(t, http.StatusCreated, ts.register(ts.key, "http://127.0.0.1:9/hooks").Code, "the sandbox's list opens loopback")

	rc := newCountingReceiver(t)
	liveEP := producer.Endpoint{ID: endpointIDs.New(), URL: rc.URL + "/live", Secrets: []string{webhook.NewSecret()},
		Owner: "live:" + mustLicensee(t, ts.Server, live), APIVersion: "v1"}
	require.NoError(t, ts.store.CreateEndpoint(ctx, liveEP, 0))
	require.Equal(t, http.StatusCreated, ts.do("POST", "/v1/orders", live, ts.nextKey(), `{"account":"acc_1","side":"buy"}`).Code)

	sbxEP := producer.Endpoint{ID: endpointIDs.New(), URL: rc.URL + "/sandbox", Secrets: []string{webhook.NewSecret()},
		Owner: "sandbox:" + mustLicensee(t, ts.Server, ts.key), APIVersion: "v1"}
	require.NoError(t, ts.store.CreateEndpoint(ctx, sbxEP, 0))
	rc.trust(t, sbxEP.Secrets[0], clock.Now)
	require.Equal(t, http.StatusCreated, ts.do("POST", "/v1/orders", ts.key, ts.nextKey(), `{"account":"acc_1","side":"buy"}`).Code)

	_, err := ts.DeliverDue(ctx)
	require.NoError(t, err)
	atts, _, err := ts.store.Log().Attempts(ctx, driver.AttemptQuery{Stream: liveEP.ID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, atts, 1)
	require.Equal(t, producer.ClassBlockedAddress, atts[0].Class, "production is checked against its own (empty) list at dial time")
	atts, _, err = ts.store.Log().Attempts(ctx, driver.AttemptQuery{Stream: sbxEP.ID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, atts, 1)
	require.Equal(t, driver.OutcomeDelivered, atts[0].Outcome)
	require.Equal(t, http.StatusNoContent, atts[0].StatusCode)
	require.EqualValues(t, 1, rc.requests.Load(), "only the sandbox's delivery reached loopback")
}
