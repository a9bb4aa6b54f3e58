package producer_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// TestSubscriptionsRouteEventsGapFree: an owner's endpoints receive only the types they subscribe to,
// and each stream numbers only the events it receives, 1, 2, 3 without a gap.
func TestSubscriptionsRouteEventsGapFree(t *testing.T) {
	ctx := context.Background()
	sec := webhook.NewSecret()
	eps := mustEndpoints(t,
		producer.Endpoint{ID: "we_all", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{sec}},
		producer.Endpoint{ID: "we_star", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{sec}, EnabledEvents: []string{"*"}},
		producer.Endpoint{ID: "we_created", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{sec},
			EnabledEvents: []string{"order.created"}},
		producer.Endpoint{ID: "we_settled", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{sec},
			EnabledEvents: []string{"order.settled", "order.refunded"}},
	)
	l := memstore.NewLog()
	pub := mustPublisher(t, l, eps, nil)
	types := []string{"order.created", "order.settled", "order.created", "order.refunded", "order.cancelled", "order.created"}
	for _, typ := range types {
		_, err := pub.PublishToOwner(ctx, "lic_1", typ, map[string]string{"type": typ})
		require.NoError(t, err)
	}
	want := map[string][]string{
		"we_all":     types,
		"we_star":    types,
		"we_created": {"order.created", "order.created", "order.created"},
		"we_settled": {"order.settled", "order.refunded"},
	}
	for id, wantTypes := range want {
		evs, more, err := l.Range(ctx, id, 1, 100, 100)
		require.NoError(t, err)
		require.False(t, more)
		var got []string
		for i, ev := range evs {
			require.Equal(t, uint64(i+1), ev.Sequence, "%s: gap-free over the events it receives", id)
			got = append(got, ev.Type)
		}
		require.Equal(t, wantTypes, got, id)
	}

	// PublishToEach filters the same way, and says which endpoint each event went to.
	all, _, err := eps.ListEndpoints(ctx, driver.EndpointQuery{Owner: "lic_1", Limit: 10})
	require.NoError(t, err)
	evs, err := pub.PublishToEach(ctx, all, "order.settled", json.RawMessage(`{}`))
	require.NoError(t, err)
	var to []string
	for _, ev := range evs {
		to = append(to, ev.Endpoint)
	}
	require.Equal(t, []string{"we_all", "we_settled", "we_star"}, to)
	evs, err = pub.PublishToEach(ctx, all[1:2], "order.settled", json.RawMessage(`{}`)) // we_created only
	require.NoError(t, err)
	require.Empty(t, evs, "no endpoint subscribed: nothing published")

	// Naming one endpoint: an unsubscribed type is refused, and takes no place in its stream.
	_, err = pub.Publish(ctx, "we_created", "order.settled", json.RawMessage(`{}`))
	require.ErrorIs(t, err, producer.ErrNotSubscribed)
	ep, err := eps.Lookup(ctx, "we_created")
	require.NoError(t, err)
	_, err = pub.PublishTo(ctx, ep, "order.settled", json.RawMessage(`{}`))
	require.ErrorIs(t, err, producer.ErrNotSubscribed)
	ev, err := pub.Publish(ctx, "we_created", "order.created", json.RawMessage(`{}`))
	require.NoError(t, err)
	require.Equal(t, uint64(4), ev.Sequence)

	// An invalid event is refused before any filtering, even when nobody is subscribed.
	_, err = pub.PublishToEach(ctx, all[1:2], "order.settled", json.RawMessage(`{`))
	require.ErrorIs(t, err, producer.ErrInvalidEvent)
}

// lifecycleRig is an endpoint registry, a log and a dispatcher on an injected clock, delivering to a
// sink, with a range handler that answers the endpoint's owner.
type lifecycleRig struct {
	clk  *clock
	eps  *memstore.Endpoints
	log  *memstore.Log
	pub  *producer.Publisher
	d    *producer.Dispatcher
	sink *sink
	rh   *producer.RangeHandler
}

func newLifecycleRig(t *testing.T, ep producer.Endpoint) *lifecycleRig {
	t.Helper()
	r := &lifecycleRig{clk: newClock(), log: memstore.NewLog()}
	var srv *httptest.Server
	r.sink, srv = startSink(t, nil)
	ep.URL = srv.URL + "/" + ep.ID
	r.eps = mustEndpoints(t, ep)
	r.pub = mustPublisher(t, r.log, r.eps, &producer.PublisherOptions{Now: r.clk.Now})
	r.d = mustDispatcher(t, r.log, r.eps, &producer.DispatcherOptions{Now: r.clk.Now})
	rh, err := producer.NewRangeHandler(r.log, r.eps, conventions.CallerFunc(func(*http.Request) (string, error) { return ep.Owner, nil }),
		&producer.RangeHandlerOptions{Now: r.clk.Now, EndpointID: func(*http.Request) string { return ep.ID }})
	require.NoError(t, err)
	r.rh = rh
	return r
}

func (r *lifecycleRig) publish(t *testing.T, n int) {
	t.Helper()
	for range n {
		_, err := r.pub.PublishToOwner(context.Background(), "lic_1", "order.created", json.RawMessage(`{}`))
		require.NoError(t, err)
	}
}

func (r *lifecycleRig) deliver(t *testing.T) producer.Stats {
	t.Helper()
	st, err := r.d.DeliverDue(context.Background())
	require.NoError(t, err)
	return st
}

func (r *lifecycleRig) update(t *testing.T, change func(*producer.Endpoint)) {
	t.Helper()
	_, err := r.eps.UpdateEndpoint(context.Background(), "we_a", func(ep *producer.Endpoint) error { change(ep); return nil })
	require.NoError(t, err)
}

// rangeOf fetches events from..to through the range handler and returns the page's sequences and
// its signature header.
func (r *lifecycleRig) rangeOf(t *testing.T, from, to string) ([]uint64, string, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	r.rh.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/webhook_endpoints/we_a/events?from="+from+"&to="+to, nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var page struct{ Data []webhook.Event }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page))
	var seqs []uint64
	for _, ev := range page.Data {
		seqs = append(seqs, ev.Sequence)
	}
	return seqs, rec.Header().Get(webhook.HeaderSignature), rec.Body.Bytes()
}

// TestDisabledEndpointGetsNothingAndRecoversByRange: while disabled, the endpoint's events are numbered
// and none is pushed (each is abandoned, unsent, in the history); enabled again, the next event
// arrives with a sequence past the gap, and the paused events are served by range.
func TestDisabledEndpointGetsNothingAndRecoversByRange(t *testing.T) {
	r := newLifecycleRig(t, producer.Endpoint{ID: "we_a", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	r.publish(t, 2)
	require.Equal(t, producer.Stats{Claimed: 2, Delivered: 2}, r.deliver(t))

	r.update(t, func(ep *producer.Endpoint) { ep.DisabledReason, ep.DisabledAt = "manual", r.clk.Now() })
	r.publish(t, 3)
	require.Equal(t, producer.Stats{Claimed: 3, Abandoned: 3}, r.deliver(t))
	require.Equal(t, []uint64{1, 2}, r.sink.seqs(), "nothing pushed while disabled")
	st := status(t, r.log, "we_a", 4)
	require.Equal(t, driver.Abandoned, st.State)
	require.Equal(t, "endpoint disabled (manual)", st.LastError)
	atts, _, err := r.log.Attempts(context.Background(), driver.AttemptQuery{Stream: "we_a", Sequence: 4, Limit: 10})
	require.NoError(t, err)
	require.Len(t, atts, 1)
	require.Equal(t, producer.ClassEndpointDisabled, atts[0].Class)
	require.Zero(t, atts[0].StatusCode, "no request was made")

	r.clk.Advance(time.Hour)
	r.update(t, func(ep *producer.Endpoint) { ep.DisabledReason, ep.DisabledAt = "", time.Time{} })
	require.Equal(t, producer.Stats{}, r.deliver(t), "enabling floods the endpoint with nothing")
	r.publish(t, 1)
	require.Equal(t, producer.Stats{Claimed: 1, Delivered: 1}, r.deliver(t))
	require.Equal(t, []uint64{1, 2, 6}, r.sink.seqs(), "the next delivery shows the gap 3–5")
	seqs, _, _ := r.rangeOf(t, "3", "5")
	require.Equal(t, []uint64{3, 4, 5}, seqs, "the paused events are recovered by range")
}

// TestDeletedEndpointRangeStillServed: after the delete, nothing is delivered (pending deliveries are
// abandoned unsent), nothing more is published to it, and its stream is still served, signed, by range.
func TestDeletedEndpointRangeStillServed(t *testing.T) {
	sec := webhook.NewSecret()
	r := newLifecycleRig(t, producer.Endpoint{ID: "we_a", Owner: "lic_1", Secrets: []string{sec}})
	r.publish(t, 3)
	r.update(t, func(ep *producer.Endpoint) { ep.DeletedAt = r.clk.Now() })
	require.Equal(t, producer.Stats{Claimed: 3, Abandoned: 3}, r.deliver(t))
	require.Empty(t, r.sink.deliveries())
	require.Equal(t, "endpoint deleted", status(t, r.log, "we_a", 1).LastError)

	evs, err := r.pub.PublishToOwner(context.Background(), "lic_1", "order.created", json.RawMessage(`{}`))
	require.NoError(t, err)
	require.Empty(t, evs, "a deleted endpoint gets no event")
	_, err = r.pub.Publish(context.Background(), "we_a", "order.created", json.RawMessage(`{}`))
	require.ErrorIs(t, err, producer.ErrUnknownEndpoint)

	seqs, sig, body := r.rangeOf(t, "1", "10")
	require.Equal(t, []uint64{1, 2, 3}, seqs)
	checkSignature(t, sig, body, r.clk.Now(), sec)
}

// TestSecretRollSignsWithBothUntilExpiry: after a roll, every delivery and range page carries a v1 for
// the new secret and one for the old until the old one expires, then the new one's only; an
// independent receiver holding only the old secret verifies until then and not after.
func TestSecretRollSignsWithBothUntilExpiry(t *testing.T) {
	oldSec, newSec := webhook.NewSecret(), webhook.NewSecret()
	r := newLifecycleRig(t, producer.Endpoint{ID: "we_a", Owner: "lic_1", Secrets: []string{oldSec}})
	expiry := r.clk.Now().Add(24 * time.Hour)
	r.update(t, func(ep *producer.Endpoint) {
		ep.Secrets = []string{newSec, ep.Secrets[0]}
		ep.OldSecretsExpire = expiry
	})
	r.publish(t, 1)
	r.deliver(t)
	got := r.sink.deliveries()
	require.Len(t, got, 1)
	checkSignature(t, got[0].Signature, got[0].Body, r.clk.Now(), newSec, oldSec)
	_, sig, body := r.rangeOf(t, "1", "1")
	checkSignature(t, sig, body, r.clk.Now(), newSec, oldSec)
	oldOnly := verifies(t, oldSec, got[0], r.clk.Now())
	require.True(t, oldOnly, "a consumer with the old secret keeps verifying during the overlap")

	r.clk.Set(expiry)
	r.publish(t, 1)
	r.deliver(t)
	got = r.sink.deliveries()
	require.Len(t, got, 2)
	checkSignature(t, got[1].Signature, got[1].Body, r.clk.Now(), newSec)
	_, sig, body = r.rangeOf(t, "1", "2")
	checkSignature(t, sig, body, r.clk.Now(), newSec)
	require.False(t, verifies(t, oldSec, got[1], r.clk.Now()), "the old secret verifies nothing after its expiry")
	require.True(t, verifies(t, newSec, got[1], r.clk.Now()))
}

// verifies reports whether a Verifier holding only secret accepts the delivery at now.
func verifies(t *testing.T, secret string, d delivery, now time.Time) bool {
	t.Helper()
	v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return now }})
	require.NoError(t, err)
	return v.Verify(d.Signature, d.Body) == nil
}

// TestEndpointHeadersAreSent: the endpoint's headers go with every delivery, beside the producer's
// own, which they cannot replace (the registry refuses such names).
func TestEndpointHeadersAreSent(t *testing.T) {
	r := newLifecycleRig(t, producer.Endpoint{ID: "we_a", Owner: "lic_1", Secrets: []string{webhook.NewSecret()},
		Headers: map[string]string{"X-Tenant": "eu-1", "x-route": "a b"}})
	r.publish(t, 1)
	r.deliver(t)
	got := r.sink.deliveries()
	require.Len(t, got, 1)
	require.Equal(t, "eu-1", got[0].Header.Get("X-Tenant"))
	require.Equal(t, "a b", got[0].Header.Get("X-Route"))
	require.Equal(t, "application/json", got[0].Header.Get("Content-Type"))

	for _, name := range []string{"X-SVC-Signature", "x-svc-sequence", "Content-Type", "Host", "Authorization", "User-Agent",
		"Transfer-Encoding", "Traceparent", "Cookie"} {
		_, err := r.eps.UpdateEndpoint(context.Background(), "we_a", func(ep *producer.Endpoint) error {
			ep.Headers = map[string]string{name: "x"}
			return nil
		})
		require.ErrorIs(t, err, producer.ErrInvalidEndpoint, name)
	}
}

// TestEndpointValidateSettings: the settings' bounds, each refusal naming where it is and never a value.
func TestEndpointValidateSettings(t *testing.T) {
	base := producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{"whsec_x"}}
	require.NoError(t, base.Validate())
	many := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m["k"+strings.Repeat("x", i)] = "v"
		}
		return m
	}
	for name, tc := range map[string]struct {
		edit func(*producer.Endpoint)
		want string
	}{
		"long description":   {func(e *producer.Endpoint) { e.Description = strings.Repeat("é", 129) }, "/description"},
		"21 metadata pairs":  {func(e *producer.Endpoint) { e.Metadata = many(21) }, "/metadata"},
		"long metadata key":  {func(e *producer.Endpoint) { e.Metadata = map[string]string{strings.Repeat("k", 41): "v"} }, "/metadata/kkk"},
		"long metadata val":  {func(e *producer.Endpoint) { e.Metadata = map[string]string{"a/b": strings.Repeat("v", 501)} }, "/metadata/a~1b"},
		"11 headers":         {func(e *producer.Endpoint) { e.Headers = many(11) }, "/headers"},
		"headers over 1 KiB": {func(e *producer.Endpoint) { e.Headers = map[string]string{"X-A": strings.Repeat("v", 1022)} }, "/headers"},
		"header name":        {func(e *producer.Endpoint) { e.Headers = map[string]string{"X A": "v"} }, "/headers/X A"},
		"header value CRLF":  {func(e *producer.Endpoint) { e.Headers = map[string]string{"X-A": "v\r\nX-B: w"} }, "/headers/X-A"},
		"header twice":       {func(e *producer.Endpoint) { e.Headers = map[string]string{"X-A": "v", "x-a": "w"} }, "/headers/x-a"},
		"wildcard and type":  {func(e *producer.Endpoint) { e.EnabledEvents = []string{"order.created", "*"} }, "/enabled_events/1"},
		"empty type":         {func(e *producer.Endpoint) { e.EnabledEvents = []string{""} }, "/enabled_events/0"},
		"type twice":         {func(e *producer.Endpoint) { e.EnabledEvents = []string{"a", "b", "a"} }, "/enabled_events/2"},
		"disabled no time":   {func(e *producer.Endpoint) { e.DisabledReason = "manual" }, "/disabled_at"},
	} {
		ep := base.Clone()
		tc.edit(&ep)
		err := ep.Validate()
		require.ErrorIs(t, err, producer.ErrInvalidEndpoint, name)
		require.Contains(t, err.Error(), tc.want, name)
		require.NotContains(t, err.Error(), "vvvv", "%s: a refusal never quotes a value", name)
	}
	ok := base.Clone()
	ok.Description = strings.Repeat("é", 128)
	ok.Metadata = many(20)
	ok.Headers = map[string]string{"X-Tenant": "eu-1", "Idempotency-Key": "k", "Accept": "*/*"}
	ok.EnabledEvents = []string{"*"}
	require.NoError(t, ok.Validate())
}

// TestEndpointSubscribedAndSigningSecrets: the two readings of an endpoint's settings.
func TestEndpointSubscribedAndSigningSecrets(t *testing.T) {
	ep := producer.Endpoint{EnabledEvents: []string{"a", "b"}}
	require.True(t, ep.Subscribed("a"))
	require.False(t, ep.Subscribed("c"))
	require.True(t, producer.Endpoint{}.Subscribed("c"))
	require.True(t, producer.Endpoint{EnabledEvents: []string{"*"}}.Subscribed("c"))

	ep = producer.Endpoint{Secrets: []string{"new", "old"}}
	require.Equal(t, []string{"new", "old"}, ep.SigningSecrets(t0), "no expiry: both sign")
	ep.OldSecretsExpire = t0.Add(time.Second)
	require.Equal(t, []string{"new", "old"}, ep.SigningSecrets(t0))
	require.Equal(t, []string{"new"}, ep.SigningSecrets(t0.Add(time.Second)))
	require.True(t, slices.Equal([]string{"new"}, producer.Endpoint{Secrets: []string{"new"}, OldSecretsExpire: t0}.SigningSecrets(t0)))
}
