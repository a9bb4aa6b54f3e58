package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/examples/consumer/consumer"
	"github.com/svcplatform/conventions/examples/internal/apiclient"
	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
)

// Delivery health in the demo: a second evaluation's endpoints that misbehave the way real ones do.
// One answers 410 Gone — the producer disables it at once and tells the licensee's watcher endpoint
// by a webhook_endpoint.disabled event; one is busy and answers some deliveries 429 with
// Retry-After — the producer waits at least that long before it tries again, and nothing is lost.
const (
	// busyEvents is how many test events the busy endpoint is sent; busyEvery-th ones are answered
	// 429 once, with Retry-After: busyPause.
	busyEvents = 6
	busyEvery  = 3
	busyPause  = time.Second
)

// healthResult is what the delivery-health part of the run established.
type healthResult struct {
	Err error
	// Triggered counts the test events sent to the misbehaving endpoints.
	Triggered int
	// GoneStatus and GoneReason are the 410 endpoint's status and disabled_reason at the end;
	// GoneRequests counts the requests it received.
	GoneStatus, GoneReason string
	GoneRequests           int
	// Notices are the webhook_endpoint.disabled events the watcher processed: "<endpoint>:<reason>".
	Notices []string
	// GoneID names the 410 endpoint, for the notices.
	GoneID string
	// BusyProcessed counts the events the busy endpoint's consumer processed, of busyEvents;
	// BusyPauses the 429s it answered, and ShortestPause the least time between a 429 and the
	// retry of the same event.
	BusyProcessed int64
	BusyPauses    int
	ShortestPause time.Duration
}

// OK reports whether the 410 endpoint was disabled as gone and its licensee told once, and the busy
// endpoint got every event after pauses at least as long as it asked.
func (h healthResult) OK() bool {
	return h.Err == nil && h.GoneStatus == "disabled" && h.GoneReason == producer.DisabledGone && h.GoneRequests == 1 &&
		len(h.Notices) == 1 && h.Notices[0] == h.GoneID+":"+producer.DisabledGone &&
		h.BusyProcessed == busyEvents && h.BusyPauses == busyEvents/busyEvery && h.ShortestPause >= busyPause
}

// healthRig is the second evaluation: its client, the three endpoints' servers and consumers.
type healthRig struct {
	api          *apiclient.Client
	gone, busy   apiclient.Endpoint
	watch        apiclient.Endpoint
	busyCon      *consumer.Consumer
	watchCon     *consumer.Consumer
	servers      []*http.Server
	wg           sync.WaitGroup
	goneRequests int

	mu      sync.Mutex
	notices []string
	paused  map[string]time.Time // sequence → when its 429 was answered
	retried map[string]bool      // sequences retried after their 429
	pauses  int
	least   time.Duration
}

// startHealth registers the misbehaving endpoints under a second sandbox licensee, starts their
// servers on loopback, and sends their test events.
func startHealth(ctx context.Context, srv *server.Server, baseURL string) (*healthRig, error) {
	creds, err := srv.IssueCredentials(ctx, apikey.Sandbox)
	if err != nil {
		return nil, err
	}
	h := &healthRig{paused: map[string]time.Time{}, retried: map[string]bool{}, api: &apiclient.Client{BaseURL: baseURL, APIKey: creds.APIKey,
		HTTP: &http.Client{Timeout: 10 * time.Second, Transport: &idempotency.Transport{MaxAttempts: 3}}}}
	listen := func(handler http.Handler) (string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		hs := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
		h.servers = append(h.servers, hs)
		h.wg.Go(func() { _ = hs.Serve(ln) })
		return "http://" + ln.Addr().String() + "/webhooks", nil
	}
	fail := func(err error) (*healthRig, error) {
		h.stop()
		return nil, err
	}

	// Gone: every delivery is answered 410.
	var goneMu sync.Mutex
	url, err := listen(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		goneMu.Lock()
		h.goneRequests++
		goneMu.Unlock()
		w.WriteHeader(http.StatusGone)
	}))
	if err != nil {
		return fail(err)
	}
	if h.gone, err = h.api.CreateEndpoint(ctx, url, "sandbox.test"); err != nil {
		return fail(err)
	}

	// Watch: receives webhook_endpoint.disabled, verified and sequenced like any delivery.
	var watchHandler handlerRef
	if url, err = listen(&watchHandler); err != nil {
		return fail(err)
	}
	if h.watch, err = h.api.CreateEndpoint(ctx, url, producer.EventEndpointDisabled); err != nil {
		return fail(err)
	}
	h.watchCon, err = consumer.New(consumer.Config{EndpointID: h.watch.ID, Secret: h.watch.Secret, BaseURL: baseURL,
		APIKey: creds.APIKey, APIVersion: h.watch.APIVersion, Process: func(_ context.Context, s webhook.Step) error {
			var data struct {
				Endpoint struct {
					ID string `json:"id"`
				} `json:"endpoint"`
				Reason string `json:"reason"`
			}
			if err := json.Unmarshal(s.Event.Data, &data); err != nil {
				return err
			}
			h.mu.Lock()
			h.notices = append(h.notices, data.Endpoint.ID+":"+data.Reason)
			h.mu.Unlock()
			return nil
		}})
	if err != nil {
		return fail(err)
	}
	watchHandler.set(h.watchCon)

	// Busy: every busyEvery-th event is answered 429 once, with Retry-After; the consumer takes the rest.
	var busyHandler handlerRef
	if url, err = listen(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seq := r.Header.Get(webhook.HeaderSequence)
		n, _ := strconv.Atoi(seq)
		h.mu.Lock()
		at, pausedBefore := h.paused[seq]
		if n%busyEvery == 0 && !pausedBefore {
			h.paused[seq] = time.Now()
			h.pauses++
			h.mu.Unlock()
			w.Header().Set("Retry-After", strconv.Itoa(int(busyPause/time.Second)))
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		if pausedBefore && !h.retried[seq] {
			h.retried[seq] = true
			if waited := time.Since(at); h.least == 0 || waited < h.least {
				h.least = waited
			}
		}
		h.mu.Unlock()
		busyHandler.ServeHTTP(w, r)
	})); err != nil {
		return fail(err)
	}
	if h.busy, err = h.api.CreateEndpoint(ctx, url, "sandbox.test"); err != nil {
		return fail(err)
	}
	if h.busyCon, err = consumer.New(consumer.Config{EndpointID: h.busy.ID, Secret: h.busy.Secret, BaseURL: baseURL,
		APIKey: creds.APIKey, APIVersion: h.busy.APIVersion}); err != nil {
		return fail(err)
	}
	busyHandler.set(h.busyCon)

	if err := h.api.Trigger(ctx, h.gone.ID, map[string]string{"note": "answered 410"}); err != nil {
		return fail(err)
	}
	for i := range busyEvents {
		if err := h.api.Trigger(ctx, h.busy.ID, map[string]int{"n": i + 1}); err != nil {
			return fail(err)
		}
	}
	return h, nil
}

// triggered is how many events startHealth published.
func (h *healthRig) triggered() int { return 1 + busyEvents }

// done reports whether the busy endpoint has every event and the watcher its notice.
func (h *healthRig) done() bool {
	return h.busyCon.Stats().Processed >= busyEvents && h.watchCon.Stats().Processed >= 1
}

// delivered is how many deliveries the rig's endpoints acknowledged: the busy one's and the notices.
func (h *healthRig) delivered() int64 {
	return h.busyCon.Stats().Processed + h.watchCon.Stats().Processed
}

// result reads the 410 endpoint's state and sums up.
func (h *healthRig) result(ctx context.Context) healthResult {
	r := healthResult{Triggered: h.triggered(), GoneID: h.gone.ID, BusyProcessed: h.busyCon.Stats().Processed}
	ep, err := h.api.GetEndpoint(ctx, h.gone.ID)
	r.Err = err
	r.GoneStatus, r.GoneReason = ep.Status, ep.DisabledReason
	h.mu.Lock()
	defer h.mu.Unlock()
	r.GoneRequests = h.goneRequests
	r.Notices = append(r.Notices, h.notices...)
	r.BusyPauses, r.ShortestPause = h.pauses, h.least
	if r.Err == nil && !h.done() {
		r.Err = errors.New("the busy endpoint or the watcher did not get everything in time")
	}
	return r
}

// stop shuts the rig's servers down.
func (h *healthRig) stop() {
	for _, hs := range h.servers {
		_ = hs.Close()
	}
	h.wg.Wait()
}

// handlerRef is a handler set after its server starts: the consumer needs the endpoint's ID and
// secret, which registration gives once the URL is known.
type handlerRef struct {
	mu sync.Mutex
	h  http.Handler
}

func (r *handlerRef) set(h http.Handler) {
	r.mu.Lock()
	r.h = h
	r.mu.Unlock()
}

func (r *handlerRef) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	h := r.h
	r.mu.Unlock()
	if h == nil {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	h.ServeHTTP(w, req)
}
