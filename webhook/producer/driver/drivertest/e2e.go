package drivertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/internal/testclock"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// E2E sizes the end-to-end test: E2EStreams endpoints receive E2EEvents events each.
const (
	E2EStreams = 3
	E2EEvents  = 60
)

// RunEndToEnd runs a producer on l — Publisher, two Dispatchers and the RangeHandler — against the
// consumer of package webhook (Receiver, Tracker, RangeClient) over loopback HTTP, with a network
// that drops, duplicates, delays and reorders deliveries and drops range requests. The consumer must
// process every event of every stream exactly once, in sequence order, and every delivery must end up
// recorded as delivered.
func RunEndToEnd(t *testing.T, l driver.Log) {
	ctx := context.Background()
	clk := testclock.New(t0())
	rng := rand.New(rand.NewPCG(7, 11))
	var rngMu sync.Mutex
	roll := func() float64 {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.Float64()
	}

	// --- consumer: one Receiver per endpoint, its cursor in a shared store ----------------------
	type processed struct {
		mu      sync.Mutex
		seqs    map[string][]uint64
		fetched int
	}
	done := &processed{seqs: map[string][]uint64{}}
	cursors := &webhook.MemoryCursorStore{}
	consumerMux := http.NewServeMux()
	consumer := httptest.NewServer(consumerMux)
	defer consumer.Close()

	// --- producer -------------------------------------------------------------------------------
	const apiKey = "sk_sandbox_e2e"
	eps := &memstore.Endpoints{}
	producerMux := http.NewServeMux()
	producerSrv := httptest.NewServer(producerMux)
	defer producerSrv.Close()
	ranges, err := producer.NewRangeHandler(l, eps, func(r *http.Request) (string, error) {
		if r.Header.Get("Authorization") != "Bearer "+apiKey {
			return "", errors.New("unauthenticated")
		}
		return "lic_e2e", nil
	}, &producer.RangeHandlerOptions{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	producerMux.Handle(producer.RangePattern("v1"), ranges)

	network := &faultyNetwork{next: http.DefaultTransport, roll: roll}
	rangeNet := &http.Client{Transport: &droppingTransport{next: http.DefaultTransport, roll: roll}}
	streams := make([]string, E2EStreams)
	for i := range streams {
		id := fmt.Sprintf("we_e2e_%d", i)
		streams[i] = id
		oldSecret, newSecret := webhook.NewSecret(), webhook.NewSecret()
		// Mid-rotation: deliveries carry both signatures; this consumer still holds the old secret.
		check.NoError(t, eps.Put(producer.Endpoint{ID: id, URL: consumer.URL + "/hooks/" + id, Owner: "lic_e2e",
			Secrets: []string{newSecret, oldSecret}}))
		v, err := webhook.NewVerifier([]string{oldSecret}, &webhook.VerifierOptions{Now: clk.Now})
		check.NoError(t, err)
		rc, err := webhook.NewRangeClient(producerSrv.URL, apiKey, v, &webhook.RangeClientOptions{HTTPClient: rangeNet, PageSize: 7})
		check.NoError(t, err)
		tr, err := webhook.NewTracker(cursors, rc, func(_ context.Context, s webhook.Step) error {
			done.mu.Lock()
			defer done.mu.Unlock()
			done.seqs[s.Stream] = append(done.seqs[s.Stream], s.Event.Sequence)
			if s.Fetched {
				done.fetched++
			}
			return nil
		}, nil)
		check.NoError(t, err)
		rcv, err := webhook.NewReceiver(id, v, tr, nil)
		check.NoError(t, err)
		consumerMux.Handle("POST /hooks/"+id, rcv)
	}

	pub, err := producer.NewPublisher(l, eps, &producer.PublisherOptions{Now: clk.Now})
	check.NoError(t, err)
	dispatchers := make([]*producer.Dispatcher, 2)
	for i := range dispatchers {
		d, err := producer.NewDispatcher(l, eps, &producer.DispatcherOptions{
			Client:    &http.Client{Transport: network},
			Now:       clk.Now,
			Schedule:  producer.ExponentialSchedule(time.Second, 8*time.Second, time.Hour),
			BatchSize: 5,
		})
		check.NoError(t, err)
		dispatchers[i] = d
	}
	pass := func() int {
		var wg sync.WaitGroup
		claimed := make([]int, len(dispatchers))
		for i, d := range dispatchers {
			wg.Go(func() {
				st, err := d.DeliverDue(ctx)
				if err != nil {
					t.Error(err)
				}
				claimed[i] = st.Claimed
			})
		}
		wg.Wait()
		return claimed[0] + claimed[1]
	}

	// --- run: publish in bursts while delivering through the faulty network ------------------------
	published := make(map[string]int)
	total := 0
	for round := 0; total < E2EStreams*E2EEvents; round++ {
		for range 1 + int(roll()*4) {
			s := streams[int(roll()*E2EStreams)]
			if published[s] == E2EEvents {
				continue
			}
			_, err := pub.Publish(ctx, s, "order.created", map[string]int{"n": published[s]})
			check.NoError(t, err)
			published[s]++
			total++
		}
		pass()
		network.replaySome(0.5)
		clk.Advance(time.Duration(roll() * float64(3*time.Second)))
	}
	// Drain: deliveries held by the network arrive late; retries run until nothing is due even after
	// every backoff has ended.
	network.replaySome(1)
	for idle, rounds := 0, 0; idle < 2; rounds++ {
		check.True(t, rounds < 2000, "deliveries never settled: still claiming after %d rounds", rounds)
		if pass() == 0 {
			idle++
			clk.Advance(10 * time.Second) // past the longest backoff
		} else {
			idle = 0
		}
		network.replaySome(1)
	}

	// --- check --------------------------------------------------------------------------------------
	for _, s := range streams {
		want := make([]uint64, E2EEvents)
		for i := range want {
			want[i] = uint64(i + 1)
			st, err := l.Status(ctx, s, uint64(i+1))
			check.NoError(t, err)
			check.Equal(t, driver.Delivered, st.State, "%s #%d", s, i+1)
		}
		check.Equal(t, want, done.seqs[s], "stream %s: every event processed exactly once, in order", s)
	}
	f := network.faults()
	t.Logf("faults injected: %v; events recovered by range fetch: %d; range requests dropped: %d",
		f, done.fetched, rangeNet.Transport.(*droppingTransport).dropped.Load())
	for _, kind := range []string{"dropped", "lost response", "duplicated", "held", "replayed"} {
		check.True(t, f[kind] > 0, "the network injected no %q fault", kind)
	}
	check.True(t, f["duplicate acknowledged"] > 0, "the consumer acknowledged no duplicate, want some")
	check.True(t, done.fetched > 0, "no gap was filled by range retrieval, want some")
}

// faultyNetwork sits between the Dispatchers and the consumer. Per delivery it drops the request,
// delivers it but loses the response, delivers it twice, holds it back (acknowledging it, as a
// buffering proxy would) to be replayed later and so out of order, or passes it through.
type faultyNetwork struct {
	next http.RoundTripper
	roll func() float64

	mu     sync.Mutex
	held   []heldDelivery
	counts map[string]int
}

type heldDelivery struct {
	url    string
	header http.Header
	body   []byte
}

func (n *faultyNetwork) count(kind string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.counts == nil {
		n.counts = map[string]int{}
	}
	n.counts[kind]++
}

func (n *faultyNetwork) faults() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]int{}
	for k, v := range n.counts {
		out[k] = v
	}
	return out
}

func (n *faultyNetwork) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, ok := producer.EndpointIDFromContext(req.Context()); !ok {
		return nil, errors.New("drivertest: delivery request without an endpoint ID in its context")
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	_ = req.Body.Close()
	d := heldDelivery{url: req.URL.String(), header: req.Header.Clone(), body: body}
	switch r := n.roll(); {
	case r < 0.15:
		n.count("dropped")
		return nil, errors.New("drivertest: injected connection reset")
	case r < 0.25:
		n.count("lost response")
		if resp, err := n.send(req.Context(), d); err == nil {
			_ = resp.Body.Close()
		}
		return nil, errors.New("drivertest: injected connection reset after delivery")
	case r < 0.35:
		n.count("duplicated")
		if resp, err := n.send(req.Context(), d); err == nil {
			_ = resp.Body.Close()
		}
		return n.send(req.Context(), d)
	case r < 0.50:
		n.count("held")
		n.mu.Lock()
		n.held = append(n.held, d)
		n.mu.Unlock()
		return &http.Response{StatusCode: http.StatusAccepted, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
	}
	return n.send(req.Context(), d)
}

// replaySome delivers each held request with probability p, in random order.
func (n *faultyNetwork) replaySome(p float64) {
	n.mu.Lock()
	var now, later []heldDelivery
	for _, d := range n.held {
		if n.roll() < p {
			now = append(now, d)
		} else {
			later = append(later, d)
		}
	}
	n.held = later
	n.mu.Unlock()
	for i := len(now) - 1; i >= 0; i-- { // newest first: as out of order as it gets
		n.count("replayed")
		resp, err := n.send(context.Background(), now[i])
		if err == nil {
			_ = resp.Body.Close()
		}
		if err != nil || resp.StatusCode >= 500 {
			// The proxy acknowledged the delivery, so it must see it through, like any store-and-forward
			// hop: keep it for a later replay.
			n.mu.Lock()
			n.held = append(n.held, now[i])
			n.mu.Unlock()
		}
	}
}

// send delivers d to the consumer and tallies what the consumer answered.
func (n *faultyNetwork) send(ctx context.Context, d heldDelivery) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(d.body))
	if err != nil {
		return nil, err
	}
	req.Header = d.header.Clone()
	resp, err := n.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		var out struct {
			Outcome string `json:"outcome"`
		}
		if json.Unmarshal(body, &out) == nil && out.Outcome == "duplicate" {
			n.count("duplicate acknowledged")
		}
	} else if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		return nil, fmt.Errorf("drivertest: consumer answered %d without a problem", resp.StatusCode)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// droppingTransport drops a fifth of the consumer's range requests, so that some gap fetches fail and
// the consumer has to answer 503 and rely on the producer's retry.
type droppingTransport struct {
	next    http.RoundTripper
	roll    func() float64
	dropped atomic.Int64
}

func (d *droppingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if d.roll() < 0.2 {
		d.dropped.Add(1)
		return nil, errors.New("drivertest: injected range request failure")
	}
	return d.next.RoundTrip(req)
}
