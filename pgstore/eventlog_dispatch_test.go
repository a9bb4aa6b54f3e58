package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// evlogLoopback lets the dispatchers' default client reach the tests' loopback endpoints.
var evlogLoopback = &ssrf.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

// evlogEndpoint is a webhook endpoint that fails chosen attempts and notices any delivery of an
// event that arrives while another delivery of the same event is still in flight.
type evlogEndpoint struct {
	fail func(seq uint64, attempt int) bool

	mu         sync.Mutex
	inFlight   map[string]int
	attempts   map[string]int
	successes  map[string]int
	concurrent []string
}

func newEvlogEndpoint(fail func(seq uint64, attempt int) bool) *evlogEndpoint {
	return &evlogEndpoint{fail: fail, inFlight: map[string]int{}, attempts: map[string]int{}, successes: map[string]int{}}
}

func (e *evlogEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var ev webhook.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	key := fmt.Sprintf("%s#%d", r.URL.Path, ev.Sequence)
	e.mu.Lock()
	e.inFlight[key]++
	if e.inFlight[key] > 1 {
		e.concurrent = append(e.concurrent, key)
	}
	attempt := e.attempts[key]
	e.attempts[key]++
	e.mu.Unlock()

	status := http.StatusNoContent
	if e.fail != nil && e.fail(ev.Sequence, attempt) {
		status = http.StatusServiceUnavailable
	}
	e.mu.Lock()
	e.inFlight[key]--
	if status < 300 {
		e.successes[key]++
	}
	e.mu.Unlock()
	w.WriteHeader(status)
}

// TestEventLogDispatcherReplicas runs four dispatchers — two EventLogs on two pools, as replicas would
// — on one log: no event is ever in flight twice at once, and each is attempted exactly as often as
// the endpoint made it fail, plus the one success.
func TestEventLogDispatcherReplicas(t *testing.T) {
	ctx := context.Background()
	_, _, opts := newEventLog(t)
	logs := []*pgstore.EventLog{must(pgstore.NewEventLog(fastCommitPool(t), opts)), must(pgstore.NewEventLog(fastCommitPool(t), opts))}
	failing := func(seq uint64, attempt int) bool { return seq%5 == 0 && attempt < 2 } // every fifth fails twice
	sink := newEvlogEndpoint(failing)
	srv := httptest.NewServer(sink)
	defer srv.Close()

	const endpoints, events = 5, 40
	eps := &memstore.Endpoints{}
	for i := range endpoints {
		id := fmt.Sprintf("we_%d", i)
		require.NoError(t, eps.Put(producer.Endpoint{ID: id, URL: srv.URL + "/" + id, Owner: "lic_1", Secrets: []string{webhook.NewSecret()}}))
		for range events {
			_, err := logs[i%2].Append(ctx, driver.StreamEvent{Stream: id, Event: evlogEvent("order.created")})
			require.NoError(t, err)
		}
	}
	clk := pgtest.NewClock(evlogT0)
	var dispatchers []*producer.Dispatcher
	for i := range 4 {
		d, err := producer.NewDispatcher(logs[i%2], eps, &producer.DispatcherOptions{Now: clk.Now, BatchSize: 9, Guard: evlogLoopback,
			Jitter: -1, Schedule: []time.Duration{time.Second, time.Second, time.Second}})
		require.NoError(t, err)
		dispatchers = append(dispatchers, d)
	}
	for idle, rounds := 0, 0; idle < 2; rounds++ {
		require.Less(t, rounds, 500)
		var wg sync.WaitGroup
		var mu sync.Mutex
		claimed := 0
		for _, d := range dispatchers {
			wg.Go(func() {
				st, err := d.DeliverDue(ctx)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				claimed += st.Claimed
				mu.Unlock()
			})
		}
		wg.Wait()
		if claimed == 0 {
			idle++
			clk.Advance(time.Second)
		} else {
			idle = 0
		}
	}
	require.Empty(t, sink.concurrent, "deliveries of one event overlapped")
	require.Len(t, sink.successes, endpoints*events)
	for key, n := range sink.successes {
		require.Equal(t, 1, n, "%s succeeded %d times", key, n)
	}
	for i := range endpoints {
		for seq := uint64(1); seq <= events; seq++ {
			key := fmt.Sprintf("/we_%d#%d", i, seq)
			want := 1
			if seq%5 == 0 {
				want = 3
			}
			require.Equal(t, want, sink.attempts[key], key)
			st, err := logs[0].Status(ctx, fmt.Sprintf("we_%d", i), seq)
			require.NoError(t, err)
			require.Equal(t, driver.Delivered, st.State)
			require.Equal(t, want-1, st.Attempts)
		}
	}
}

// TestEventLogDeliveryStateSurvivesRestart: a dispatcher that dies holding a lease, and failed
// attempts recorded before a restart, are picked up by a new process on a new pool.
func TestEventLogDeliveryStateSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	_, _, opts := newEventLog(t)
	sink := newEvlogEndpoint(func(seq uint64, attempt int) bool { return seq == 2 && attempt == 0 })
	srv := httptest.NewServer(sink)
	defer srv.Close()
	eps := &memstore.Endpoints{}
	require.NoError(t, eps.Put(producer.Endpoint{ID: "we_a", URL: srv.URL + "/we_a", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}}))
	clk := pgtest.NewClock(evlogT0)
	dopts := &producer.DispatcherOptions{Now: clk.Now, Jitter: -1, Lease: time.Minute, Schedule: []time.Duration{time.Hour, 2 * time.Hour},
		Guard: evlogLoopback}

	// First process: event 1 is claimed by a dispatcher that then crashes.
	first := must(pgstore.NewEventLog(fastCommitPool(t), opts))
	for range 2 {
		_, err := first.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: evlogEvent("order.created")})
		require.NoError(t, err)
	}
	require.Equal(t, 2, numberAll(t, first))
	crashed, err := first.Claim(ctx, driver.ClaimRequest{Now: clk.Now(), LeaseUntil: clk.Now().Add(time.Minute), Limit: 1})
	require.NoError(t, err)
	require.Len(t, crashed, 1)
	d1, err := producer.NewDispatcher(first, eps, dopts)
	require.NoError(t, err)
	st, err := d1.DeliverDue(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Claimed, "the crashed dispatcher holds we_a: event 2 may not overtake event 1")

	// Once the lease ends, the first process delivers event 1; event 2 fails once.
	clk.Advance(time.Minute)
	st, err = d1.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, producer.Stats{Claimed: 2, Delivered: 1, Failed: 1}, st)
	require.ErrorIs(t, first.Delivered(ctx, crashed[0].Lease, driver.Attempt{At: clk.Now()}), driver.ErrLeaseLost,
		"the crashed holder cannot settle any more")

	// Second process, new pool, new log, new dispatcher: it honours the retry the first one scheduled.
	second := must(pgstore.NewEventLog(fastCommitPool(t), opts))
	d2, err := producer.NewDispatcher(second, eps, dopts)
	require.NoError(t, err)
	st, err = d2.DeliverDue(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Claimed, "event 2 waits for its retry")

	clk.Advance(time.Hour)
	st, err = d2.DeliverDue(ctx)
	require.NoError(t, err)
	require.Equal(t, producer.Stats{Claimed: 1, Delivered: 1}, st, "event 2 at the retry the first process scheduled")
	s, err := second.Status(ctx, "we_a", 2)
	require.NoError(t, err)
	require.Equal(t, 1, s.Attempts)
	require.Equal(t, "status 503", s.LastError)
	require.Equal(t, map[string]int{"/we_a#1": 1, "/we_a#2": 2}, sink.attempts)
}
