package producer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
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

func TestDispatcherDeliversSignedEvents(t *testing.T) {
	ctx := context.Background()
	sk, srv := startSink(t, nil)
	oldSecret, newSecret := webhook.NewSecret(), webhook.NewSecret()
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: srv.URL + "/a", Owner: "lic_1", Secrets: []string{newSecret, oldSecret}})
	clk := newClock()
	l := memstore.NewLog()
	pub := mustPublisher(t, l, eps, &producer.PublisherOptions{Now: clk.Now})
	for i := range 3 {
		_, err := pub.Publish(ctx, "we_a", "order.created", map[string]int{"n": i})
		require.NoError(t, err)
	}
	clk.Advance(2 * time.Second) // signatures carry the delivery time, not the creation time
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now})
	st, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, producer.Stats{Claimed: 3, Delivered: 3}, st)

	got := sk.deliveries()
	require.Len(t, got, 3)
	for i, dl := range got {
		seq := uint64(i + 1)
		require.Equal(t, "/a", dl.Endpoint)
		require.Equal(t, seq, dl.Event.Sequence, "in sequence order")
		require.Equal(t, strconv.FormatUint(seq, 10), dl.Header.Get(webhook.HeaderSequence), "header agrees with the body")
		require.Equal(t, "application/json", dl.Header.Get("Content-Type"))
		require.Equal(t, producer.DefaultUserAgent, dl.Header.Get("User-Agent"))
		require.Equal(t, "order.created", dl.Event.Type)
		require.Equal(t, t0.Unix(), dl.Event.Created)
		require.Equal(t, "v1", dl.Event.APIVersion)
		require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i), string(dl.Event.Data))
		require.Regexp(t, `^evt_[a-z2-7]{26}$`, dl.Event.ID)
		// During a rotation both secrets sign, so the consumer may hold either.
		checkSignature(t, dl.Signature, dl.Body, t0.Add(2*time.Second), newSecret, oldSecret)
		s := status(t, l, "we_a", seq)
		require.Equal(t, driver.Delivered, s.State)
		require.True(t, s.DeliveredAt.Equal(t0.Add(2*time.Second)))
	}
	st, err = d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Claimed, "delivered events are not sent again")
	require.Len(t, sk.deliveries(), 3)
}

func TestDispatcherSuccessStatuses(t *testing.T) {
	for _, tc := range []struct {
		status int
		ok     bool
	}{
		{200, true}, {201, true}, {202, true}, {204, true}, {299, true},
		{100 + 1, false}, {301, false}, {302, false}, {304, false}, {400, false}, {401, false},
		{404, false}, {410, false}, {429, false}, {500, false}, {503, false},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			var followed atomic.Bool
			mux := http.NewServeMux()
			mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
				if tc.status >= 300 && tc.status < 400 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(tc.status)
			})
			mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) { followed.Store(true) })
			_, srv := startSink(t, nil)
			srv.Config.Handler = mux
			eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: srv.URL + "/hook", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
			l := memstore.NewLog()
			publishN(t, l, "we_a", 1, t0)
			clk := newClock()
			d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now, Jitter: -1})
			st, err := d.DeliverDue(context.Background())
			require.NoError(t, err)
			s := status(t, l, "we_a", 1)
			if tc.ok {
				require.Equal(t, 1, st.Delivered)
				require.Equal(t, driver.Delivered, s.State)
				return
			}
			require.Equal(t, 1, st.Failed)
			require.Equal(t, driver.Pending, s.State)
			require.Equal(t, 1, s.Attempts)
			require.Equal(t, "status "+strconv.Itoa(tc.status), s.LastError)
			require.True(t, s.NextAttempt.Equal(t0.Add(time.Minute)), "first retry after the schedule's first delay")
			require.False(t, followed.Load(), "redirects are not followed: a 3xx is a failed attempt")
		})
	}
}

func TestDispatcherRetriesOnSchedule(t *testing.T) {
	ctx := context.Background()
	sk, srv := startSink(t, func(ev webhook.Event, n int) int {
		if n < 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: srv.URL, Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	l := memstore.NewLog()
	publishN(t, l, "we_a", 1, t0)
	clk := newClock()
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now, Jitter: -1,
		Schedule: []time.Duration{time.Minute, 5 * time.Minute}})

	pass := func() producer.Stats {
		st, err := d.DeliverDue(ctx)
		require.NoError(t, err)
		return st
	}
	require.Equal(t, producer.Stats{Claimed: 1, Failed: 1}, pass())
	require.True(t, status(t, l, "we_a", 1).NextAttempt.Equal(t0.Add(time.Minute)))

	clk.Advance(59 * time.Second)
	require.Equal(t, producer.Stats{}, pass(), "not before the backoff ends")
	clk.Advance(time.Second)
	require.Equal(t, producer.Stats{Claimed: 1, Failed: 1}, pass())
	s := status(t, l, "we_a", 1)
	require.Equal(t, 2, s.Attempts)
	require.True(t, s.NextAttempt.Equal(t0.Add(6*time.Minute)), "second delay: 5 minutes after the second attempt, got %v", s.NextAttempt)

	clk.Set(t0.Add(6 * time.Minute))
	require.Equal(t, producer.Stats{Claimed: 1, Delivered: 1}, pass())
	require.Equal(t, driver.Delivered, status(t, l, "we_a", 1).State)
	require.Len(t, sk.deliveries(), 3)
}

func TestDispatcherAbandonsAfterSchedule(t *testing.T) {
	ctx := context.Background()
	sk, srv := startSink(t, func(webhook.Event, int) int { return http.StatusInternalServerError })
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: srv.URL, Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	l := memstore.NewLog()
	publishN(t, l, "we_a", 1, t0)
	clk := newClock()
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now, Jitter: -1,
		Schedule: []time.Duration{time.Second, 2 * time.Second}})
	var total producer.Stats
	for range 10 {
		st, err := d.DeliverDue(ctx)
		require.NoError(t, err)
		total.Claimed += st.Claimed
		total.Failed += st.Failed
		total.Abandoned += st.Abandoned
		clk.Advance(time.Second)
	}
	require.Equal(t, producer.Stats{Claimed: 3, Failed: 2, Abandoned: 1}, total, "1 attempt + 2 retries")
	s := status(t, l, "we_a", 1)
	require.Equal(t, driver.Abandoned, s.State)
	require.Equal(t, 3, s.Attempts)
	require.Len(t, sk.deliveries(), 3)
}

func TestDispatcherJitter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		jitter float64
		rand   float64
		want   time.Duration
	}{
		{"default jitter low end", 0, 0, 80 * time.Second},
		{"default jitter middle", 0, 0.5, 100 * time.Second},
		{"default jitter high end", 0, 0.999999, 120 * time.Second},
		{"half jitter", 0.5, 0, 50 * time.Second},
		{"no jitter", -1, 0, 100 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := startSink(t, func(webhook.Event, int) int { return http.StatusBadGateway })
			eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: srv.URL, Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
			l := memstore.NewLog()
			publishN(t, l, "we_a", 1, t0)
			d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: newClock().Now, Jitter: tc.jitter,
				Rand: func() float64 { return tc.rand }, Schedule: []time.Duration{100 * time.Second}})
			_, err := d.DeliverDue(context.Background())
			require.NoError(t, err)
			got := status(t, l, "we_a", 1).NextAttempt.Sub(t0)
			require.InDelta(t, float64(tc.want), float64(got), float64(time.Millisecond))
		})
	}
}

func TestDispatcherKeepsOrderBehindAFailure(t *testing.T) {
	ctx := context.Background()
	sk, srv := startSink(t, func(ev webhook.Event, n int) int {
		if ev.Sequence == 2 && n == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: srv.URL, Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	l := memstore.NewLog()
	publishN(t, l, "we_a", 4, t0)
	clk := newClock()
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now, Jitter: -1, Schedule: []time.Duration{time.Minute}})

	st, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, producer.Stats{Claimed: 4, Delivered: 1, Failed: 1, Released: 2}, st)
	require.Equal(t, []uint64{1, 2}, sk.seqs(), "3 and 4 wait behind the failed 2")
	for _, seq := range []uint64{3, 4} {
		s := status(t, l, "we_a", seq)
		require.Zero(t, s.Attempts, "waiting is not an attempt")
		require.True(t, s.NextAttempt.Equal(t0.Add(time.Minute)), "due with 2's retry")
	}
	clk.Advance(time.Minute)
	st, err = d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, producer.Stats{Claimed: 3, Delivered: 3}, st)
	require.Equal(t, []uint64{1, 2, 2, 3, 4}, sk.seqs())
}

func TestDispatcherDeliversEndpointsInParallel(t *testing.T) {
	ctx := context.Background()
	// Each endpoint's first request waits until every endpoint has one in flight: with fewer workers
	// than endpoints this would deadlock, so passing proves the endpoints are served concurrently.
	const endpoints = 4
	var arrived sync.WaitGroup
	arrived.Add(endpoints)
	release := make(chan struct{})
	go func() { arrived.Wait(); close(release) }()
	var first sync.Map
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if _, loaded := first.LoadOrStore(r.URL.Path, true); !loaded {
			arrived.Done()
			<-release
		}
	})
	_, srv := startSink(t, nil)
	srv.Config.Handler = mux
	var eps []producer.Endpoint
	l := memstore.NewLog()
	for i := range endpoints {
		id := fmt.Sprintf("we_%d", i)
		eps = append(eps, producer.Endpoint{ID: id, URL: srv.URL + "/" + id, Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
		publishN(t, l, id, 3, t0)
	}
	d := mustDispatcher(t, l, mustEndpoints(t, eps...), &producer.DispatcherOptions{Now: newClock().Now, Workers: endpoints})
	st, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, producer.Stats{Claimed: 12, Delivered: 12}, st)
}

func TestDispatcherRender(t *testing.T) {
	ctx := context.Background()
	sk, srv := startSink(t, nil)
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: srv.URL, Owner: "lic_1", APIVersion: "2025-01-01",
		Secrets: []string{webhook.NewSecret()}})
	l := memstore.NewLog()
	publishN(t, l, "we_a", 2, t0)
	fail := true
	render := func(_ context.Context, ep producer.Endpoint, ev webhook.Event) (webhook.Event, error) {
		if ev.Sequence == 2 && fail {
			return webhook.Event{}, errors.New("no transform for this event")
		}
		ev.APIVersion = ep.APIVersion
		ev.Data = json.RawMessage(`{"rendered_for":"` + ep.APIVersion + `"}`)
		ev.Sequence, ev.ID = 999, "evt_forged" // a renderer cannot change what ordering depends on
		return ev, nil
	}
	clk := newClock()
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now, Render: render, Jitter: -1})
	st, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, producer.Stats{Claimed: 2, Delivered: 1, Failed: 1}, st)
	got := sk.deliveries()
	require.Len(t, got, 1, "an event that cannot be rendered is not sent")
	require.Equal(t, "2025-01-01", got[0].Event.APIVersion)
	require.JSONEq(t, `{"rendered_for":"2025-01-01"}`, string(got[0].Event.Data))
	require.Equal(t, uint64(1), got[0].Event.Sequence)
	require.Equal(t, "1", got[0].Header.Get(webhook.HeaderSequence))
	require.NotEqual(t, "evt_forged", got[0].Event.ID)
	require.Equal(t, "render failed", status(t, l, "we_a", 2).LastError)

	fail = false
	clk.Advance(time.Hour)
	_, err = d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2}, sk.seqs(), "retried once the renderer works")
}

func TestDispatcherEndpointIDInRequestContext(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[string]string{}
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		id, ok := producer.EndpointIDFromContext(r.Context())
		if !ok {
			return nil, errors.New("no endpoint ID in the request context")
		}
		mu.Lock()
		seen[r.URL.Host] = id
		mu.Unlock()
		return respond(r, http.StatusOK), nil
	})}
	eps := mustEndpoints(t,
		producer.Endpoint{ID: "we_a", URL: "https://a.example/hook", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}},
		producer.Endpoint{ID: "we_b", URL: "https://b.example/hook", Owner: "lic_2", Secrets: []string{webhook.NewSecret()}})
	l := memstore.NewLog()
	publishN(t, l, "we_a", 1, t0)
	publishN(t, l, "we_b", 1, t0)
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: client, Now: newClock().Now})
	st, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.Delivered)
	require.Equal(t, map[string]string{"a.example": "we_a", "b.example": "we_b"}, seen)

	_, ok := producer.EndpointIDFromContext(ctx)
	require.False(t, ok)
	id, ok := producer.EndpointIDFromContext(producer.NewEndpointIDContext(ctx, "we_x"))
	require.True(t, ok)
	require.Equal(t, "we_x", id)
}

func TestDispatcherTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var took time.Duration
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			<-r.Context().Done() // an endpoint that never answers
			took = time.Since(start)
			return nil, r.Context().Err()
		})}
		eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/hook", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
		l := memstore.NewLog()
		publishN(t, l, "we_a", 1, start)
		d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: client, Timeout: 7 * time.Second, Jitter: -1})
		st, err := d.DeliverDue(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, st.Failed)
		require.Equal(t, 7*time.Second, took, "the request is cut at the per-request timeout")
		s := status(t, l, "we_a", 1)
		require.Equal(t, "timeout", s.LastError)
		require.True(t, s.NextAttempt.Equal(start.Add(7*time.Second+time.Minute)))
	})
}

func TestDispatcherTimeoutOverHTTP(t *testing.T) {
	// The same on a real socket: the server hangs until the client gives up.
	// The handler is the server's from the start: replacing a running server's Handler is a data race.
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the server notices a gone client only once the body is read
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: Close waits for the handler, which waits for this
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: srv.URL, Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	l := memstore.NewLog()
	publishN(t, l, "we_a", 1, t0)
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: newClock().Now, Timeout: 50 * time.Millisecond})
	st, err := d.DeliverDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, st.Failed)
	require.Equal(t, "timeout", status(t, l, "we_a", 1).LastError)
}

func TestDispatcherConnectionRefused(t *testing.T) {
	_, srv := startSink(t, nil)
	url := srv.URL + "/hook?token=s3cr3t-in-url"
	srv.Close() // nothing listens there any more
	var logs bytes.Buffer
	secret := webhook.NewSecret()
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: url, Owner: "lic_1", Secrets: []string{secret}})
	l := memstore.NewLog()
	publishN(t, l, "we_a", 1, t0)
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: newClock().Now,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	st, err := d.DeliverDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, st.Failed)
	s := status(t, l, "we_a", 1)
	require.Contains(t, s.LastError, "request failed")
	for _, text := range []string{s.LastError, logs.String()} {
		require.NotContains(t, text, "s3cr3t-in-url", "a URL's query may hold a token")
		require.NotContains(t, text, secret)
	}
	require.Contains(t, logs.String(), "delivery failed")
}

func TestDispatcherUnknownEndpointAbandons(t *testing.T) {
	l := memstore.NewLog()
	publishN(t, l, "we_gone", 2, t0)
	d := mustDispatcher(t, l, mustEndpoints(t), &producer.DispatcherOptions{Now: newClock().Now})
	st, err := d.DeliverDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, producer.Stats{Claimed: 2, Abandoned: 2}, st)
	s := status(t, l, "we_gone", 1)
	require.Equal(t, driver.Abandoned, s.State)
	require.Equal(t, "endpoint not found", s.LastError)
}

type failingEndpoints struct{}

func (failingEndpoints) Lookup(context.Context, string) (producer.Endpoint, error) {
	return producer.Endpoint{}, errors.New("registry unreachable")
}

func TestDispatcherEndpointLookupFailureRetries(t *testing.T) {
	l := memstore.NewLog()
	publishN(t, l, "we_a", 2, t0)
	d := mustDispatcher(t, l, failingEndpoints{}, &producer.DispatcherOptions{Now: newClock().Now,
		Schedule: []time.Duration{30 * time.Second}})
	st, err := d.DeliverDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, producer.Stats{Claimed: 2, Released: 2}, st)
	s := status(t, l, "we_a", 1)
	require.Equal(t, driver.Pending, s.State)
	require.Zero(t, s.Attempts, "our own outage is not the endpoint's failed attempt")
	require.True(t, s.NextAttempt.Equal(t0.Add(30*time.Second)))
}

func TestDispatcherReleasesWhenLeaseRunsOut(t *testing.T) {
	clk := newClock()
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		clk.Advance(1500 * time.Millisecond) // a slow endpoint
		return respond(r, http.StatusOK), nil
	})}
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	l := memstore.NewLog()
	publishN(t, l, "we_a", 3, t0)
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: client, Now: clk.Now,
		Timeout: time.Second, Lease: 3 * time.Second})
	st, err := d.DeliverDue(context.Background())
	require.NoError(t, err)
	// At t0+3s a third request could run until t0+4s, past the lease: it is handed back instead.
	require.Equal(t, producer.Stats{Claimed: 3, Delivered: 2, Released: 1}, st)
	s := status(t, l, "we_a", 3)
	require.Zero(t, s.Attempts)
	require.True(t, s.LeaseUntil.IsZero())
	st, err = d.DeliverDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, st.Delivered)
}

func TestDispatcherRunStopsCleanly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var delivered atomic.Int64
		inFlight := make(chan struct{})
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			var ev webhook.Event
			if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
				return nil, err
			}
			if ev.Sequence == 3 {
				close(inFlight)
				<-r.Context().Done() // the third hangs until the dispatcher stops
				return nil, r.Context().Err()
			}
			delivered.Add(1)
			return respond(r, http.StatusOK), nil
		})}
		eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
		l := memstore.NewLog()
		publishN(t, l, "we_a", 2, time.Now())
		d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: client, PollInterval: 5 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()

		synctest.Wait()
		require.Equal(t, int64(2), delivered.Load(), "the first pass runs at once")

		publishN(t, l, "we_a", 1, time.Now())
		<-inFlight // fake time jumps to the next poll, whose pass sends event 3
		cancel()
		require.NoError(t, <-done)
		s := status(t, l, "we_a", 3)
		require.Equal(t, driver.Pending, s.State)
		require.Zero(t, s.Attempts, "a request cut short by shutdown is not a failed attempt")
		require.True(t, s.LeaseUntil.IsZero(), "handed back at once for another replica")
	})
}

func TestDispatcherRunLoopsWhileBatchesAreFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var delivered atomic.Int64
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			delivered.Add(1)
			return respond(r, http.StatusOK), nil
		})}
		eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
		l := memstore.NewLog()
		publishN(t, l, "we_a", 25, time.Now())
		d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: client, BatchSize: 10, PollInterval: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		synctest.Wait()
		require.Equal(t, int64(25), delivered.Load(), "full batches are followed at once, without waiting a poll interval")
		cancel()
		require.NoError(t, <-done)
	})
}

func TestDispatchersShareAMemoryLog(t *testing.T) {
	ctx := context.Background()
	sk, srv := startSink(t, nil)
	var eps []producer.Endpoint
	l := memstore.NewLog()
	for i := range 5 {
		id := fmt.Sprintf("we_%d", i)
		eps = append(eps, producer.Endpoint{ID: id, URL: srv.URL + "/" + id, Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
		publishN(t, l, id, 40, t0)
	}
	reg := mustEndpoints(t, eps...)
	var wg sync.WaitGroup
	for range 4 {
		d := mustDispatcher(t, l, reg, &producer.DispatcherOptions{Now: newClock().Now, BatchSize: 7})
		wg.Go(func() {
			for {
				st, err := d.DeliverDue(ctx)
				if err != nil || st.Claimed == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	count := map[string]int{}
	for _, dl := range sk.deliveries() {
		count[fmt.Sprintf("%s#%d", dl.Endpoint, dl.Event.Sequence)]++
	}
	require.Len(t, count, 200)
	for k, n := range count {
		require.Equal(t, 1, n, "%s delivered %d times", k, n)
	}
}

func TestNewDispatcherValidates(t *testing.T) {
	l, eps := memstore.NewLog(), mustEndpoints(t)
	for _, tc := range []struct {
		name string
		opts producer.DispatcherOptions
	}{
		{"negative timeout", producer.DispatcherOptions{Timeout: -1}},
		{"negative batch", producer.DispatcherOptions{BatchSize: -1}},
		{"negative workers", producer.DispatcherOptions{Workers: -1}},
		{"negative poll", producer.DispatcherOptions{PollInterval: -1}},
		{"negative lease", producer.DispatcherOptions{Lease: -1}},
		{"lease not above timeout", producer.DispatcherOptions{Timeout: time.Minute, Lease: time.Minute}},
		{"jitter above 1", producer.DispatcherOptions{Jitter: 1.5}},
		{"zero delay", producer.DispatcherOptions{Schedule: []time.Duration{time.Second, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := producer.NewDispatcher(l, eps, &tc.opts)
			require.Error(t, err)
		})
	}
	_, err := producer.NewDispatcher(nil, eps, nil)
	require.Error(t, err)
	d, err := producer.NewDispatcher(l, eps, nil)
	require.NoError(t, err)
	require.NotNil(t, d)
}

func TestSchedules(t *testing.T) {
	def := producer.DefaultSchedule()
	var total time.Duration
	for i, d := range def {
		total += d
		if i > 0 && i < len(def)-1 {
			require.True(t, d == 2*def[i-1] || d == 12*time.Hour, "delay %d doubles up to the ceiling: %v", i, d)
		}
	}
	require.Equal(t, 72*time.Hour, total, "about three days in all")
	require.Equal(t, time.Minute, def[0])

	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 2 * time.Second},
		producer.ExponentialSchedule(time.Second, 4*time.Second, 13*time.Second))
	require.Equal(t, []time.Duration{5 * time.Second}, producer.ExponentialSchedule(10*time.Second, time.Minute, 5*time.Second))
	require.Nil(t, producer.ExponentialSchedule(0, time.Second, time.Second))
	require.Nil(t, producer.ExponentialSchedule(time.Second, time.Second, 0))
}

func TestDispatcherRetention(t *testing.T) {
	ctx := context.Background()
	l := memstore.NewLog()
	eps := mustEndpoints(t)
	publishN(t, l, "we_a", 2500, t0)                   // old
	publishN(t, l, "we_a", 3, t0.Add(20*24*time.Hour)) // recent
	clk := newClock()
	clk.Set(t0.Add(31 * 24 * time.Hour))

	keep := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now, Retention: -1})
	n, err := keep.Cleanup(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "negative retention: events are kept")

	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now})
	n, err = d.Cleanup(ctx)
	require.NoError(t, err)
	require.Equal(t, 2500, n, "everything older than 30 days, in batches")
	_, _, err = l.Range(ctx, "we_a", 1, 10, 10)
	var pe *driver.PrunedError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, uint64(2501), pe.FirstRetained)
	evs, _, err := l.Range(ctx, "we_a", 2501, 2503, 10)
	require.NoError(t, err)
	require.Len(t, evs, 3)
}

func TestDispatcherRunAppliesRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memstore.NewLog()
		publishN(t, l, "we_gone", 3, time.Now().Add(-40*24*time.Hour))
		d := mustDispatcher(t, l, mustEndpoints(t), nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		synctest.Wait()
		_, _, err := l.Range(context.Background(), "we_gone", 1, 3, 10)
		require.ErrorIs(t, err, driver.ErrPruned)
		cancel()
		require.NoError(t, <-done)
	})
}

func TestDispatcherEndpointLookupFailureWithoutRetries(t *testing.T) {
	// An empty Schedule means "no retries", not "the default": an endpoint registry outage must still
	// hand the deliveries back (without counting an attempt) instead of crashing a worker.
	l := memstore.NewLog()
	publishN(t, l, "we_a", 1, t0)
	d := mustDispatcher(t, l, failingEndpoints{}, &producer.DispatcherOptions{Now: newClock().Now,
		Schedule: []time.Duration{}, PollInterval: 5 * time.Second})
	st, err := d.DeliverDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, producer.Stats{Claimed: 1, Released: 1}, st)
	s := status(t, l, "we_a", 1)
	require.Equal(t, driver.Pending, s.State)
	require.Zero(t, s.Attempts)
	require.True(t, s.NextAttempt.Equal(t0.Add(5*time.Second)), "retried after a poll interval, not at once")
}

func TestDispatcherSlowRenderNeverOutlivesTheLease(t *testing.T) {
	// The lease must cover the whole request, however long rendering took before it: otherwise a
	// replica re-claims the delivery while the first request is still running, and the endpoint gets
	// the same attempt twice at once.
	clk := newClock()
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	l := memstore.NewLog()
	publishN(t, l, "we_a", 1, t0)

	var inFlight, maxInFlight, sent atomic.Int32
	enter := func() func() {
		n := inFlight.Add(1)
		sent.Add(1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		return func() { inFlight.Add(-1) }
	}
	replica := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now, Timeout: time.Second, Lease: 3 * time.Second,
		Client: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			defer enter()()
			return respond(r, http.StatusOK), nil
		})}})
	slow := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now, Timeout: time.Second, Lease: 3 * time.Second,
		Render: func(_ context.Context, _ producer.Endpoint, ev webhook.Event) (webhook.Event, error) {
			clk.Advance(2500 * time.Millisecond) // a slow Render hook: only 0.5 s of the lease is left
			return ev, nil
		},
		Client: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			defer enter()()
			clk.Advance(time.Second) // the endpoint takes the whole timeout; the lease ends meanwhile
			_, err := replica.DeliverDue(context.Background())
			require.NoError(t, err)
			return respond(r, http.StatusOK), nil
		})}})

	st, err := slow.DeliverDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, producer.Stats{Claimed: 1, Released: 1}, st, "too little lease left after rendering: handed back")
	st, err = replica.DeliverDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, st.Delivered)
	require.EqualValues(t, 1, maxInFlight.Load(), "never the same delivery twice at once")
	require.EqualValues(t, 1, sent.Load())
}

func TestDispatcherRotatedSecretTakesEffectOnNextDelivery(t *testing.T) {
	// Signers are cached per endpoint; a changed secret list must never be signed with the old one.
	ctx := context.Background()
	sk, srv := startSink(t, nil)
	oldSecret, newSecret := webhook.NewSecret(), webhook.NewSecret()
	ep := producer.Endpoint{ID: "we_a", URL: srv.URL, Owner: "lic_1", Secrets: []string{oldSecret}}
	eps := mustEndpoints(t, ep)
	clk := newClock()
	l := memstore.NewLog()
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now})
	deliver := func(secrets ...string) {
		t.Helper()
		publishN(t, l, "we_a", 1, t0)
		st, err := d.DeliverDue(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, st.Delivered)
		got := sk.deliveries()
		last := got[len(got)-1]
		checkSignature(t, last.Signature, last.Body, t0, secrets...)
	}
	deliver(oldSecret)
	deliver(oldSecret) // cached

	ep.Secrets = []string{newSecret, oldSecret} // rotation starts: both sign
	require.NoError(t, eps.Put(ep))
	deliver(newSecret, oldSecret)

	ep.Secrets = []string{newSecret} // rotation ends: the old secret signs nothing any more
	require.NoError(t, eps.Put(ep))
	deliver(newSecret)

	ep.Secrets = []string{webhook.NewSecret()} // replaced outright (a leaked secret)
	require.NoError(t, eps.Put(ep))
	deliver(ep.Secrets[0])
}
