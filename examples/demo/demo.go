package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/examples/consumer/consumer"
	"github.com/svcplatform/conventions/examples/internal/apiclient"
	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"go.opentelemetry.io/otel/trace"
)

// options shape one run of the demo.
type options struct {
	Orders  int // logical orders, each with its own Idempotency-Key
	Workers int // clients sending at once
	// RepeatEvery: every RepeatEvery-th order is sent a second time with the same key after the first
	// answer, as a client that was unsure would; the second answer must be a replay.
	RepeatEvery int
	// ConcurrentEvery: every ConcurrentEvery-th order is sent twice at the same instant with the same
	// key; one runs, the other waits (409 and Retry-After) and gets the replay.
	ConcurrentEvery int
	// LoseResponses is the share of order responses lost on the way back to the client after the server
	// acted: the client cannot know whether the order exists, so its transport retries with the key.
	LoseResponses float64
	// Faults are the webhook faults the sandbox injects on the consumer's endpoint.
	Faults apiclient.Faults
	// Seed makes the faults and lost responses reproducible.
	Seed uint64
	// Timeout bounds the whole run.
	Timeout time.Duration
	// Progress receives progress lines; nil means none.
	Progress io.Writer
	// Traces receives the server's and the consumer's spans; nil means none are made.
	Traces trace.TracerProvider
}

func defaultOptions() options {
	return options{Orders: 300, Workers: 8, RepeatEvery: 10, ConcurrentEvery: 30, LoseResponses: 0.05,
		Faults:  apiclient.Faults{Drop: 0.1, Duplicate: 0.1, Reorder: 0.1, BadSignature: 0.05},
		Timeout: 50 * time.Second}
}

// run starts everything on loopback, creates the orders, waits for every event to be processed, shuts
// everything down and reports. An error means the demo could not run at all; a report that is not OK
// means the platform lost or duplicated something.
func run(ctx context.Context, opts options) (report, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	say := func(format string, args ...any) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "[%5.1fs] "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
		}
	}

	// The order server, with retries and polling fast enough for a demo that lasts seconds.
	srvLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return report{}, err
	}
	baseURL := "http://" + srvLn.Addr().String()
	// The server's and the consumer's metrics go to one in-memory reader, read for the report.
	tel, err := newTelemetry(opts.Traces)
	if err != nil {
		_ = srvLn.Close()
		return report{}, err
	}
	srv, err := server.New(server.Config{BaseURL: baseURL, Telemetry: tel.tel, Webhooks: server.WebhookOptions{
		RetrySchedule: producer.ExponentialSchedule(20*time.Millisecond, time.Second, time.Hour),
		PollInterval:  10 * time.Millisecond,
		ReorderHold:   100 * time.Millisecond,
		FaultRand:     rand.New(rand.NewPCG(opts.Seed, 1)),
		// The consumer listens on loopback, which the delivery guard refuses by default (a customer's
		// URL must never reach the server's own machine): the demo opens loopback to the sandbox,
		// where its keys are, and only that.
		SandboxGuard: &ssrf.Guard{Allow: []netip.Prefix{
			netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}},
	}})
	if err != nil {
		_ = srvLn.Close()
		return report{}, err
	}
	var wg sync.WaitGroup
	srvCtx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServer()
	wg.Go(func() { _ = srv.Serve(srvCtx, srvLn) })
	defer wg.Wait() // after the cancels above have run: nothing outlives run
	creds, err := srv.IssueCredentials(ctx, apikey.Sandbox)
	if err != nil {
		return report{}, err
	}
	say("seed %d: run with -seed %d to draw the same faults and lost responses", opts.Seed, opts.Seed)
	say("order server listening on %s; sandbox key issued for %s", baseURL, creds.Licensee)

	// The client: an idempotency.Transport retries with the same key, over a link that loses some
	// responses after the server has acted on the request.
	lossy := &lossyTransport{base: http.DefaultTransport, rate: opts.LoseResponses,
		rng: rand.New(rand.NewPCG(opts.Seed, 2))}
	// The evaluation speaks v2, the newest version: its first request pins it there, and its
	// consumer fetches missed events under /v2/.
	api := &apiclient.Client{BaseURL: baseURL, APIKey: creds.APIKey, Version: "v2", HTTP: &http.Client{
		Timeout: 10 * time.Second,
		Transport: &idempotency.Transport{Base: lossy, MaxAttempts: 8,
			MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond},
	}}

	// The consumer: listen first, so that its URL can be registered, then build it with the
	// endpoint's ID and secret.
	conLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return report{}, err
	}
	ep, err := api.CreateEndpoint(ctx, "http://"+conLn.Addr().String()+"/webhooks", "order.created")
	if err != nil {
		_ = conLn.Close()
		return report{}, err
	}
	processed := newOrderSet()
	con, err := consumer.New(consumer.Config{EndpointID: ep.ID, Secret: ep.Secret, BaseURL: baseURL,
		APIKey: creds.APIKey, APIVersion: ep.APIVersion, Audit: true, CatchUpInterval: 500 * time.Millisecond,
		Hooks: tel.tel.Webhook(),
		Process: func(_ context.Context, s webhook.Step) error {
			var o apiclient.Order
			if err := json.Unmarshal(s.Event.Data, &o); err != nil {
				return err
			}
			processed.add(o.ID)
			return nil
		}})
	if err != nil {
		_ = conLn.Close()
		return report{}, err
	}
	conCtx, stopConsumer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConsumer()
	wg.Go(func() { _ = con.Serve(conCtx, conLn) })
	say("consumer listening on http://%s, endpoint %s registered, pinned to %s", conLn.Addr(), ep.ID, ep.APIVersion)

	health, err := startHealth(ctx, srv, baseURL)
	if err != nil {
		return report{}, err
	}
	defer health.stop()
	say("a second evaluation's endpoints: %s answers 410 Gone; %s answers 429 with Retry-After: %d once to each event whose sequence is a multiple of %d; %s watches for webhook_endpoint.disabled",
		health.gone.ID, health.busy.ID, int(busyPause/time.Second), busyEvery, health.watch.ID)

	if err := api.SetFaults(ctx, ep.ID, opts.Faults); err != nil {
		return report{}, err
	}
	f := opts.Faults
	say("webhook faults on: drop %.0f%%, duplicate %.0f%%, reorder %.0f%%, bad signature %.0f%%",
		100*f.Drop, 100*f.Duplicate, 100*f.Reorder, 100*f.BadSignature)

	say("creating %d orders with %d clients (every %dth repeated, every %dth sent twice at once, %.0f%% of responses lost)",
		opts.Orders, opts.Workers, opts.RepeatEvery, opts.ConcurrentEvery, 100*opts.LoseResponses)
	status := func(phase string) {
		st, cs := srv.Stats(), con.Stats()
		say("%s: orders %d/%d · replays %d · events emitted %d, processed %d (%d recovered by range fetch)",
			phase, st.OrdersCreated, opts.Orders, st.Idempotency.Replayed, st.EventsEmitted, cs.Processed, cs.Recovered)
	}
	// Halfway through, the endpoint's secret is rolled with an hour's overlap, as a team would after a
	// leak: the consumer keeps the secret it has, and every delivery and range page still verifies,
	// for each carries a signature with the old secret beside the new one's.
	every := max(opts.Orders/6, 1)
	half := make(chan struct{})
	var halfOnce sync.Once
	rolled := make(chan rollResult, 1)
	wg.Go(func() {
		select {
		case <-half:
		case <-ctx.Done():
			rolled <- rollResult{Err: ctx.Err()}
			return
		}
		ep, err := api.RollSecret(ctx, ep.ID, time.Hour)
		rolled <- rollResult{Done: err == nil, Err: err, Secret: ep.Secret}
	})
	c := createOrders(ctx, api, opts, func(answered int) {
		if answered%every == 0 {
			status("creating")
		}
		if answered >= opts.Orders/2 {
			halfOnce.Do(func() { close(half) })
		}
	})
	halfOnce.Do(func() { close(half) }) // no order answered: roll all the same
	roll := <-rolled
	if roll.Done {
		say("the secret was rolled halfway: deliveries carry two signatures since; the consumer verifies with the one it has")
	}

	// Wait for every event: deliveries, retries after rejected signatures, held reorderings, and the
	// consumer's catch-up for drops that no later delivery revealed. Then for the dispatcher: the
	// consumer may have fetched a dropped event by range while its delivery still waits for a retry,
	// and the report counts every event delivered once in the end.
	say("all orders answered; waiting for the consumer to process every event")
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for n := 1; ctx.Err() == nil; n++ {
		emitted := srv.Stats().EventsEmitted - int64(health.triggered()) // the orders' events
		if con.Stats().Processed >= emitted && processed.containsAll(c.ids) && health.done() {
			if f, err := tel.collect(ctx); err == nil && f.Delivered >= emitted+health.delivered() {
				break
			}
		}
		if n%25 == 0 {
			status("delivering")
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	status("done")
	roll.Verified = checkRoll(ctx, baseURL, creds.APIKey, ep, roll)
	healthSeen := health.result(ctx)
	ordersCreated := srv.Stats().OrdersCreated // before the tour's own order
	versions := tourVersions(ctx, srv, baseURL, say)
	// Stop the server first: its shutdown sends deliveries still held by the reorder fault, which the
	// consumer must still be there to see (and recognise as duplicates).
	stopServer()
	stopConsumer()
	wg.Wait()

	st, cs := srv.Stats(), con.Stats()
	rep := report{
		OrdersRequested: opts.Orders, OrdersCreated: ordersCreated, DistinctOrderIDs: len(c.ids),
		Inconsistent: c.inconsistent, RequestErrors: c.errors, FirstError: c.firstError,
		ResponsesLost: lossy.lost.Load(), Repeats: c.repeats, ConcurrentPairs: c.pairs,
		ReplaysServed: st.Idempotency.Replayed, Conflicts: st.Idempotency.Conflicts,
		EventsEmitted: st.EventsEmitted - int64(healthSeen.Triggered), EventsProcessed: cs.Processed, Recovered: cs.Recovered,
		DuplicateDeliveries: cs.Duplicates, RejectedDeliveries: cs.Rejected, Faults: st.Faults,
		ProcessedTwice: cs.ProcessedTwice, MissingOrders: processed.missing(c.ids),
		Elapsed: time.Since(start), TimedOut: ctx.Err() != nil, Versions: versions, Roll: roll, Health: healthSeen,
	}
	if rep.Metrics, err = tel.read(context.WithoutCancel(ctx)); err != nil {
		return report{}, err
	}
	return rep, nil
}

// rollResult is what became of the secret roll halfway through the run.
type rollResult struct {
	Done   bool
	Err    error
	Secret string // the new secret
	// Verified: once every event was processed, a range page of the whole stream verified with the old
	// secret alone and with the new one alone — the consumer may switch whenever it likes.
	Verified bool
}

// checkRoll fetches the endpoint's stream by range with a verifier that holds only the old secret and
// one that holds only the new, and reports whether both verify every page.
func checkRoll(ctx context.Context, baseURL, apiKey string, ep apiclient.Endpoint, roll rollResult) bool {
	if !roll.Done {
		return false
	}
	for _, secret := range []string{ep.Secret, roll.Secret} {
		v, err := webhook.NewVerifier([]string{secret}, nil)
		if err != nil {
			return false
		}
		rc, err := webhook.NewRangeClient(baseURL, apiKey, v, &webhook.RangeClientOptions{APIVersion: ep.APIVersion})
		if err != nil {
			return false
		}
		if _, err := rc.FetchRange(ctx, ep.ID, 1, 100); err != nil {
			return false
		}
	}
	return true
}

// versionSeen is what a client pinned to one version saw of an order.
type versionSeen struct {
	Version     string
	Direction   string // the member that carried the order's direction: "side" in v1, "direction" in v2
	Deprecation string
	Sunset      string
	Successor   string // the successor-version link, if any
	Err         error
}

// tourVersions shows the two versions side by side: a second evaluation pinned to v1 creates an order
// and reads it, and reads it again as v2 (a sandbox key may try the other version); v1's answers
// announce its deprecation, sunset and successor.
func tourVersions(ctx context.Context, srv *server.Server, baseURL string, say func(string, ...any)) []versionSeen {
	creds, err := srv.IssueCredentials(ctx, apikey.Sandbox)
	if err != nil {
		return []versionSeen{{Err: err}}
	}
	v1 := &apiclient.Client{BaseURL: baseURL, APIKey: creds.APIKey, Version: "v1"}
	o, _, err := v1.CreateOrder(ctx, idempotency.NewKey(), "acc_v1", "sell")
	if err != nil {
		return []versionSeen{{Version: "v1", Err: err}}
	}
	var out []versionSeen
	for _, version := range []string{"v1", "v2"} {
		seen := versionSeen{Version: version}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/"+version+"/orders/"+o.ID, nil)
		if err != nil {
			return append(out, versionSeen{Version: version, Err: err})
		}
		req.Header.Set("Authorization", "Bearer "+creds.APIKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return append(out, versionSeen{Version: version, Err: err})
		}
		var body map[string]any
		err = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return append(out, versionSeen{Version: version, Err: fmt.Errorf("GET %s: status %d: %v", req.URL.Path, resp.StatusCode, err)})
		}
		for _, member := range []string{"side", "direction"} {
			if body[member] == "sell" {
				seen.Direction = member
			}
		}
		seen.Deprecation, seen.Sunset = resp.Header.Get("Deprecation"), resp.Header.Get("Sunset")
		for _, l := range resp.Header.Values("Link") {
			if strings.Contains(l, `rel="successor-version"`) {
				seen.Successor = l
			}
		}
		say("%s: order %s has %q; Deprecation %q, Sunset %q, %s", version, o.ID, seen.Direction,
			seen.Deprecation, seen.Sunset, cmp.Or(seen.Successor, "no successor link"))
		out = append(out, seen)
	}
	return out
}

// created is what the clients saw.
type created struct {
	ids          map[string]bool // every order ID any answer carried
	inconsistent int             // logical orders whose answers disagreed on the ID: done twice
	errors       int
	firstError   error
	repeats      int
	pairs        int
}

// createOrders creates opts.Orders logical orders with opts.Workers clients.
// onAnswered is called with the number of orders answered so far, after each one.
func createOrders(ctx context.Context, api *apiclient.Client, opts options, onAnswered func(int)) created {
	var mu sync.Mutex
	answered := 0
	c := created{ids: make(map[string]bool)}
	record := func(ids []string, err error, repeated, pair bool) {
		mu.Lock()
		defer mu.Unlock()
		answered++
		onAnswered(answered)
		if err != nil {
			c.errors++
			if c.firstError == nil {
				c.firstError = err
			}
			return
		}
		for _, id := range ids {
			if id != ids[0] {
				c.inconsistent++
				break
			}
		}
		for _, id := range ids {
			c.ids[id] = true
		}
		if repeated {
			c.repeats++
		}
		if pair {
			c.pairs++
		}
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range opts.Workers {
		wg.Go(func() {
			for i := range work {
				key := idempotency.NewKey()
				account := fmt.Sprintf("acc_%03d", i%50)
				side := server.SideBuy
				if i%2 == 1 {
					side = server.SideSell
				}
				switch {
				case opts.ConcurrentEvery > 0 && i%opts.ConcurrentEvery == 0:
					var a, b apiclient.Order
					var errA, errB error
					var pair sync.WaitGroup
					pair.Go(func() { a, _, errA = api.CreateOrder(ctx, key, account, side) })
					pair.Go(func() { b, _, errB = api.CreateOrder(ctx, key, account, side) })
					pair.Wait()
					record([]string{a.ID, b.ID}, errors.Join(errA, errB), false, true)
				case opts.RepeatEvery > 0 && i%opts.RepeatEvery == 0:
					o, _, err := api.CreateOrder(ctx, key, account, side)
					if err != nil {
						record(nil, err, false, false)
						continue
					}
					again, res, err := api.CreateOrder(ctx, key, account, side)
					if err == nil && !res.Replayed {
						err = fmt.Errorf("repeated request for %s was not answered as a replay", o.ID)
					}
					record([]string{o.ID, again.ID}, err, true, false)
				default:
					o, _, err := api.CreateOrder(ctx, key, account, side)
					record([]string{o.ID}, err, false, false)
				}
			}
		})
	}
	for i := 1; i <= opts.Orders; i++ {
		select {
		case work <- i:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return c
}

// lossyTransport loses some order responses after the server has answered: the request had its
// effect, the client never hears of it. Only a retry with the same Idempotency-Key can then tell the
// client what happened without creating a second order.
type lossyTransport struct {
	base http.RoundTripper
	rate float64
	mu   sync.Mutex
	rng  *rand.Rand
	lost atomic.Int64
}

var errResponseLost = errors.New("demo: connection reset before the response arrived (simulated)")

func (t *lossyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/orders") {
		return resp, err
	}
	t.mu.Lock()
	lose := t.rng.Float64() < t.rate
	t.mu.Unlock()
	if !lose {
		return resp, nil
	}
	t.lost.Add(1)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return nil, errResponseLost
}

// orderSet is the set of order IDs whose events the consumer processed.
type orderSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func newOrderSet() *orderSet { return &orderSet{ids: make(map[string]bool)} }

func (s *orderSet) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[id] = true
}

func (s *orderSet) containsAll(ids map[string]bool) bool { return s.missing(ids) == 0 }

func (s *orderSet) missing(ids map[string]bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id := range ids {
		if !s.ids[id] {
			n++
		}
	}
	return n
}
