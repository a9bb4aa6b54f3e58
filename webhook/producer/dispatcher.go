package producer

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/svcplatform/conventions/webhook"
)

// Defaults of DispatcherOptions.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultJitter       = 0.2
	DefaultBatchSize    = 100
	DefaultWorkers      = 8
	DefaultPollInterval = time.Second
	DefaultUserAgent    = "svcplatform-webhooks/1"
	// DefaultRetention is how long events stay retrievable by range (DECISIONS D3): 30 days.
	DefaultRetention = 30 * 24 * time.Hour
	// DefaultCleanupInterval is how often Run applies the retention.
	DefaultCleanupInterval = time.Minute
	// CleanupBatch is how many events one Log.Cleanup call may remove.
	CleanupBatch = 1000
)

// settleTimeout bounds the store calls that record an attempt's outcome. They run even after the
// dispatcher's context is cancelled, so that a stopping dispatcher does not leave a delivery it has
// made looking undelivered.
const settleTimeout = 10 * time.Second

// maxDrain is how much of a response body is read so the connection can be reused; the body itself
// means nothing to the producer.
const maxDrain = 64 << 10

// DefaultSchedule returns the default retry schedule: delays doubling from one minute up to twelve
// hours, 15 retries over 72 hours in all, so an endpoint that is down for up to about three days still
// receives its events (Stripe's window). Jitter spreads each delay by ±20 %.
func DefaultSchedule() []time.Duration {
	return ExponentialSchedule(time.Minute, 12*time.Hour, 72*time.Hour)
}

// ExponentialSchedule returns retry delays that start at first, double up to ceiling, and stop when
// they add up to total (the last delay is shortened to land on it). It returns nil when any argument is
// not positive.
func ExponentialSchedule(first, ceiling, total time.Duration) []time.Duration {
	if first <= 0 || ceiling <= 0 || total <= 0 {
		return nil
	}
	var out []time.Duration
	var sum time.Duration
	for d := min(first, ceiling); sum < total; d = min(2*d, ceiling) {
		d = min(d, total-sum)
		out = append(out, d)
		sum += d
	}
	return out
}

// DispatcherOptions configures a Dispatcher. The zero value (or nil) means the defaults. NewDispatcher
// copies what it needs, so the options may be reused.
type DispatcherOptions struct {
	// Client sends the deliveries. nil means a client on http.DefaultTransport that does not follow
	// redirects: a 3xx is not a 2xx, so it is a failed attempt.
	Client *http.Client
	// Timeout bounds each delivery request; 0 means DefaultTimeout.
	Timeout time.Duration
	// Schedule lists the delays before the first retry, the second, and so on; its length is the number
	// of retries, after which a delivery is abandoned. nil means DefaultSchedule().
	Schedule []time.Duration
	// Jitter is the fraction by which each delay is randomly lengthened or shortened, so that the
	// retries of many events do not arrive together. 0 means DefaultJitter; negative means none.
	Jitter float64
	// Rand returns uniform numbers in [0, 1) for the jitter; nil means math/rand/v2.Float64.
	Rand func() float64
	// Lease is how long a claimed batch stays reserved for this dispatcher. It must exceed Timeout; 0
	// means the larger of one minute and three Timeouts. A dispatcher that dies keeps its deliveries
	// away from the others only until its lease ends.
	Lease time.Duration
	// BatchSize is the most deliveries claimed per pass; 0 means DefaultBatchSize.
	BatchSize int
	// Workers is how many endpoints are delivered to at once; 0 means DefaultWorkers. Each endpoint's
	// deliveries of a pass go one after the other, in sequence order.
	Workers int
	// PollInterval is how long Run waits after a pass that found less than a full batch; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// Now is the clock; nil means time.Now. It stamps signatures and decides due times and retries.
	Now func() time.Time
	// Logger records failed attempts and store errors (never a URL query, signature or secret); nil
	// means no logging.
	Logger *slog.Logger
	// Render renders each event for its endpoint (the endpoint's pinned API version); nil sends events
	// as stored.
	Render RenderFunc
	// UserAgent is sent with every delivery; empty means DefaultUserAgent.
	UserAgent string
	// Retention is how long events are kept for range retrieval; Run removes older ones every
	// CleanupInterval. 0 means DefaultRetention; negative means Run never removes events (another
	// process applies the retention, or nothing does).
	Retention time.Duration
	// CleanupInterval is how often Run applies the retention; 0 means DefaultCleanupInterval.
	CleanupInterval time.Duration
}

// Dispatcher delivers the due events of a Log to their endpoints: POST of the event JSON with
// X-SVC-Signature (one v1 per endpoint secret) and X-SVC-Sequence; any 2xx is success; anything else,
// a transport error or the per-request timeout is a failed attempt, retried on the schedule with
// jitter. Within one pass an endpoint's deliveries go in sequence order and stop at the first failure
// (the rest wait for the failed one's retry), so order is kept as far as the endpoint allows; the
// consumer's sequence check and range fetch do the rest.
//
// Several Dispatchers — in one process or in replicas sharing a pgstore.EventLog — may run on one Log:
// the Log's leases keep them from delivering the same attempt at once. Every delivery request's context
// carries the endpoint ID (EndpointIDFromContext), for transports that act per endpoint.
//
// A Dispatcher is safe for concurrent use. The zero value is not usable: build one with NewDispatcher.
type Dispatcher struct {
	log       Log
	endpoints Endpoints
	client    *http.Client
	timeout   time.Duration
	schedule  []time.Duration
	jitter    float64
	rand      func() float64
	lease     time.Duration
	batch     int
	workers   int
	poll      time.Duration
	now       func() time.Time
	logger    *slog.Logger
	render    RenderFunc
	userAgent string
	retention time.Duration // 0: never
	cleanup   time.Duration
	signers   signerCache
}

// NewDispatcher returns a Dispatcher for the deliveries of log to the endpoints in endpoints. It fails
// when an option is out of range.
func NewDispatcher(log Log, endpoints Endpoints, opts *DispatcherOptions) (*Dispatcher, error) {
	if opts == nil {
		opts = &DispatcherOptions{}
	}
	d := &Dispatcher{
		log:       log,
		endpoints: endpoints,
		client:    opts.Client,
		timeout:   cmp.Or(opts.Timeout, DefaultTimeout),
		schedule:  slices.Clone(opts.Schedule),
		jitter:    opts.Jitter,
		rand:      opts.Rand,
		batch:     cmp.Or(opts.BatchSize, DefaultBatchSize),
		workers:   cmp.Or(opts.Workers, DefaultWorkers),
		poll:      cmp.Or(opts.PollInterval, DefaultPollInterval),
		now:       opts.Now,
		logger:    opts.Logger,
		render:    opts.Render,
		userAgent: cmp.Or(opts.UserAgent, DefaultUserAgent),
		retention: cmp.Or(opts.Retention, DefaultRetention),
		cleanup:   cmp.Or(opts.CleanupInterval, DefaultCleanupInterval),
	}
	switch {
	case log == nil || endpoints == nil:
		return nil, errors.New("producer: NewDispatcher needs a Log and Endpoints")
	case d.timeout < 0, d.batch < 0, d.workers < 0, d.poll < 0, opts.Lease < 0, d.cleanup < 0:
		return nil, errors.New("producer: negative dispatcher option")
	case d.jitter > 1:
		return nil, errors.New("producer: Jitter must not exceed 1")
	case opts.Lease > 0 && opts.Lease <= d.timeout:
		return nil, errors.New("producer: Lease must exceed Timeout")
	}
	if d.schedule == nil {
		d.schedule = DefaultSchedule()
	}
	if d.retention < 0 {
		d.retention = 0
	}
	for _, s := range d.schedule {
		if s <= 0 {
			return nil, errors.New("producer: Schedule delays must be positive")
		}
	}
	switch {
	case d.jitter == 0:
		d.jitter = DefaultJitter
	case d.jitter < 0:
		d.jitter = 0
	}
	d.lease = opts.Lease
	if d.lease == 0 {
		d.lease = max(time.Minute, 3*d.timeout)
	}
	if d.client == nil {
		d.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if d.rand == nil {
		d.rand = rand.Float64
	}
	if d.now == nil {
		d.now = time.Now
	}
	if d.logger == nil {
		d.logger = slog.New(slog.DiscardHandler)
	}
	return d, nil
}

// Stats counts what one DeliverDue pass did. It is a plain value; the zero value is a pass that did
// nothing.
type Stats struct {
	Claimed   int // deliveries leased
	Delivered int // attempts that got a 2xx
	Failed    int // failed attempts scheduled for a retry
	Abandoned int // failed attempts that exhausted the schedule, and deliveries to deleted endpoints
	Released  int // deliveries handed back unattempted (behind a failure, lease running out, stopping)
}

func (s *Stats) add(o Stats) {
	s.Claimed += o.Claimed
	s.Delivered += o.Delivered
	s.Failed += o.Failed
	s.Abandoned += o.Abandoned
	s.Released += o.Released
}

// Run delivers due events until ctx is cancelled: a pass (DeliverDue) right after a full batch,
// otherwise after PollInterval, and the retention (Cleanup) every CleanupInterval. On cancellation it
// lets the pass in progress settle — in-flight requests are cancelled and their deliveries handed back
// without counting an attempt — and returns nil. Store and delivery errors are logged and retried,
// never returned.
func (d *Dispatcher) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var lastCleanup time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		if now := d.now(); d.retention > 0 && now.Sub(lastCleanup) >= d.cleanup {
			lastCleanup = now
			if _, err := d.Cleanup(ctx); err != nil && ctx.Err() == nil {
				d.logger.ErrorContext(ctx, "producer: retention cleanup failed", "error", err)
			}
		}
		st, err := d.DeliverDue(ctx)
		if err != nil && ctx.Err() == nil {
			d.logger.ErrorContext(ctx, "producer: dispatcher pass failed", "error", err)
		}
		wait := d.poll
		if err == nil && st.Claimed >= d.batch {
			wait = 0
		}
		timer.Reset(wait)
	}
}

// Cleanup removes the events older than the retention (Now minus Retention), in batches of
// CleanupBatch, and returns how many it removed. With a negative Retention it does nothing.
func (d *Dispatcher) Cleanup(ctx context.Context) (int, error) {
	if d.retention <= 0 {
		return 0, nil
	}
	before := d.now().Add(-d.retention)
	total := 0
	for {
		n, err := d.log.Cleanup(ctx, before, CleanupBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("producer: cleanup: %w", err)
		}
		if n < CleanupBatch {
			return total, nil
		}
	}
}

// DeliverDue makes one pass: it claims up to BatchSize due deliveries, delivers them (endpoints in
// parallel, each endpoint's in sequence order) and records every outcome before it returns. It returns
// an error only when the claim fails.
func (d *Dispatcher) DeliverDue(ctx context.Context) (Stats, error) {
	now := d.now()
	batch, err := d.log.Claim(ctx, now, now.Add(d.lease), d.batch)
	if err != nil {
		return Stats{}, fmt.Errorf("producer: claim deliveries: %w", err)
	}
	groups := groupByStream(batch)
	var (
		mu    sync.Mutex
		total = Stats{Claimed: len(batch)}
		wg    sync.WaitGroup
		work  = make(chan []Delivery)
	)
	for range min(d.workers, len(groups)) {
		wg.Go(func() {
			for g := range work {
				st := d.deliverStream(ctx, g)
				mu.Lock()
				total.add(st)
				mu.Unlock()
			}
		})
	}
	for _, g := range groups {
		work <- g
	}
	close(work)
	wg.Wait()
	return total, nil
}

// groupByStream splits a claimed batch per stream, each group in sequence order, the groups in the
// order their first delivery was claimed.
func groupByStream(batch []Delivery) [][]Delivery {
	idx := make(map[string]int)
	var groups [][]Delivery
	for _, dl := range batch {
		i, ok := idx[dl.Stream]
		if !ok {
			i = len(groups)
			idx[dl.Stream] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], dl)
	}
	for _, g := range groups {
		slices.SortFunc(g, func(a, b Delivery) int {
			switch {
			case a.Sequence < b.Sequence:
				return -1
			case a.Sequence > b.Sequence:
				return 1
			}
			return 0
		})
	}
	return groups
}

// deliverStream delivers one endpoint's claimed deliveries in order.
func (d *Dispatcher) deliverStream(ctx context.Context, group []Delivery) Stats {
	var st Stats
	settle, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	stream := group[0].Stream

	ep, err := d.endpoints.Lookup(ctx, stream)
	switch {
	case errors.Is(err, ErrUnknownEndpoint):
		// The endpoint was deleted: nobody can receive these any more. They stay retrievable by range.
		at := d.now()
		for _, dl := range group {
			d.settleErr(settle, dl, d.log.Failed(settle, dl.Lease, Failure{At: at, Reason: "endpoint not found"}))
			st.Abandoned++
		}
		return st
	case err != nil:
		// Our own outage, not the endpoint's failure: no attempt is counted, and the deliveries wait
		// as long as a first retry would. An empty Schedule (no retries) has no first delay; waiting
		// a poll interval then keeps the dispatcher from re-claiming them at once.
		wait := d.poll
		if len(d.schedule) > 0 {
			wait = d.schedule[0]
		}
		retry := d.now().Add(wait)
		if ctx.Err() != nil {
			retry = d.now()
		}
		d.logger.ErrorContext(ctx, "producer: endpoint lookup failed", "endpoint", stream, "error", err)
		st.Released += d.release(settle, group, retry)
		return st
	}

	for i, dl := range group {
		if ctx.Err() != nil {
			st.Released += d.release(settle, group[i:], d.now())
			return st
		}
		body, sig, reason := d.prepare(ctx, ep, dl)
		// Checked after rendering, which may take any time, and right before the request, which
		// takes up to Timeout: the lease must outlast the request, or another replica could re-claim
		// the delivery and send it while ours is still in flight.
		if now := d.now(); ctx.Err() != nil || now.Add(d.timeout).After(dl.LeaseUntil) {
			// Stopping, or the lease would run out during the request: hand the rest back for the next
			// pass (or another replica) instead of racing a re-claim.
			st.Released += d.release(settle, group[i:], now)
			return st
		}
		if reason == "" {
			reason = d.send(ctx, ep, dl, body, sig)
		}
		at := d.now()
		if reason == "" {
			d.settleErr(settle, dl, d.log.Delivered(settle, dl.Lease, at))
			st.Delivered++
			continue
		}
		if ctx.Err() != nil {
			// The request was cut short by our own shutdown, not by the endpoint: no attempt counted.
			st.Released += d.release(settle, group[i:], at)
			return st
		}
		retry := d.retryAt(dl.Attempts+1, at)
		d.logger.WarnContext(ctx, "producer: delivery failed", "endpoint", stream, "sequence", dl.Sequence,
			"attempt", dl.Attempts+1, "reason", reason, "retry_at", retry)
		d.settleErr(settle, dl, d.log.Failed(settle, dl.Lease, Failure{At: at, RetryAt: retry, Reason: reason}))
		if retry.IsZero() {
			st.Abandoned++
			retry = at // the rest need not wait for a delivery that will never be retried
		} else {
			st.Failed++
		}
		// The endpoint just failed: the rest of its events wait for the failed one's retry, which keeps
		// them behind it in order and spares an endpoint that is down a burst of doomed requests.
		st.Released += d.release(settle, group[i+1:], retry)
		return st
	}
	return st
}

// retryAt returns when attempt number attempt+1 is due after the attempt-th failed at at, or zero
// when the schedule is exhausted.
func (d *Dispatcher) retryAt(attempt int, at time.Time) time.Time {
	if attempt > len(d.schedule) {
		return time.Time{}
	}
	delay := d.schedule[attempt-1]
	if d.jitter > 0 {
		delay = time.Duration(float64(delay) * (1 + d.jitter*(2*d.rand()-1)))
	}
	return at.Add(max(delay, 0))
}

func (d *Dispatcher) release(ctx context.Context, group []Delivery, retryAt time.Time) int {
	for _, dl := range group {
		d.settleErr(ctx, dl, d.log.Release(ctx, dl.Lease, retryAt))
	}
	return len(group)
}

func (d *Dispatcher) settleErr(ctx context.Context, dl Delivery, err error) {
	switch {
	case err == nil:
	case errors.Is(err, ErrLeaseLost):
		// Another dispatcher re-claimed the delivery after our lease ran out; its outcome wins.
		d.logger.WarnContext(ctx, "producer: delivery lease lost", "endpoint", dl.Stream, "sequence", dl.Sequence)
	default:
		// The lease will run out and the delivery be retried: at least once, never lost.
		d.logger.ErrorContext(ctx, "producer: recording delivery outcome failed", "endpoint", dl.Stream,
			"sequence", dl.Sequence, "error", err)
	}
}

// prepare renders and signs one delivery: the body and its X-SVC-Signature, or why it cannot be sent.
func (d *Dispatcher) prepare(ctx context.Context, ep Endpoint, dl Delivery) (body []byte, sig, reason string) {
	body, err := encodeEvent(ctx, d.render, ep, dl.Event)
	if err != nil {
		d.logger.ErrorContext(ctx, "producer: cannot render event", "endpoint", ep.ID, "sequence", dl.Sequence, "error", err)
		return nil, "", "render failed"
	}
	signer, err := d.signers.get(ep)
	if err != nil {
		return nil, "", "no signing secret"
	}
	return body, signer.Sign(body, d.now()), ""
}

// send makes one delivery request and returns "" on success or why it failed.
func (d *Dispatcher) send(ctx context.Context, ep Endpoint, dl Delivery, body []byte, sig string) string {
	rctx, cancel := context.WithTimeout(WithEndpointID(ctx, ep.ID), d.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return "invalid endpoint URL"
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", d.userAgent)
	h.Set(webhook.HeaderSignature, sig)
	h.Set(webhook.HeaderSequence, strconv.FormatUint(dl.Sequence, 10))
	resp, err := d.client.Do(req)
	if err != nil {
		return transportReason(rctx, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return ""
	}
	return "status " + strconv.Itoa(resp.StatusCode)
}

// transportReason describes a failed request without the URL, which may carry a token in its query.
func transportReason(rctx context.Context, err error) string {
	if errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return "timeout"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "request failed: " + err.Error()
}

type endpointIDKey struct{}

// WithEndpointID returns a context carrying a webhook endpoint ID, as every delivery request's context
// does.
func WithEndpointID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, endpointIDKey{}, id)
}

// EndpointIDFromContext returns the webhook endpoint ID a delivery request is for. Transports (the
// sandbox's fault injector, per-endpoint metrics) call it on the request's context.
func EndpointIDFromContext(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(endpointIDKey{}).(string)
	return id, ok
}
