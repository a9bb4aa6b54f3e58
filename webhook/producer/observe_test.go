package producer_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
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

// pubTrace is what the fake observer says the publishing request's trace context is.
var pubTrace = producer.TraceContext{
	TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	TraceState:  "congo=t61rcWkgMzE",
}

// attemptKey marks the context AttemptStart returned, so that the test sees InjectTrace and
// AttemptEnd get it.
type attemptKey struct{}

// recorder records every call of its hooks.
type recorder struct {
	mu      sync.Mutex
	trace   producer.TraceContext // what EventTrace returns
	calls   []string
	appends []producer.AppendInfo
	starts  []producer.AttemptInfo
	ends    []producer.AttemptResult
	injects int
	badCtx  int // InjectTrace, AttemptEnd or RangeEnd without the context of its start

	ranges                  []producer.RangeInfo
	rangeTraces, rangeAuths []string
	rangeEnds               []producer.RangeResult
}

func (r *recorder) EventTrace(ctx context.Context) producer.TraceContext {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "EventTrace")
	return r.trace
}

func (r *recorder) EventsAppended(ctx context.Context, a producer.AppendInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "EventsAppended")
	r.appends = append(r.appends, a)
}

func (r *recorder) AttemptStart(ctx context.Context, a producer.AttemptInfo) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "AttemptStart")
	r.starts = append(r.starts, a)
	return context.WithValue(ctx, attemptKey{}, a.Sequence)
}

func (r *recorder) InjectTrace(ctx context.Context, h webhook.TraceCarrier) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "InjectTrace")
	r.injects++
	if ctx.Value(attemptKey{}) == nil {
		r.badCtx++
	}
	h.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
}

func (r *recorder) AttemptEnd(ctx context.Context, res producer.AttemptResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "AttemptEnd")
	r.ends = append(r.ends, res)
	if ctx.Value(attemptKey{}) == nil {
		r.badCtx++
	}
}

func (r *recorder) RangeStart(ctx context.Context, a producer.RangeInfo) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "RangeStart")
	r.ranges = append(r.ranges, a)
	// The carrier is valid only during the call: keep what the test looks at.
	r.rangeTraces = append(r.rangeTraces, a.Trace.Get("traceparent"))
	r.rangeAuths = append(r.rangeAuths, a.Trace.Get("Authorization"))
	return context.WithValue(ctx, attemptKey{}, a.Endpoint)
}

func (r *recorder) RangeEnd(ctx context.Context, res producer.RangeResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "RangeEnd")
	r.rangeEnds = append(r.rangeEnds, res)
	if ctx.Value(attemptKey{}) == nil {
		r.badCtx++
	}
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls, r.appends, r.starts, r.ends, r.injects = nil, nil, nil, nil, 0
}

// hooks are the recorder's methods as producer.Hooks.
func (r *recorder) hooks() *producer.Hooks {
	return &producer.Hooks{EventTrace: r.EventTrace, EventsAppended: r.EventsAppended, AttemptStart: r.AttemptStart,
		InjectTrace: r.InjectTrace, AttemptEnd: r.AttemptEnd, RangeStart: r.RangeStart, RangeEnd: r.RangeEnd}
}

// TestDispatcherObserverPerAttempt: each decision point calls the observer exactly once per attempt,
// with the outcome the log records, the publisher's trace context, and AttemptStart's context.
func TestDispatcherObserverPerAttempt(t *testing.T) {
	type pass struct {
		advance time.Duration // before the pass
		calls   []string
		end     producer.AttemptResult // Duration checked apart
		attempt int
	}
	delivered := producer.AttemptResult{Endpoint: "we_a", EventType: "order.created", Outcome: driver.OutcomeDelivered, Sent: true, StatusCode: 200}
	failed500 := producer.AttemptResult{Endpoint: "we_a", EventType: "order.created", Outcome: driver.OutcomeFailed, Sent: true,
		StatusCode: 500, Class: producer.ClassStatus}
	abandoned500 := failed500
	abandoned500.Outcome = driver.OutcomeAbandoned
	sent := []string{"AttemptStart", "InjectTrace", "AttemptEnd"}

	for _, tc := range []struct {
		name     string
		answer   func(n int) int // the endpoint's status for its n-th request
		schedule []time.Duration
		deleted  bool
		passes   []pass
	}{
		{name: "2xx delivered", answer: func(int) int { return 200 },
			passes: []pass{{calls: sent, end: delivered, attempt: 1}}},
		{name: "500 retried then delivered", answer: func(n int) int { return map[bool]int{true: 500, false: 200}[n == 0] },
			schedule: []time.Duration{time.Minute},
			passes: []pass{{calls: sent, end: failed500, attempt: 1},
				{advance: time.Minute, calls: sent, end: delivered, attempt: 2}}},
		{name: "final failure abandoned", answer: func(int) int { return 500 },
			schedule: []time.Duration{time.Minute},
			passes: []pass{{calls: sent, end: failed500, attempt: 1},
				{advance: time.Minute, calls: sent, end: abandoned500, attempt: 2}}},
		{name: "no retries: the first failure abandons", answer: func(int) int { return 503 },
			schedule: []time.Duration{},
			passes: []pass{{calls: sent, end: producer.AttemptResult{Endpoint: "we_a", EventType: "order.created",
				Outcome: driver.OutcomeAbandoned, Sent: true, StatusCode: 503, Class: producer.ClassStatus}, attempt: 1}}},
		{name: "deleted endpoint abandoned without a request", deleted: true,
			passes: []pass{{calls: []string{"AttemptStart", "AttemptEnd"}, end: producer.AttemptResult{Endpoint: "we_a",
				EventType: "order.created", Outcome: driver.OutcomeAbandoned, Class: producer.ClassEndpointDeleted}, attempt: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var mu sync.Mutex
			n := 0
			var seen []http.Header
			client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, r.Header.Clone())
				n++
				return respond(r, tc.answer(n-1)), nil
			})}
			ep := producer.Endpoint{ID: "we_a", URL: "https://a.example/hook", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}}
			eps := mustEndpoints(t, ep)
			obs := &recorder{trace: pubTrace}
			clk := newClock()
			l := memstore.NewLog()
			pub := mustPublisher(t, l, eps, &producer.PublisherOptions{Now: clk.Now, Hooks: obs.hooks()})
			_, err := pub.Publish(ctx, "we_a", "order.created", map[string]int{"n": 1})
			require.NoError(t, err)
			require.Equal(t, []string{"EventTrace", "EventsAppended"}, obs.calls)
			require.Equal(t, []producer.AppendInfo{{Type: "order.created", Events: 1}}, obs.appends)
			if tc.deleted {
				eps.Delete("we_a")
			}
			obs.reset()
			d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: client, Now: clk.Now, Jitter: -1,
				Schedule: tc.schedule, Hooks: obs.hooks()})
			for i, p := range tc.passes {
				clk.Advance(p.advance)
				obs.reset()
				_, err := d.DeliverDue(ctx)
				require.NoError(t, err)
				require.Equal(t, p.calls, obs.calls, "pass %d", i)
				require.Equal(t, []producer.AttemptInfo{{Endpoint: "we_a", EventID: obs.starts[0].EventID, EventType: "order.created",
					Sequence: 1, Attempt: p.attempt, Trace: pubTrace}}, obs.starts, "pass %d", i)
				require.True(t, strings.HasPrefix(obs.starts[0].EventID, "evt_"))
				require.Len(t, obs.ends, 1)
				end := obs.ends[0]
				end.Duration = 0
				require.Equal(t, p.end, end, "pass %d", i)
				require.Zero(t, obs.badCtx, "InjectTrace and AttemptEnd get AttemptStart's context")
			}
			for _, h := range seen {
				require.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", h.Get("traceparent"),
					"the delivery request carries the header InjectTrace wrote")
			}
		})
	}
}

func TestDispatcherObserverTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			<-r.Context().Done() // an endpoint that never answers
			return nil, r.Context().Err()
		})}
		eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/hook", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
		l := memstore.NewLog()
		publishN(t, l, "we_a", 1, time.Now())
		obs := &recorder{}
		d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: client, Timeout: 7 * time.Second, Jitter: -1, Hooks: obs.hooks()})
		st, err := d.DeliverDue(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, st.Failed)
		require.Equal(t, []string{"AttemptStart", "InjectTrace", "AttemptEnd"}, obs.calls)
		require.Equal(t, producer.TraceContext{}, obs.starts[0].Trace, "appended without a trace context")
		require.Equal(t, producer.AttemptResult{Endpoint: "we_a", EventType: "order.created", Outcome: driver.OutcomeFailed,
			Sent: true, Class: producer.ClassTimeout, Duration: 7 * time.Second}, obs.ends[0])
	})
}

// TestDispatcherObserverReleased: a request cut short by the dispatcher's shutdown ends its attempt
// as released, not as a failure.
func TestDispatcherObserverReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inFlight := make(chan struct{})
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			close(inFlight)
			<-r.Context().Done()
			return nil, r.Context().Err()
		})}
		eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
		l := memstore.NewLog()
		publishN(t, l, "we_a", 1, time.Now())
		obs := &recorder{}
		d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: client, Hooks: obs.hooks()})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		<-inFlight
		cancel()
		require.NoError(t, <-done)
		require.Equal(t, []string{"AttemptStart", "InjectTrace", "AttemptEnd"}, obs.calls)
		end := obs.ends[0]
		require.True(t, end.Released)
		require.Zero(t, end.Outcome)
		require.Zero(t, status(t, l, "we_a", 1).Attempts)
	})
}

// TestDispatcherObserverUnsent: an event that cannot be rendered is a failed attempt that sent
// nothing, and no header was injected.
func TestDispatcherObserverUnsent(t *testing.T) {
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	l := memstore.NewLog()
	publishN(t, l, "we_a", 1, t0)
	obs := &recorder{}
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: newClock().Now, Hooks: obs.hooks(),
		Render: func(ctx context.Context, ep producer.Endpoint, ev webhook.Event) (webhook.Event, error) {
			return ev, errors.New("no such version")
		}})
	_, err := d.DeliverDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"AttemptStart", "AttemptEnd"}, obs.calls)
	require.Equal(t, producer.AttemptResult{Endpoint: "we_a", EventType: "order.created", Outcome: driver.OutcomeFailed,
		Class: producer.ClassRender}, obs.ends[0])
}

// TestPublisherObserver: one EventTrace and one EventsAppended per publish call, with the number of
// events appended; nothing appended, nothing reported.
func TestPublisherObserver(t *testing.T) {
	ctx := context.Background()
	eps := mustEndpoints(t,
		producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}},
		producer.Endpoint{ID: "we_b", URL: "https://b.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	for _, tc := range []struct {
		name    string
		log     driver.Log
		publish func(p *producer.Publisher) error
		appends []producer.AppendInfo
		calls   []string
	}{
		{name: "Publish", publish: func(p *producer.Publisher) error {
			_, err := p.Publish(ctx, "we_a", "order.created", 1)
			return err
		}, appends: []producer.AppendInfo{{Type: "order.created", Events: 1}}, calls: []string{"EventTrace", "EventsAppended"}},
		{name: "PublishToOwner", publish: func(p *producer.Publisher) error {
			_, err := p.PublishToOwner(ctx, "lic_1", "order.filled", 1)
			return err
		}, appends: []producer.AppendInfo{{Type: "order.filled", Events: 2}}, calls: []string{"EventTrace", "EventsAppended"}},
		{name: "PublishToOwner on a Log without batches", log: bareLog{memstore.NewLog()}, publish: func(p *producer.Publisher) error {
			_, err := p.PublishToOwner(ctx, "lic_1", "order.filled", 1)
			return err
		}, appends: []producer.AppendInfo{{Type: "order.filled", Events: 2}}, calls: []string{"EventTrace", "EventsAppended"}},
		{name: "unknown endpoint", publish: func(p *producer.Publisher) error {
			_, err := p.Publish(ctx, "we_nope", "order.created", 1)
			return err
		}},
		{name: "invalid event", publish: func(p *producer.Publisher) error {
			_, err := p.Publish(ctx, "we_a", "", 1)
			return err
		}}, // refused before the trace is read
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.log
			if l == nil {
				l = memstore.NewLog()
			}
			obs := &recorder{trace: pubTrace}
			err := tc.publish(mustPublisher(t, l, eps, &producer.PublisherOptions{Now: newClock().Now, Hooks: obs.hooks()}))
			require.Equal(t, tc.appends == nil, err != nil, "%v", err)
			require.Equal(t, tc.calls, obs.calls)
			require.Equal(t, tc.appends, obs.appends)
			if err != nil {
				return
			}
			ds, err := l.Claim(ctx, driver.ClaimRequest{Now: t0, LeaseUntil: t0.Add(time.Minute), Limit: 10})
			require.NoError(t, err)
			require.NotEmpty(t, ds)
			for _, dl := range ds {
				require.Equal(t, pubTrace, traceOf(dl), "stored with every event of the call")
			}
		})
	}
}

// bareLog is a Log with nothing more: no AppendBatch, no Backlog, no Settle.
type bareLog struct{ driver.Log }

// traceOf is the trace context a delivery carries.
func traceOf(dl driver.Delivery) producer.TraceContext {
	return producer.TraceContext{TraceParent: dl.TraceParent, TraceState: dl.TraceState}
}

// TestTraceContextStored: the trace context the Observer gives goes through both memory logs,
// numbered at Append or later, for one event and a fan-out, and what is not fit to store is dropped.
func TestTraceContextStored(t *testing.T) {
	ctx := context.Background()
	eps := mustEndpoints(t,
		producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}},
		producer.Endpoint{ID: "we_b", URL: "https://b.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	long := "00-" + strings.Repeat("a", 128) // a traceparent is at most 128 bytes
	for _, tc := range []struct {
		name      string
		in, want  producer.TraceContext
		batch     bool
		sequenced bool
	}{
		{name: "whole", in: pubTrace, want: pubTrace},
		{name: "batch", in: pubTrace, want: pubTrace, batch: true},
		{name: "deferred", in: pubTrace, want: pubTrace, sequenced: true},
		{name: "deferred batch", in: pubTrace, want: pubTrace, sequenced: true, batch: true},
		{name: "none", in: producer.TraceContext{}, want: producer.TraceContext{}},
		{name: "traceparent too long", in: producer.TraceContext{TraceParent: long, TraceState: "a=b"}},
		{name: "traceparent with a newline", in: producer.TraceContext{TraceParent: pubTrace.TraceParent + "\r\nX-Evil: 1"}},
		{name: "traceparent with a space", in: producer.TraceContext{TraceParent: "00 x"}},
		{name: "tracestate alone", in: producer.TraceContext{TraceState: "a=b"}},
		{name: "tracestate too long", in: producer.TraceContext{TraceParent: pubTrace.TraceParent, TraceState: strings.Repeat("a", 512+1)},
			want: producer.TraceContext{TraceParent: pubTrace.TraceParent}},
		{name: "tracestate not ASCII", in: producer.TraceContext{TraceParent: pubTrace.TraceParent, TraceState: "a=é"},
			want: producer.TraceContext{TraceParent: pubTrace.TraceParent}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.in.Sanitized())
			var l driver.Log = memstore.NewLog()
			if tc.sequenced {
				l = memstore.NewDeferredLog()
			}
			p := mustPublisher(t, l, eps, &producer.PublisherOptions{Now: newClock().Now, Hooks: (&recorder{trace: tc.in}).hooks()})
			var err error
			if tc.batch {
				_, err = p.PublishToOwner(ctx, "lic_1", "order.created", 1)
			} else {
				_, err = p.Publish(ctx, "we_a", "order.created", 1)
			}
			require.NoError(t, err)
			if sq, ok := l.(driver.Sequencing); ok {
				_, err := sq.Sequence(ctx, 10)
				require.NoError(t, err)
			}
			ds, err := l.Claim(ctx, driver.ClaimRequest{Now: t0, LeaseUntil: t0.Add(time.Minute), Limit: 10})
			require.NoError(t, err)
			require.Len(t, ds, map[bool]int{false: 1, true: 2}[tc.batch])
			for _, dl := range ds {
				require.Equal(t, tc.want, traceOf(dl))
			}
		})
	}
}

func TestDispatcherBacklog(t *testing.T) {
	ctx := context.Background()
	for _, deferred := range []bool{false, true} {
		t.Run(map[bool]string{false: "MemoryLog", true: "DeferredMemoryLog"}[deferred], func(t *testing.T) {
			var l driver.Log = memstore.NewLog()
			if deferred {
				l = memstore.NewDeferredLog()
			}
			eps := mustEndpoints(t,
				producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}},
				producer.Endpoint{ID: "we_b", URL: "https://b.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
			clk := newClock()
			client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.URL.Host == "b.example" {
					return respond(r, 500), nil
				}
				return respond(r, 200), nil
			})}
			d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Client: client, Now: clk.Now, Jitter: -1})
			b, err := d.Backlog(ctx)
			require.NoError(t, err)
			require.Empty(t, b)

			publishN(t, l, "we_a", 2, t0)
			publishN(t, l, "we_b", 1, t0.Add(10*time.Second))
			clk.Advance(time.Minute)
			b, err = d.Backlog(ctx)
			require.NoError(t, err)
			require.Equal(t, []producer.EndpointBacklog{{Endpoint: "we_a", Events: 2, OldestAge: time.Minute},
				{Endpoint: "we_b", Events: 1, OldestAge: 50 * time.Second}}, b, "numbered or not")

			_, err = d.DeliverDue(ctx)
			require.NoError(t, err)
			clk.Advance(time.Minute)
			b, err = d.Backlog(ctx)
			require.NoError(t, err)
			require.Equal(t, []producer.EndpointBacklog{{Endpoint: "we_b", Events: 1, OldestAge: 110 * time.Second}}, b,
				"delivered events leave the backlog, failed ones waiting for their retry stay")
		})
	}
	d := mustDispatcher(t, bareLog{memstore.NewLog()}, mustEndpoints(t), nil)
	_, err := d.Backlog(ctx)
	require.ErrorIs(t, err, producer.ErrNoBacklog)
	_, err = (&producer.Dispatcher{}).Backlog(ctx)
	require.ErrorIs(t, err, producer.ErrNotBuilt)
}

// TestRangeHandlerObserver: one RangeStart and one RangeEnd per request, with the request's header,
// the status and the number of events; the handler serves in RangeStart's context.
func TestRangeHandlerObserver(t *testing.T) {
	l := memstore.NewLog()
	publishN(t, l, "we_a", 3, t0)
	n, err := l.Cleanup(context.Background(), t0.Add(time.Second), 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}},
		producer.Endpoint{ID: "we_b", URL: "https://b.example/", Owner: "lic_2", Secrets: []string{webhook.NewSecret()}})
	obs := &recorder{}
	var served []any
	h := must(producer.NewRangeHandler(l, eps, func(r *http.Request) (string, error) {
		served = append(served, r.Context().Value(attemptKey{}))
		return "lic_1", nil
	}, &producer.RangeHandlerOptions{Hooks: obs.hooks()}))
	mux := http.NewServeMux()
	mux.Handle(producer.RangePattern("v1"), h)
	for _, tc := range []struct {
		name, target string
		want         producer.RangeResult
	}{
		{"page", "/v1/webhook_endpoints/we_a/events?from=2&limit=1", producer.RangeResult{Status: 200, Events: 1}},
		{"all", "/v1/webhook_endpoints/we_a/events?from=2", producer.RangeResult{Status: 200, Events: 2}},
		{"past the end", "/v1/webhook_endpoints/we_a/events?from=9", producer.RangeResult{Status: 200}},
		{"pruned", "/v1/webhook_endpoints/we_a/events?from=1", producer.RangeResult{Status: 410}},
		{"bad query", "/v1/webhook_endpoints/we_a/events?from=x", producer.RangeResult{Status: 400}},
		{"another licensee's", "/v1/webhook_endpoints/we_b/events?from=1", producer.RangeResult{Status: 404}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs.reset()
			obs.ranges, obs.rangeEnds, obs.rangeTraces, obs.rangeAuths, served = nil, nil, nil, nil, nil
			r := httptest.NewRequest(http.MethodGet, tc.target, nil)
			r.Header.Set("traceparent", pubTrace.TraceParent)
			r.Header.Set("Authorization", "Bearer sk_sandbox_secret")
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, r)
			require.Equal(t, tc.want.Status, w.Code)
			require.Equal(t, []string{"RangeStart", "RangeEnd"}, obs.calls)
			require.Equal(t, []string{pubTrace.TraceParent}, obs.rangeTraces)
			require.Equal(t, []string{""}, obs.rangeAuths, "the observer never sees the API key")
			require.Equal(t, r.PathValue("id"), obs.ranges[0].Endpoint)
			require.Equal(t, []producer.RangeResult{tc.want}, obs.rangeEnds)
			require.Zero(t, obs.badCtx)
			require.Equal(t, []any{obs.ranges[0].Endpoint}, served, "served in RangeStart's context")
		})
	}
}

// TestHooksMayBePartial: Hooks written before a field existed leave it nil, and every nil field is
// skipped — a hooks value with one field set works on every path, publishing, delivering and
// serving a range.
func TestHooksMayBePartial(t *testing.T) {
	ctx := context.Background()
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	l := memstore.NewLog()
	var appended, ended, served int
	pub := mustPublisher(t, l, eps, &producer.PublisherOptions{Now: newClock().Now,
		Hooks: &producer.Hooks{EventsAppended: func(context.Context, producer.AppendInfo) { appended++ }}})
	_, err := pub.Publish(ctx, "we_a", "order.created", 1)
	require.NoError(t, err)
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		require.Empty(t, r.Header.Get("traceparent"), "no InjectTrace, no trace header")
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}}, nil
	})}
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: newClock().Now, Client: client,
		Hooks: &producer.Hooks{AttemptEnd: func(_ context.Context, r producer.AttemptResult) {
			require.Equal(t, driver.OutcomeDelivered, r.Outcome)
			ended++
		}}})
	st, err := d.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Delivered)
	rh := must(producer.NewRangeHandler(l, eps, testLicensee, &producer.RangeHandlerOptions{
		Hooks: &producer.Hooks{RangeEnd: func(_ context.Context, r producer.RangeResult) { served = r.Events }}}))
	mux := http.NewServeMux()
	mux.Handle(producer.RangePattern("v1"), rh)
	req := httptest.NewRequest(http.MethodGet, "/v1/webhook_endpoints/we_a/events?from=1", nil)
	req.Header.Set(licenseeHeader, "lic_1")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Equal(t, []int{1, 1, 1}, []int{appended, ended, served})
	require.NotPanics(t, func() {
		_, err := must(producer.NewPublisher(l, eps, &producer.PublisherOptions{Hooks: &producer.Hooks{}})).Publish(ctx, "we_a", "order.created", 2)
		require.NoError(t, err)
	})
}
