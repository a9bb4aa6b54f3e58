package producer_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// opsRig is a memory log and registry, a Dispatcher on an injected clock delivering to an in-memory
// network, and the DeliveriesHandler's routes under /v1, whose licensee is the X-Licensee header.
type opsRig struct {
	t    *testing.T
	clk  *clock
	log  *memstore.Log
	eps  *memstore.Endpoints
	pub  *producer.Publisher
	d    *producer.Dispatcher
	srv  *httptest.Server
	wake int

	mu      sync.Mutex
	status  int           // what the endpoint answers; 0: 200
	latency time.Duration // how long each request takes, by the clock
	got     []webhook.Event
	bodies  [][]byte
	headers []http.Header
}

func newOpsRig(t *testing.T) *opsRig {
	t.Helper()
	r := &opsRig{t: t, clk: newClock(), log: memstore.NewLog()}
	r.eps = mustEndpoints(t, endpointAt("we_a", "a.example", "lic_1"), endpointAt("we_b", "b.example", "lic_2"))
	r.pub = mustPublisher(t, r.log, r.eps, &producer.PublisherOptions{Now: r.clk.Now})
	client := &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		body, _ := io.ReadAll(req.Body)
		var ev webhook.Event
		_ = json.Unmarshal(body, &ev)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got, r.bodies, r.headers = append(r.got, ev), append(r.bodies, body), append(r.headers, req.Header.Clone())
		r.clk.Advance(r.latency)
		status := r.status
		if status == 0 {
			status = http.StatusOK
		}
		return respond(req, status), nil
	})}
	r.d = mustDispatcher(t, r.log, r.eps, &producer.DispatcherOptions{Client: client, Now: r.clk.Now, Jitter: -1})
	h, err := producer.NewDeliveriesHandler(r.log, r.eps, func(req *http.Request) (string, error) {
		return req.Header.Get("X-Licensee"), nil
	}, &producer.DeliveriesHandlerOptions{Now: r.clk.Now, Wake: func() { r.wake++ }})
	require.NoError(t, err)
	idem, err := idempotency.New(nil)
	require.NoError(t, err)
	mux := http.NewServeMux()
	h.Register(mux, "v1", idem.Handler)
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *opsRig) publish(n int) {
	r.t.Helper()
	for range n {
		_, err := r.pub.Publish(context.Background(), "we_a", "order.created", json.RawMessage(`{"n":1}`))
		require.NoError(r.t, err)
	}
}

func (r *opsRig) deliver() producer.Stats {
	r.t.Helper()
	st, err := r.d.DeliverDue(context.Background())
	require.NoError(r.t, err)
	return st
}

func (r *opsRig) answer(status int, latency time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.latency = status, latency
}

// call sends a request as licensee, with an Idempotency-Key for a POST, and decodes the answer.
func (r *opsRig) call(licensee, method, path, body string) (int, map[string]any) {
	r.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, r.srv.URL+path, rd)
	require.NoError(r.t, err)
	req.Header.Set("X-Licensee", licensee)
	req.Header.Set("Authorization", "Bearer key_of_"+licensee) // the idempotency middleware's scope
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == http.MethodPost {
		req.Header.Set(idempotency.HeaderKey, idempotency.NewKey())
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(r.t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(r.t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

// TestEndpointStats: the last hour, day and week of an endpoint's attempts by outcome, its success
// rate, latency quantiles and backlog, as an hour and a day pass; another licensee's, a deleted and an
// unknown endpoint are the same 404.
func TestEndpointStats(t *testing.T) {
	r := newOpsRig(t)
	r.answer(http.StatusOK, 40*time.Millisecond)
	r.publish(8)
	require.Equal(t, 8, r.deliver().Delivered)
	r.answer(http.StatusServiceUnavailable, 900*time.Millisecond)
	r.publish(2)
	require.Equal(t, 1, r.deliver().Failed)
	r.clk.Advance(10 * time.Second)

	code, st := r.call("lic_1", http.MethodGet, "/v1/webhook_endpoints/we_a/stats", "")
	require.Equal(t, http.StatusOK, code, st)
	require.Equal(t, "webhook_endpoint_stats", st["object"])
	require.Equal(t, "we_a", st["endpoint"])
	require.Equal(t, "enabled", st["status"])
	require.Nil(t, st["disabled_reason"])
	// Created at t0 (whole seconds); the attempts took 1.22 s, then 10 s passed.
	require.Equal(t, map[string]any{"events": float64(2), "oldest_age": float64(11)}, st["backlog"],
		"the failed event and the one behind it")
	for _, window := range []string{"hour", "day", "week"} {
		w := st[window].(map[string]any)
		require.Equal(t, float64(9), w["attempts"], window)
		require.Equal(t, float64(8), w["delivered"], window)
		require.Equal(t, float64(1), w["failed"], window)
		require.Equal(t, float64(0), w["abandoned"], window)
		require.Equal(t, 0.8889, w["success_rate"], window)
		lat := w["latency_ms"].(map[string]any)
		require.InDelta(t, 40, lat["p50"], 40*0.2, "p50 within a bucket's width above 40 ms")
		require.GreaterOrEqual(t, lat["p50"], float64(40))
		require.InDelta(t, 900, lat["p99"], 900*0.2)
		require.GreaterOrEqual(t, lat["p99"], float64(900))
	}

	// Two hours on, the hour is empty; the day and week still count them.
	r.clk.Advance(2 * time.Hour)
	_, st = r.call("lic_1", http.MethodGet, "/v1/webhook_endpoints/we_a/stats", "")
	require.Equal(t, map[string]any{"attempts": float64(0), "delivered": float64(0), "failed": float64(0), "abandoned": float64(0),
		"success_rate": nil, "latency_ms": nil}, st["hour"])
	require.Equal(t, float64(9), st["day"].(map[string]any)["attempts"])
	// Eight days on, nothing.
	r.clk.Advance(8 * 24 * time.Hour)
	_, st = r.call("lic_1", http.MethodGet, "/v1/webhook_endpoints/we_a/stats", "")
	require.Equal(t, float64(0), st["week"].(map[string]any)["attempts"])

	for _, tc := range []struct{ licensee, path string }{
		{"lic_2", "/v1/webhook_endpoints/we_a/stats"},
		{"lic_1", "/v1/webhook_endpoints/we_b/stats"},
		{"lic_1", "/v1/webhook_endpoints/we_nope/stats"},
	} {
		code, p := r.call(tc.licensee, http.MethodGet, tc.path, "")
		require.Equal(t, http.StatusNotFound, code, tc)
		require.Equal(t, producer.CodeEndpointNotFound, p["code"])
	}
	_, err := r.eps.UpdateEndpoint(context.Background(), "we_a", func(e *producer.Endpoint) error {
		e.DeletedAt = r.clk.Now()
		return nil
	})
	require.NoError(t, err)
	code, _ = r.call("lic_1", http.MethodGet, "/v1/webhook_endpoints/we_a/stats", "")
	require.Equal(t, http.StatusNotFound, code, "a deleted endpoint")
}

// TestEndpointStatsHourly: "hourly" is the day hour by hour, oldest first: 24 hours starting 3600 s
// apart, the last the one that holds now, each with its counts and rate and no latency. An hour's
// attempts move down the list as the clock crosses the hours' edges, and leave it a day later.
func TestEndpointStatsHourly(t *testing.T) {
	r := newOpsRig(t) // the clock at t0, an hour's start
	r.publish(3)
	require.Equal(t, 3, r.deliver().Delivered)
	r.answer(http.StatusServiceUnavailable, 0)
	r.publish(1)
	require.Equal(t, 1, r.deliver().Failed)
	require.Equal(t, t0, r.clk.Now(), "every attempt at t0")

	for _, tc := range []struct {
		name  string
		now   time.Duration // after t0
		index int           // where t0's hour is; -1: gone
	}{
		{"now at the hour's start", 0, 23},
		{"now at the hour's last instant", time.Hour - time.Nanosecond, 23},
		{"now at the next hour's start", time.Hour, 22},
		{"23 hours on, at the hour's start", 23 * time.Hour, 0},
		{"23 hours on, at the hour's last instant", 24*time.Hour - time.Nanosecond, 0},
		{"a day on", 24 * time.Hour, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(tc.now)
			r.clk.Set(now)
			code, st := r.call("lic_1", http.MethodGet, "/v1/webhook_endpoints/we_a/stats", "")
			require.Equal(t, http.StatusOK, code, st)
			hourly, ok := st["hourly"].([]any)
			require.True(t, ok, "hourly is an array: %v", st["hourly"])
			require.Len(t, hourly, 24)
			var first, attempts float64
			for i, h := range hourly {
				hour := h.(map[string]any)
				start, ok := hour["start"].(float64)
				require.True(t, ok, "hourly[%d].start is a number: %v", i, hour["start"])
				if i == 0 {
					first = start
				}
				require.Equal(t, first+float64(3600*i), start, "hourly[%d] starts an hour after the one before", i)
				want := map[string]any{"start": start, "attempts": float64(0), "delivered": float64(0), "failed": float64(0),
					"abandoned": float64(0), "success_rate": nil}
				if i == tc.index {
					want["attempts"], want["delivered"], want["failed"], want["success_rate"] = float64(4), float64(3), float64(1), 0.75
					require.Equal(t, float64(t0.Unix()), start, "t0's hour starts at t0")
				}
				require.Equal(t, want, hour, "hourly[%d]", i)
				attempts += hour["attempts"].(float64)
			}
			last := int64(hourly[23].(map[string]any)["start"].(float64))
			require.True(t, last <= now.Unix() && now.Unix() < last+3600, "the last hour, from %d, holds now, %d", last, now.Unix())
			require.Equal(t, st["day"].(map[string]any)["attempts"], attempts, "the hours add up to the day")
		})
	}
}

// TestResendAndRecover: a retained event, or a range, goes out again — the same bytes and sequence,
// marked X-SVC-Redelivery, behind the endpoint's normal deliveries, in order; what is pending or
// queued already is not queued twice; bad input, a pruned start, an unknown event, a disabled or
// another licensee's endpoint are refused, located.
func TestResendAndRecover(t *testing.T) {
	ctx := context.Background()
	r := newOpsRig(t)
	r.publish(3)
	require.Equal(t, 3, r.deliver().Delivered)
	first := append([][]byte(nil), r.bodies...)

	code, got := r.call("lic_1", http.MethodPost, "/v1/webhook_endpoints/we_a/events/2/resend", "")
	require.Equal(t, http.StatusAccepted, code, got)
	require.Equal(t, map[string]any{"object": "webhook_redelivery", "endpoint": "we_a", "from": float64(2), "to": float64(2),
		"queued": float64(1)}, got)
	require.Equal(t, 1, r.wake, "the dispatcher is woken")
	_, got = r.call("lic_1", http.MethodPost, "/v1/webhook_endpoints/we_a/events/2/resend", "")
	require.Equal(t, float64(0), got["queued"], "queued already: not twice")

	// Behind the normal stream: a new event first, then the redeliveries, in order.
	r.publish(1)
	code, got = r.call("lic_1", http.MethodPost, "/v1/webhook_endpoints/we_a/recover", `{"from":1,"to":3}`)
	require.Equal(t, http.StatusAccepted, code, got)
	require.Equal(t, float64(2), got["queued"], "2 was queued already")
	r.clk.Advance(5 * time.Second)
	r.deliver()
	r.deliver()
	r.mu.Lock()
	var order []uint64
	for _, ev := range r.got[3:] {
		order = append(order, ev.Sequence)
	}
	for i, h := range r.headers {
		redelivery := i > 3
		require.Equal(t, redelivery, h.Get(webhook.HeaderRedelivery) == "true", "delivery %d", i)
	}
	for k := range 3 {
		require.Equal(t, first[k], r.bodies[4+k], "the same bytes for sequence %d", k+1)
	}
	require.NotEqual(t, r.headers[0].Get(webhook.HeaderSignature), r.headers[4].Get(webhook.HeaderSignature), "a fresh signature")
	r.mu.Unlock()
	require.Equal(t, []uint64{4, 1, 2, 3}, order)

	// Pending: goes out anyway, not queued.
	r.answer(http.StatusServiceUnavailable, 0)
	r.publish(1)
	r.deliver()
	_, got = r.call("lic_1", http.MethodPost, "/v1/webhook_endpoints/we_a/events/5/resend", "")
	require.Equal(t, float64(0), got["queued"])

	for _, tc := range []struct {
		name, licensee, path, body string
		status                     int
		code, at                   string
	}{
		{"an unknown event", "lic_1", "/v1/webhook_endpoints/we_a/events/99/resend", "", 404, producer.CodeEventNotFound, "sequence"},
		{"not a sequence", "lic_1", "/v1/webhook_endpoints/we_a/events/x/resend", "", 400, producer.CodeOutOfRange, "sequence"},
		{"sequence 0", "lic_1", "/v1/webhook_endpoints/we_a/events/0/resend", "", 400, producer.CodeOutOfRange, "sequence"},
		{"another licensee's", "lic_2", "/v1/webhook_endpoints/we_a/events/1/resend", "", 404, producer.CodeEndpointNotFound, "id"},
		{"no from", "lic_1", "/v1/webhook_endpoints/we_a/recover", `{"to":3}`, 400, "field_missing", "/from"},
		{"to before from", "lic_1", "/v1/webhook_endpoints/we_a/recover", `{"from":3,"to":2}`, 400, producer.CodeOutOfRange, "/to"},
		{"from 0", "lic_1", "/v1/webhook_endpoints/we_a/recover", `{"from":0,"to":2}`, 400, producer.CodeOutOfRange, "/from"},
		{"too many", "lic_1", "/v1/webhook_endpoints/we_a/recover", `{"from":1,"to":10001}`, 400, producer.CodeRangeTooLarge, "/to"},
		{"an unknown member", "lic_1", "/v1/webhook_endpoints/we_a/recover", `{"from":1,"to":2,"all":true}`, 400, "unknown_field", "/all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, p := r.call(tc.licensee, http.MethodPost, tc.path, tc.body)
			require.Equal(t, tc.status, code, p)
			errs := p["errors"].([]any)
			require.Equal(t, tc.code, errs[0].(map[string]any)["code"], p)
			loc := errs[0].(map[string]any)
			require.Contains(t, []any{loc["pointer"], loc["name"]}, tc.at, p)
		})
	}
	code, _ = r.call("lic_1", http.MethodPost, "/v1/webhook_endpoints/we_a/recover", `{"from":1,"to":10000}`)
	require.Equal(t, http.StatusAccepted, code, "10,000 events at most: 1–10000 is allowed")

	// Pruned: 410 with the first retained sequence, located where the request named it.
	n, err := r.log.Cleanup(ctx, r.clk.Now().Add(time.Hour).Truncate(time.Second), 2)
	require.NoError(t, err)
	require.Positive(t, n)
	code, p := r.call("lic_1", http.MethodPost, "/v1/webhook_endpoints/we_a/events/1/resend", "")
	require.Equal(t, http.StatusGone, code, p)
	require.Equal(t, producer.CodeEventsPruned, p["code"])
	require.NotNil(t, p["first_retained"])
	require.Equal(t, "sequence", p["errors"].([]any)[0].(map[string]any)["name"])
	code, p = r.call("lic_1", http.MethodPost, "/v1/webhook_endpoints/we_a/recover", `{"from":1,"to":9}`)
	require.Equal(t, http.StatusGone, code, p)
	require.Equal(t, "/from", p["errors"].([]any)[0].(map[string]any)["pointer"])

	// Disabled: nothing would be sent.
	_, err = r.eps.UpdateEndpoint(ctx, "we_a", func(e *producer.Endpoint) error {
		e.DisabledReason, e.DisabledAt = producer.DisabledManual, r.clk.Now()
		return nil
	})
	require.NoError(t, err)
	code, p = r.call("lic_1", http.MethodPost, "/v1/webhook_endpoints/we_a/events/6/resend", "")
	require.Equal(t, http.StatusUnprocessableEntity, code, p)
	require.Equal(t, producer.CodeEndpointDisabled, p["code"])
}

// TestRedeliveriesMeetTheSequenceRule: resent and recovered events reach a consumer's Receiver like
// any delivery; its Tracker counts them as duplicates and processes nothing twice — while a consumer
// that lost its data (its cursor store emptied) takes them again, in order.
func TestRedeliveriesMeetTheSequenceRule(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	secret := webhook.NewSecret()
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/hook", Owner: "lic_1", Secrets: []string{secret}})
	log := memstore.NewLog()
	pub := mustPublisher(t, log, eps, &producer.PublisherOptions{Now: clk.Now})

	var (
		mu        sync.Mutex
		processed []uint64
		verdicts  = map[webhook.Outcome]int{}
		cursors   = &lostCursors{s: &webhook.MemoryCursorStore{}}
	)
	verifier, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: clk.Now})
	require.NoError(t, err)
	tracker, err := webhook.NewTracker(cursors, webhook.RangeFetcherFunc(func(ctx context.Context, stream string, from, to uint64) ([]webhook.Event, error) {
		evs, _, err := log.Range(ctx, stream, from, to, 100)
		return evs, err
	}), func(_ context.Context, s webhook.Step) error {
		mu.Lock()
		defer mu.Unlock()
		processed = append(processed, s.Event.Sequence)
		return nil
	}, &webhook.TrackerOptions{Hooks: &webhook.Hooks{Sequenced: func(_ context.Context, info webhook.SequenceInfo) {
		mu.Lock()
		defer mu.Unlock()
		verdicts[info.Outcome]++
	}}})
	require.NoError(t, err)
	receiver, err := webhook.NewReceiver("we_a", verifier, tracker, nil)
	require.NoError(t, err)
	client := &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		rec := httptest.NewRecorder()
		receiver.ServeHTTP(rec, req)
		return rec.Result(), nil
	})}
	d := mustDispatcher(t, log, eps, &producer.DispatcherOptions{Client: client, Now: clk.Now})
	deliver := func() {
		t.Helper()
		_, err := d.DeliverDue(ctx)
		require.NoError(t, err)
	}
	for range 3 {
		_, err := pub.Publish(ctx, "we_a", "order.created", json.RawMessage(`{}`))
		require.NoError(t, err)
	}
	deliver()
	require.Equal(t, []uint64{1, 2, 3}, processed)

	n, err := log.Redeliver(ctx, "we_a", 1, 3, clk.Now())
	require.NoError(t, err)
	require.Equal(t, 3, n)
	deliver()
	require.Equal(t, []uint64{1, 2, 3}, processed, "duplicates: nothing processed twice")
	require.Equal(t, 3, verdicts[webhook.Duplicate])

	// A consumer that lost its data starts again from nothing and takes what is pushed again.
	cursors.lose()
	_, err = log.Redeliver(ctx, "we_a", 1, 3, clk.Now())
	require.NoError(t, err)
	deliver()
	require.Equal(t, []uint64{1, 2, 3, 1, 2, 3}, processed)
	require.Equal(t, 3, verdicts[webhook.Duplicate])
}

// lostCursors is a cursor store whose data can be lost, as a consumer's database can.
type lostCursors struct {
	mu sync.Mutex
	s  *webhook.MemoryCursorStore
}

func (l *lostCursors) store() *webhook.MemoryCursorStore {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s
}

func (l *lostCursors) lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.s = &webhook.MemoryCursorStore{}
}

func (l *lostCursors) Get(ctx context.Context, stream string) (uint64, error) {
	return l.store().Get(ctx, stream)
}

func (l *lostCursors) Advance(ctx context.Context, stream string, from, to uint64) error {
	return l.store().Advance(ctx, stream, from, to)
}
