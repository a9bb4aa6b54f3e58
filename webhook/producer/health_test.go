package producer_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// hit is one request an in-memory endpoint received.
type hit struct {
	host string
	at   time.Time
	seq  uint64
	ev   webhook.Event
	body []byte
}

// endpointsNet answers delivery requests in memory, per host, with the answer its function picks,
// and records every request with the (fake) time it arrived.
type endpointsNet struct {
	mu     sync.Mutex
	hits   []hit
	answer func(host string, seq uint64, n int) (int, http.Header) // n: earlier requests for host and seq
}

func (e *endpointsNet) client() *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		body, _ := io.ReadAll(r.Body)
		var ev webhook.Event
		_ = json.Unmarshal(body, &ev)
		e.mu.Lock()
		n := 0
		for _, h := range e.hits {
			if h.host == r.URL.Host && h.seq == ev.Sequence {
				n++
			}
		}
		e.hits = append(e.hits, hit{host: r.URL.Host, at: time.Now(), seq: ev.Sequence, ev: ev, body: body})
		e.mu.Unlock()
		status, header := http.StatusOK, http.Header{}
		if e.answer != nil {
			status, header = e.answer(r.URL.Host, ev.Sequence, n)
		}
		resp := respond(r, status)
		if header != nil {
			resp.Header = header
		}
		return resp, nil
	})}
}

func (e *endpointsNet) to(host string) []hit {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []hit
	for _, h := range e.hits {
		if h.host == host {
			out = append(out, h)
		}
	}
	return out
}

func seqsOf(hs []hit) []uint64 {
	out := make([]uint64, len(hs))
	for i, h := range hs {
		out[i] = h.seq
	}
	return out
}

// runDispatchers runs ds until the returned stop is called, which waits for them.
func runDispatchers(ds ...*producer.Dispatcher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Go(func() { _ = d.Run(ctx) })
	}
	return func() { cancel(); wg.Wait() }
}

func endpointAt(id, host, owner string) producer.Endpoint {
	return producer.Endpoint{ID: id, URL: "https://" + host + "/hook", Owner: owner, Secrets: []string{webhook.NewSecret()}}
}

// TestDispatcherHonoursRetryAfter: a 429 or 503 with Retry-After (seconds or an HTTP-date) delays
// the failed delivery's next attempt at least that long, and holds back every other delivery of the
// endpoint, even one appended meanwhile; a Retry-After never shortens the schedule, is capped at
// MaxRetryAfter, and means nothing on another status.
func TestDispatcherHonoursRetryAfter(t *testing.T) {
	cases := []struct {
		name   string
		status int
		value  func(now time.Time) string
		want   time.Duration // from the first attempt to the second
		held   bool          // the endpoint's other deliveries wait as long
	}{
		{"429 seconds", http.StatusTooManyRequests, func(time.Time) string { return "120" }, 120 * time.Second, true},
		{"503 HTTP-date", http.StatusServiceUnavailable, func(now time.Time) string {
			return now.Add(150 * time.Second).UTC().Format(http.TimeFormat)
		}, 150 * time.Second, true},
		{"shorter than the schedule", http.StatusTooManyRequests, func(time.Time) string { return "5" }, time.Minute, false},
		{"capped", http.StatusTooManyRequests, func(time.Time) string { return "86400" }, 10 * time.Minute, true},
		{"not on a 500", http.StatusInternalServerError, func(time.Time) string { return "600" }, time.Minute, false},
		{"malformed", http.StatusTooManyRequests, func(time.Time) string { return "soon" }, time.Minute, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := &endpointsNet{answer: func(_ string, seq uint64, n int) (int, http.Header) {
					if seq == 1 && n == 0 {
						return c.status, http.Header{"Retry-After": {c.value(time.Now())}}
					}
					return http.StatusOK, nil
				}}
				eps := mustEndpoints(t, endpointAt("we_a", "a.example", "lic_1"))
				l := memstore.NewLog()
				start := time.Now()
				publishN(t, l, "we_a", 2, start)
				d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: net.client(), Jitter: -1,
					MaxRetryAfter: 10 * time.Minute})
				stop := runDispatchers(d)
				time.Sleep(30 * time.Second)
				publishN(t, l, "we_a", 1, time.Now()) // due now, but the endpoint is held
				d.Wake()
				time.Sleep(time.Hour)
				stop()

				hits := net.to("a.example")
				require.Len(t, hits, 4)
				var retried hit
				for _, h := range hits[1:] {
					if h.seq == 1 {
						retried = h
					}
				}
				require.Equal(t, c.want, retried.at.Sub(hits[0].at), "the second attempt")
				if c.held {
					require.Equal(t, []uint64{1, 1, 2, 3}, seqsOf(hits))
					for _, h := range hits[2:] {
						require.GreaterOrEqual(t, h.at.Sub(hits[0].at), c.want, "sequence %d waited too", h.seq)
					}
				}
			})
		})
	}
}

// TestDispatcherDisablesGoneEndpoint: a 410 disables the endpoint at once (disabled_reason gone); its
// owner's other endpoints that subscribe get webhook_endpoint.disabled, once; other owners get
// nothing; its events keep their numbers and are served by range; enabled again, it receives the
// next event.
func TestDispatcherDisablesGoneEndpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		net := &endpointsNet{answer: func(host string, _ uint64, _ int) (int, http.Header) {
			if host == "gone.example" {
				return http.StatusGone, nil
			}
			return http.StatusOK, nil
		}}
		watcher := endpointAt("we_watch", "watch.example", "lic_1")
		watcher.EnabledEvents = []string{producer.EventEndpointDisabled}
		orders := endpointAt("we_orders", "orders.example", "lic_1")
		orders.EnabledEvents = []string{"order.created"}
		eps := mustEndpoints(t, endpointAt("we_gone", "gone.example", "lic_1"), watcher, orders,
			endpointAt("we_other", "other.example", "lic_2"))
		l := memstore.NewLog()
		var told []producer.EndpointDisabledInfo
		var mu sync.Mutex
		hooks := &producer.Hooks{EndpointDisabled: func(_ context.Context, e producer.EndpointDisabledInfo) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, e)
		}}
		// Two replicas: the endpoint is disabled, and its owner told, once.
		d1 := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: net.client(), Hooks: hooks, APIVersion: "v1"})
		d2 := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: net.client(), Hooks: hooks, APIVersion: "v1"})
		pub := mustPublisher(t, l, eps, nil)
		for range 3 {
			_, err := pub.Publish(ctx, "we_gone", "order.created", json.RawMessage(`{}`))
			require.NoError(t, err)
		}
		stop := runDispatchers(d1, d2)
		time.Sleep(time.Minute)

		ep, err := eps.Lookup(ctx, "we_gone")
		require.NoError(t, err)
		require.Equal(t, producer.DisabledGone, ep.DisabledReason)
		require.Equal(t, []uint64{1}, seqsOf(net.to("gone.example")), "nothing after the 410")
		require.Equal(t, []producer.EndpointDisabledInfo{{Endpoint: "we_gone", Reason: producer.DisabledGone,
			StatusCode: http.StatusGone, Class: producer.ClassStatus}}, told)

		notices := net.to("watch.example")
		require.Len(t, notices, 1)
		require.Equal(t, producer.EventEndpointDisabled, notices[0].ev.Type)
		var data map[string]any
		require.NoError(t, json.Unmarshal(notices[0].ev.Data, &data))
		require.Equal(t, "gone", data["reason"])
		require.Nil(t, data["failing_since"])
		endpoint := data["endpoint"].(map[string]any)
		require.Equal(t, "we_gone", endpoint["id"])
		require.Equal(t, "disabled", endpoint["status"])
		require.NotContains(t, endpoint, "headers")
		require.NotContains(t, endpoint, "secret")
		lastErr := data["last_error"].(map[string]any)
		require.Equal(t, float64(410), lastErr["status_code"])
		require.Equal(t, float64(1), lastErr["sequence"])
		require.Empty(t, net.to("orders.example"), "not subscribed")
		require.Empty(t, net.to("other.example"), "another owner's")
		evs, _, err := l.Range(ctx, "we_gone", 1, 100, 100)
		require.NoError(t, err)
		require.Len(t, evs, 3, "no event of its own stream: the notice goes to the others")

		// A day later: still disabled, events still numbered.
		time.Sleep(24 * time.Hour)
		_, err = pub.Publish(ctx, "we_gone", "order.created", json.RawMessage(`{}`))
		require.NoError(t, err)
		time.Sleep(time.Minute)
		_, err = eps.UpdateEndpoint(ctx, "we_gone", func(e *producer.Endpoint) error {
			e.DisabledReason, e.DisabledAt, e.FailingSince = "", time.Time{}, time.Time{}
			return nil
		})
		require.NoError(t, err)
		net.mu.Lock()
		net.answer = nil
		net.mu.Unlock()
		ev5, err := pub.Publish(ctx, "we_gone", "order.created", json.RawMessage(`{}`))
		require.NoError(t, err)
		d1.Wake()
		time.Sleep(time.Minute)
		stop()
		require.Equal(t, []uint64{1, 5}, seqsOf(net.to("gone.example")), "enabled again: the next event, past the gap")
		require.Equal(t, uint64(5), ev5.Sequence)
		evs, _, err = l.Range(ctx, "we_gone", 1, 100, 100)
		require.NoError(t, err)
		require.Len(t, evs, 5, "nothing lost: the gap is served by range")
		require.Len(t, told, 1)
	})
}

// TestDispatcherDisablesFailingEndpoint: an endpoint failing with no success for DisableAfter is
// disabled (failing); a success within the period starts it over.
func TestDispatcherDisablesFailingEndpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		start := time.Now()
		up := false
		var mu sync.Mutex
		net := &endpointsNet{answer: func(host string, _ uint64, _ int) (int, http.Header) {
			mu.Lock()
			defer mu.Unlock()
			if host == "watch.example" || (host == "flaky.example" && up) {
				return http.StatusOK, nil
			}
			return http.StatusServiceUnavailable, nil
		}}
		eps := mustEndpoints(t, endpointAt("we_dead", "dead.example", "lic_1"), endpointAt("we_flaky", "flaky.example", "lic_1"),
			endpointAt("we_watch", "watch.example", "lic_1"))
		l := memstore.NewLog()
		publishN(t, l, "we_dead", 1, start)
		publishN(t, l, "we_flaky", 1, start)
		d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: net.client(), Jitter: -1,
			Schedule: producer.ExponentialSchedule(time.Minute, 10*time.Minute, 24*time.Hour), DisableAfter: time.Hour})
		stop := runDispatchers(d)
		defer stop()

		time.Sleep(time.Second)
		dead, err := eps.Lookup(ctx, "we_dead")
		require.NoError(t, err)
		require.Equal(t, start, dead.FailingSince, "the first failure starts the period")

		time.Sleep(50 * time.Minute)
		mu.Lock()
		up = true // the flaky one succeeds once…
		mu.Unlock()
		time.Sleep(10 * time.Minute)
		flaky, err := eps.Lookup(ctx, "we_flaky")
		require.NoError(t, err)
		require.True(t, flaky.FailingSince.IsZero(), "a success ends the period")
		mu.Lock()
		up = false // …and fails again
		mu.Unlock()
		publishN(t, l, "we_flaky", 1, time.Now())

		time.Sleep(10 * time.Minute) // past the hour for the dead one
		dead, err = eps.Lookup(ctx, "we_dead")
		require.NoError(t, err)
		require.Equal(t, producer.DisabledFailing, dead.DisabledReason)
		require.GreaterOrEqual(t, dead.DisabledAt.Sub(start), time.Hour)
		require.Less(t, dead.DisabledAt.Sub(start), time.Hour+11*time.Minute, "at the first failure past the hour")
		flaky, err = eps.Lookup(ctx, "we_flaky")
		require.NoError(t, err)
		require.Empty(t, flaky.DisabledReason, "its period started over")

		notices := net.to("watch.example")
		require.Len(t, notices, 1)
		var data struct {
			Reason       string `json:"reason"`
			FailingSince int64  `json:"failing_since"`
			LastError    struct {
				StatusCode int    `json:"status_code"`
				Reason     string `json:"reason"`
			} `json:"last_error"`
		}
		require.NoError(t, json.Unmarshal(notices[0].ev.Data, &data))
		require.Equal(t, "failing", data.Reason)
		require.Equal(t, start.Unix(), data.FailingSince)
		require.Equal(t, http.StatusServiceUnavailable, data.LastError.StatusCode)
		require.Equal(t, "status 503", data.LastError.Reason)

		// Disabled: no more requests to it.
		n := len(net.to("dead.example"))
		time.Sleep(3 * time.Hour)
		require.Len(t, net.to("dead.example"), n)
	})
}

// TestDispatcherRateLimitAcrossReplicas: an endpoint with a rate limit of 5 receives 1,000 events
// from two dispatchers at 5 a second (within 5 %), never more than 5 in any second, in order — also
// the events appended while it drains — while an unthrottled endpoint beside it is not slowed.
func TestDispatcherRateLimitAcrossReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := &endpointsNet{}
		slow := endpointAt("we_slow", "slow.example", "lic_1")
		slow.RateLimit = 5
		eps := mustEndpoints(t, slow, endpointAt("we_fast", "fast.example", "lic_1"))
		l := memstore.NewLog()
		start := time.Now()
		publishN(t, l, "we_slow", 500, start)
		publishN(t, l, "we_fast", 500, start)
		opts := &producer.DispatcherOptions{Client: net.client()}
		d1, d2 := mustDispatcher(t, l, eps, opts), mustDispatcher(t, l, eps, opts)
		stop := runDispatchers(d1, d2)
		for range 100 { // 500 more, 5 every second, while it drains
			time.Sleep(time.Second)
			publishN(t, l, "we_slow", 5, time.Now())
		}
		time.Sleep(10 * time.Minute)
		stop()

		hits := net.to("slow.example")
		require.Len(t, hits, 1000)
		want := make([]uint64, 1000)
		for i := range want {
			want[i] = uint64(i + 1)
		}
		require.Equal(t, want, seqsOf(hits), "in order, each once")
		gaps := map[time.Duration]int{}
		for i := 1; i < len(hits); i++ {
			gaps[hits[i].at.Sub(hits[i-1].at)]++
		}
		t.Logf("gaps: %v", gaps)
		took := hits[len(hits)-1].at.Sub(hits[0].at)
		rate := float64(len(hits)-1) / took.Seconds()
		require.InDelta(t, 5, rate, 0.25, "deliveries a second over %v", took)
		for i := 5; i < len(hits); i++ {
			require.GreaterOrEqual(t, hits[i].at.Sub(hits[i-5].at), time.Second, "six requests within a second at %d", i)
		}
		fast := net.to("fast.example")
		require.Len(t, fast, 500)
		require.Less(t, fast[len(fast)-1].at.Sub(start), 10*time.Second, "the unthrottled endpoint is not held back")
	})
}

// TestRateLimitValidated: a rate limit is 0 (none) or 1 to MaxRateLimit.
func TestRateLimitValidated(t *testing.T) {
	ep := endpointAt("we_a", "a.example", "lic_1")
	for _, n := range []int{0, 1, driver.MaxRateLimit} {
		ep.RateLimit = n
		require.NoError(t, ep.Validate(), n)
	}
	for _, n := range []int{-1, driver.MaxRateLimit + 1} {
		ep.RateLimit = n
		require.ErrorIs(t, ep.Validate(), producer.ErrInvalidEndpoint, n)
	}
}
