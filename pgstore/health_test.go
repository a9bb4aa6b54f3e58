package pgstore_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
)

// healthNet answers deliveries in memory by host and records them with the test clock's time.
type healthNet struct {
	clk    *pgtest.Clock
	answer func(host string) int

	mu   sync.Mutex
	hits map[string][]healthHit
}

type healthHit struct {
	at time.Time
	ev webhook.Event
}

func (n *healthNet) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	var ev webhook.Event
	_ = json.Unmarshal(body, &ev)
	n.mu.Lock()
	n.hits[r.URL.Host] = append(n.hits[r.URL.Host], healthHit{at: n.clk.Now(), ev: ev})
	n.mu.Unlock()
	return &http.Response{StatusCode: n.answer(r.URL.Host), Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

func (n *healthNet) to(host string) []healthHit {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]healthHit(nil), n.hits[host]...)
}

// TestDeliveryHealthOnPostgres runs two dispatchers, as replicas would, on an EventLog and an
// EndpointStore in PostgreSQL, stepping a test clock: a throttled endpoint receives its events at
// its rate and never faster, although either replica may claim it; a 410 disables its endpoint at
// once and a dead one is disabled once it has failed for DisableAfter, each time with one
// webhook_endpoint.disabled event to the owner's other endpoint.
func TestDeliveryHealthOnPostgres(t *testing.T) {
	ctx := context.Background()
	l1, pool, logOpts := newEventLog(t)
	epOpts := &pgstore.EndpointStoreOptions{Schema: logOpts.Schema}
	require.NoError(t, pgstore.Migrate(ctx, pool, epOpts))
	eps := must(pgstore.NewEndpointStore(pool, epOpts))
	l2 := must(pgstore.NewEventLog(fastCommitPool(t), logOpts))
	clk := pgtest.NewClock(evlogT0)
	net := &healthNet{clk: clk, hits: map[string][]healthHit{}, answer: func(host string) int {
		switch host {
		case "gone.example":
			return http.StatusGone
		case "dead.example":
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}}
	at := func(id, host string, rate int) producer.Endpoint {
		return producer.Endpoint{ID: id, URL: "https://" + host + "/hook", Owner: "lic_1", Secrets: []string{webhook.NewSecret()},
			RateLimit: rate}
	}
	for _, ep := range []producer.Endpoint{at("we_slow", "slow.example", 5), at("we_gone", "gone.example", 0),
		at("we_dead", "dead.example", 0), at("we_watch", "watch.example", 0)} {
		require.NoError(t, eps.CreateEndpoint(ctx, ep, 0))
	}
	opts := &producer.DispatcherOptions{Client: &http.Client{Transport: net}, Now: clk.Now, Jitter: -1,
		Schedule: producer.ExponentialSchedule(time.Minute, 10*time.Minute, 24*time.Hour), DisableAfter: time.Hour}
	d1, err := producer.NewDispatcher(l1, eps, opts)
	require.NoError(t, err)
	d2, err := producer.NewDispatcher(l2, eps, opts)
	require.NoError(t, err)
	pub := must(producer.NewPublisher(l1, eps, &producer.PublisherOptions{Now: clk.Now}))
	step := func(d time.Duration) {
		t.Helper()
		for _, dd := range []*producer.Dispatcher{d1, d2} {
			_, err := dd.DeliverDue(ctx)
			require.NoError(t, err)
		}
		clk.Advance(d)
	}

	// Throttled: 100 events at 5 a second, whichever replica claims.
	for range 100 {
		_, err := pub.Publish(ctx, "we_slow", "order.created", json.RawMessage(`{}`))
		require.NoError(t, err)
	}
	for i := 0; i < 1000 && len(net.to("slow.example")) < 100; i++ {
		step(50 * time.Millisecond)
	}
	slow := net.to("slow.example")
	require.Len(t, slow, 100)
	for i := range slow {
		require.Equal(t, uint64(i+1), slow[i].ev.Sequence, "in order")
		if i >= 5 {
			require.GreaterOrEqual(t, slow[i].at.Sub(slow[i-5].at), time.Second, "six within a second at %d", i)
		}
	}
	took := slow[99].at.Sub(slow[0].at)
	require.InDelta(t, 5, 99/took.Seconds(), 0.25, "deliveries a second over %v", took)

	// A 410 disables at once; a dead endpoint after an hour of failures.
	for _, id := range []string{"we_gone", "we_dead"} {
		_, err := pub.Publish(ctx, id, "order.created", json.RawMessage(`{}`))
		require.NoError(t, err)
	}
	step(time.Second)
	step(time.Second)
	gone := must(eps.Lookup(ctx, "we_gone"))
	require.Equal(t, producer.DisabledGone, gone.DisabledReason)
	dead := must(eps.Lookup(ctx, "we_dead"))
	require.Empty(t, dead.DisabledReason)
	require.False(t, dead.FailingSince.IsZero(), "failing since its first failure")
	for range 80 {
		step(time.Minute)
	}
	dead = must(eps.Lookup(ctx, "we_dead"))
	require.Equal(t, producer.DisabledFailing, dead.DisabledReason)
	require.GreaterOrEqual(t, dead.DisabledAt.Sub(dead.FailingSince), time.Hour)

	var reasons []string
	for _, h := range net.to("watch.example") {
		require.Equal(t, producer.EventEndpointDisabled, h.ev.Type)
		var data struct {
			Endpoint struct{ ID string }
			Reason   string
		}
		require.NoError(t, json.Unmarshal(h.ev.Data, &data))
		reasons = append(reasons, data.Endpoint.ID+":"+data.Reason)
	}
	require.Equal(t, []string{"we_gone:gone", "we_dead:failing"}, reasons, "each told once, to the other endpoint")
	require.Len(t, net.to("gone.example"), 1)
}
