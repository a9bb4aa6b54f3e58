package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// slowNet is an in-process network: each endpoint host answers after its own delay, and the test can
// see how many requests are in flight per licensee and when each event arrived.
type slowNet struct {
	delay func(host string) time.Duration
	owner func(host string) string

	mu       sync.Mutex
	inFlight map[string]int
	peak     map[string]int
	arrived  map[string][]time.Time // host → arrival times, in order
}

func newSlowNet(delay func(string) time.Duration, owner func(string) string) *slowNet {
	return &slowNet{delay: delay, owner: owner, inFlight: map[string]int{}, peak: map[string]int{}, arrived: map[string][]time.Time{}}
}

func (n *slowNet) RoundTrip(r *http.Request) (*http.Response, error) {
	host, owner := r.URL.Host, n.owner(r.URL.Host)
	n.mu.Lock()
	n.inFlight[owner]++
	n.peak[owner] = max(n.peak[owner], n.inFlight[owner])
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.inFlight[owner]--
		n.mu.Unlock()
	}()
	select {
	case <-time.After(n.delay(host)):
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	n.mu.Lock()
	n.arrived[host] = append(n.arrived[host], time.Now())
	n.mu.Unlock()
	return respond(r, http.StatusOK), nil
}

func (n *slowNet) arrivals(host string) []time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]time.Time(nil), n.arrived[host]...)
}

// A licensee whose 32 endpoints answer in 9.5 s must not hold up another licensee's deliveries: the
// first version delivered a batch per pass and waited for its slowest endpoint, raising the other
// licensee's latency from a poll interval to tens of seconds.
func TestSlowEndpointsDelayOnlyTheirOwnLicensee(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slow = 32
		nw := newSlowNet(func(host string) time.Duration {
			if strings.HasPrefix(host, "slow") {
				return 9500 * time.Millisecond
			}
			return 20 * time.Millisecond
		}, func(host string) string {
			if strings.HasPrefix(host, "slow") {
				return "lic_slow"
			}
			return "lic_fast"
		})
		var eps []producer.Endpoint
		l := memstore.NewLog()
		for i := range slow {
			id := fmt.Sprintf("we_slow%d", i)
			eps = append(eps, producer.Endpoint{ID: id, URL: fmt.Sprintf("https://slow%d.example/", i), Owner: "lic_slow",
				Secrets: []string{webhook.NewSecret()}})
			publishN(t, l, id, 5, time.Now())
		}
		eps = append(eps, producer.Endpoint{ID: "we_fast", URL: "https://fast.example/", Owner: "lic_fast",
			Secrets: []string{webhook.NewSecret()}})
		d := mustDispatcher(t, l, mustEndpoints(t, eps...), &producer.DispatcherOptions{
			Client: &http.Client{Transport: nw}, PollInterval: time.Second, PerOwner: 8})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()

		// While the slow licensee's deliveries are in flight, the fast licensee publishes every 3 s.
		var published []time.Time
		for range 10 {
			time.Sleep(3 * time.Second)
			published = append(published, time.Now())
			publishN(t, l, "we_fast", 1, time.Now())
		}
		time.Sleep(2 * time.Second)
		got := nw.arrivals("fast.example")
		require.Len(t, got, len(published))
		for i, at := range got {
			latency := at.Sub(published[i])
			require.LessOrEqual(t, latency, time.Second+100*time.Millisecond,
				"event %d of the fast licensee waited %s behind another licensee's slow endpoints", i+1, latency)
		}
		cancel()
		require.NoError(t, <-done)
		nw.mu.Lock()
		defer nw.mu.Unlock()
		require.Equal(t, 8, nw.peak["lic_slow"], "PerOwner bounds the slow licensee's requests in flight")
		require.Equal(t, 1, nw.peak["lic_fast"])
	})
}

// An endpoint with a backlog gets StreamBatch deliveries per claim and another claim right after, so a
// backlog neither fills every claim nor waits a poll interval between runs.
func TestBacklogDoesNotStarveOtherEndpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := newSlowNet(func(string) time.Duration { return 10 * time.Millisecond }, func(string) string { return "lic_1" })
		l := memstore.NewLog()
		publishN(t, l, "we_big", 500, time.Now().Add(-time.Hour)) // older, so due first
		publishN(t, l, "we_small", 1, time.Now())
		eps := mustEndpoints(t,
			producer.Endpoint{ID: "we_big", URL: "https://big.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}},
			producer.Endpoint{ID: "we_small", URL: "https://small.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
		d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: &http.Client{Transport: nw}, BatchSize: 100,
			PollInterval: time.Hour})
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		time.Sleep(10 * time.Second)
		cancel()
		require.NoError(t, <-done)
		small := nw.arrivals("small.example")
		require.Len(t, small, 1)
		require.LessOrEqual(t, small[0].Sub(start), 20*time.Millisecond, "the small endpoint is in the first claim")
		require.Len(t, nw.arrivals("big.example"), 500, "the backlog is claimed again after each run, not per poll interval")
	})
}

// flakyLog fails the first n outcome records, as a store that times out or drops the connection would.
type flakyLog struct {
	*memstore.Log
	mu    sync.Mutex
	fails int
	calls int
	stall time.Duration // the first call blocks this long (or until its context ends)
}

func (f *flakyLog) Delivered(ctx context.Context, l driver.Lease, a driver.Attempt) error {
	f.mu.Lock()
	f.calls++
	call, fail := f.calls, f.fails > 0
	if fail {
		f.fails--
	}
	f.mu.Unlock()
	if call == 1 && f.stall > 0 {
		select {
		case <-time.After(f.stall):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errors.New("connection reset by peer")
	}
	return f.Log.Delivered(ctx, l, a)
}

// A delivery the consumer acknowledged is recorded as delivered even when the store fails the first
// tries or stalls past a record's deadline: each record has its own deadline and is retried. The first
// version gave a whole batch one deadline and dropped the record, and the consumer got the event again.
func TestOutcomeRecordIsRetriedNotDropped(t *testing.T) {
	for name, fl := range map[string]*flakyLog{
		"failing": {fails: 4},
		"stalled": {stall: time.Hour, fails: 1},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fl.Log = memstore.NewLog()
				var hits atomic.Int64
				client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
					hits.Add(1)
					return respond(r, http.StatusNoContent), nil
				})}
				eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
				publishN(t, fl, "we_a", 2, time.Now())
				d := mustDispatcher(t, fl, eps, &producer.DispatcherOptions{Client: client})
				st, err := d.DeliverDue(context.Background())
				require.NoError(t, err)
				require.Equal(t, producer.Stats{Claimed: 2, Delivered: 2}, st)
				for seq := uint64(1); seq <= 2; seq++ {
					require.Equal(t, driver.Delivered, status(t, fl, "we_a", seq).State)
				}
				time.Sleep(24 * time.Hour)
				st, err = d.DeliverDue(context.Background())
				require.NoError(t, err)
				require.Zero(t, st.Claimed)
				require.Equal(t, int64(2), hits.Load(), "each event reached the consumer once")
			})
		})
	}
}

// countingSettler records the size of every Settle call.
type countingSettler struct {
	*memstore.Log
	gate  chan struct{}
	mu    sync.Mutex
	sizes []int
}

func (c *countingSettler) Settle(ctx context.Context, ss []driver.Settlement) []error {
	c.mu.Lock()
	first := len(c.sizes) == 0
	c.sizes = append(c.sizes, len(ss))
	c.mu.Unlock()
	if first {
		<-c.gate
	}
	return c.Log.Settle(ctx, ss)
}

// Outcomes ready at the same moment go to the store in one Settle call (one commit on PostgreSQL).
func TestOutcomesAreGroupCommitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const endpoints = 20
		cs := &countingSettler{Log: memstore.NewLog(), gate: make(chan struct{})}
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return respond(r, http.StatusOK), nil
		})}
		var eps []producer.Endpoint
		for i := range endpoints {
			id := fmt.Sprintf("we_%d", i)
			eps = append(eps, producer.Endpoint{ID: id, URL: "https://" + id + ".example/", Owner: fmt.Sprintf("lic_%d", i),
				Secrets: []string{webhook.NewSecret()}})
			publishN(t, cs, id, 1, time.Now())
		}
		d := mustDispatcher(t, cs, mustEndpoints(t, eps...), &producer.DispatcherOptions{Client: client})
		done := make(chan producer.Stats, 1)
		go func() {
			st, err := d.DeliverDue(context.Background())
			require.NoError(t, err)
			done <- st
		}()
		synctest.Wait() // the first Settle holds; every other worker has queued its outcome behind it
		close(cs.gate)
		st := <-done
		require.Equal(t, endpoints, st.Delivered)
		require.Equal(t, []int{1, endpoints - 1}, cs.sizes)
		for i := range endpoints {
			require.Equal(t, driver.Delivered, status(t, cs, fmt.Sprintf("we_%d", i), 1).State)
		}
	})
}

// The default client refuses private addresses after resolution: a loopback "internal service"
// registered as an endpoint receives nothing, and the attempt says why.
func TestDefaultClientRefusesLoopback(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	l := memstore.NewLog()
	publishN(t, l, "we_a", 1, t0)
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: srv.URL + "/internal", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	d, err := producer.NewDispatcher(l, eps, &producer.DispatcherOptions{Now: newClock().Now})
	require.NoError(t, err)
	st, err := d.DeliverDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, st.Failed)
	require.Zero(t, hits.Load())
	got, _, err := l.Attempts(context.Background(), driver.AttemptQuery{Stream: "we_a", Limit: 10})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, producer.ClassBlockedAddress, got[0].Class)
	require.Equal(t, "request refused: blocked address (loopback)", got[0].Reason)
	require.NotContains(t, got[0].Reason, "127.0.0.1", "the address itself is not shown")
}

// Every attempt is in the history with its status, latency and the start of the answer; the envelope
// names its endpoint; the history API pages and filters it.
func TestDeliveryHistory(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	sk, srv := startSink(t, nil)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev webhook.Event
		require.NoError(t, json.Unmarshal(body, &ev))
		sk.mu.Lock()
		n := len(sk.got)
		sk.got = append(sk.got, delivery{Event: ev, Body: body})
		sk.mu.Unlock()
		clk.Advance(30 * time.Millisecond)
		if n == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":"busy"}`+strings.Repeat("x", 1000))
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	eps := mustEndpoints(t,
		producer.Endpoint{ID: "we_a", URL: srv.URL + "/a", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	l := memstore.NewLog()
	publishN(t, l, "we_a", 3, t0)
	// A client of the test's own, as for an endpoint on the public internet: through an allow-listed
	// guard, loopback's answers are recorded by status only (TestNoSnippetFromAllowListedDestination).
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now, Jitter: -1, Schedule: []time.Duration{time.Minute},
		Client: &http.Client{}})
	_, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	clk.Advance(time.Minute)
	_, err = d.DeliverDue(ctx)
	require.NoError(t, err)
	for _, g := range sk.deliveries() {
		require.Equal(t, "we_a", g.Event.Endpoint)
		require.Contains(t, string(g.Body), `"endpoint":"we_a"`)
	}

	licensee := func(r *http.Request) (string, error) { return r.Header.Get("X-Licensee"), nil }
	mux := http.NewServeMux()
	mux.Handle(producer.DeliveriesPattern("v1"), must(producer.NewDeliveriesHandler(l, eps, licensee, nil)))
	get := func(lic, target string) (int, map[string]any) {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		r.Header.Set("X-Licensee", lic)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		var body map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
		return w.Code, body
	}
	code, body := get("lic_1", "/v1/webhook_endpoints/we_a/deliveries")
	require.Equal(t, http.StatusOK, code)
	data := body["data"].([]any)
	require.Len(t, data, 4, "503 for #1, then #1, #2, #3")
	oldest := data[3].(map[string]any)
	require.Equal(t, "webhook_delivery_attempt", oldest["object"])
	require.Equal(t, "failed", oldest["outcome"])
	require.EqualValues(t, 503, oldest["status_code"])
	require.EqualValues(t, 30, oldest["latency_ms"])
	require.Equal(t, "http_status", oldest["error_class"])
	require.Equal(t, "status 503", oldest["error"])
	require.Len(t, oldest["response"], 256, "the response snippet's bound")
	require.True(t, strings.HasPrefix(oldest["response"].(string), `{"error":"busy"}`))
	require.EqualValues(t, t0.Add(30*time.Millisecond+time.Minute).Unix(), oldest["next_attempt_at"])
	newest := data[0].(map[string]any)
	require.Equal(t, "delivered", newest["outcome"])
	require.Equal(t, "ok", newest["response"])
	require.Nil(t, newest["error_class"])

	// Pages of two, filtered to event 1.
	code, body = get("lic_1", "/v1/webhook_endpoints/we_a/deliveries?sequence=1&limit=1")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, true, body["has_more"])
	page := body["data"].([]any)
	require.EqualValues(t, 2, page[0].(map[string]any)["attempt"])
	code, body = get("lic_1", "/v1/webhook_endpoints/we_a/deliveries?sequence=1&limit=1&starting_after="+page[0].(map[string]any)["id"].(string))
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, false, body["has_more"])
	require.EqualValues(t, 1, body["data"].([]any)[0].(map[string]any)["attempt"])
	_, body = get("lic_1", "/v1/webhook_endpoints/we_a/deliveries?outcome=failed")
	require.Len(t, body["data"], 1)

	// Another licensee sees nothing, and bad parameters are located.
	code, body = get("lic_2", "/v1/webhook_endpoints/we_a/deliveries")
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, producer.CodeEndpointNotFound, body["code"])
	code, body = get("lic_1", "/v1/webhook_endpoints/we_a/deliveries?outcome=lost&limit=0&starting_after=evt_1&sequence=x")
	require.Equal(t, http.StatusBadRequest, code)
	var located []string
	for _, e := range body["errors"].([]any) {
		m := e.(map[string]any)
		located = append(located, m["name"].(string)+":"+m["code"].(string))
	}
	require.ElementsMatch(t, []string{"outcome:invalid_outcome", "limit:out_of_range", "starting_after:invalid_cursor",
		"sequence:not_an_integer"}, located)
}
