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
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/svcplatform/conventions/webhook/producer/driver"

	"github.com/svcplatform/conventions/webhook"
)

// Defaults of DispatcherOptions.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultJitter       = 0.2
	DefaultBatchSize    = 100
	DefaultStreamBatch  = 10
	DefaultWorkers      = 256
	DefaultPerOwner     = 32
	DefaultPerEndpoint  = 1
	DefaultPollInterval = time.Second
	DefaultUserAgent    = "svcplatform-webhooks/1"
	// DefaultRetention is how long events stay retrievable by range (docs/decisions.md D3): 30 days.
	DefaultRetention = 30 * 24 * time.Hour
	// DefaultCleanupInterval is how often Run applies the retention.
	DefaultCleanupInterval = time.Minute
	// CleanupBatch is how many events one Log.Cleanup call may remove.
	CleanupBatch = 1000
)

// settleTimeout bounds each store call that records an attempt's outcome. Such calls run even after
// the dispatcher's context is cancelled, so that a stopping dispatcher does not leave a delivery it has
// made looking undelivered, and a failed one is retried (see record).
const settleTimeout = 10 * time.Second

// Bounds of the pause between tries to record an outcome.
const (
	recordBackoffMin = 50 * time.Millisecond
	recordBackoffMax = 5 * time.Second
)

// maxDrain is how much of a response body is read so the connection can be reused; beyond the
// snippet the history keeps, the body means nothing to the producer.
const maxDrain = 64 << 10

// ownerCacheSize bounds the dispatcher's memory of which licensee owns which endpoint.
const ownerCacheSize = 1 << 16

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
	// Client sends the deliveries. nil means NewDeliveryClient(Guard): it dials only public unicast
	// addresses (checked after DNS resolution, at dial time) and does not follow redirects, so a 3xx
	// is a failed attempt. A Client of your own replaces both protections: build it with
	// NewDeliveryClient unless your endpoints are all trusted.
	Client *http.Client
	// Guard is the address policy of the default Client; nil means public unicast addresses only.
	// The sandbox, tests and a demo on loopback allow-list what they need here. Ignored when Client
	// is set.
	Guard *AddressGuard
	// ClientFor, when set, picks the client of each endpoint's deliveries, so that endpoints of
	// different environments go through different guards: a production endpoint through a client
	// whose AddressGuard opens nothing the sandbox's opens. Return one of a few clients built once
	// (NewDeliveryClient per environment), never a new one per call; nil means the default client
	// (Client, or NewDeliveryClient(Guard)).
	ClientFor func(Endpoint) *http.Client
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
	// Lease is how long claimed deliveries stay reserved for this dispatcher. It must exceed Timeout;
	// 0 means the larger of one minute and three Timeouts. A dispatcher that dies keeps its deliveries
	// (and so their endpoints) away from the others only until its lease ends.
	Lease time.Duration
	// BatchSize is the most deliveries one claim leases; 0 means DefaultBatchSize.
	BatchSize int
	// StreamBatch is the most deliveries of one endpoint one claim leases, so that one endpoint's
	// backlog never fills a claim; 0 means DefaultStreamBatch.
	StreamBatch int
	// Workers is the most delivery requests in flight at once, over all endpoints; 0 means
	// DefaultWorkers.
	Workers int
	// PerOwner is the most delivery requests in flight at once to the endpoints of one licensee, so
	// that a licensee with many slow endpoints cannot take every worker; 0 means DefaultPerOwner.
	PerOwner int
	// PerEndpoint is the most delivery requests in flight at once to one endpoint; 0 means
	// DefaultPerEndpoint. With 1 an endpoint receives its events one after the other in sequence
	// order; with more, a claimed run of events goes out together and order is the consumer's
	// sequence check's to restore.
	PerEndpoint int
	// PollInterval is how long Run waits after a claim that found less than a full batch; 0 means
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
	// Sequencer configures the Sequencer the Dispatcher runs when its Log is a Sequencing one
	// (pgstore.EventLog, memstore.DeferredLog): events appended there are numbered after they commit,
	// and the Dispatcher's Run numbers them in the background, waking its own claim loop after each
	// batch. nil means the defaults. It is ignored for a Log that numbers at Append.
	Sequencer *SequencerOptions
	// Observer is told of every delivery attempt (AttemptStart, InjectTrace, AttemptEnd), for metrics
	// and traces; nil observes nothing, at no cost.
	Observer Observer
}

// Dispatcher delivers the due events of a Log to their endpoints: POST of the event JSON with
// X-SVC-Signature (one v1 per endpoint secret) and X-SVC-Sequence; any 2xx is success; anything else,
// a transport error or the per-request timeout is a failed attempt, retried on the schedule with
// jitter. Every attempt is recorded right after it is made, with its status, latency and the start of
// the answer (Log.Attempts lists them) — except that an answer from a connection that only an
// AddressGuard's allow-list admitted (an address that is not public unicast) is recorded by its
// status alone: the history is the endpoint owner's to read, and what answers on an allow-listed
// internal address is not theirs.
//
// Each endpoint progresses on its own: the dispatcher claims due deliveries, at most StreamBatch of
// one endpoint per claim, and hands each endpoint's run to a worker of its own; it claims again as
// soon as a claim came back full or a worker finishes, never waiting for the slowest endpoint. An
// endpoint's deliveries go in sequence order (with PerEndpoint 1) and stop at the first failure: the
// rest wait for the failed one's retry, so order is kept as far as the endpoint allows, and the
// consumer's sequence check and range fetch do the rest. Workers, PerOwner and PerEndpoint bound the
// requests in flight, in all, per licensee and per endpoint, so that one licensee's slow or failing
// endpoints delay only that licensee's deliveries.
//
// Several Dispatchers — in one process or in replicas sharing a pgstore.EventLog — may run on one Log:
// the Log's leases give each endpoint one holder at a time. Every delivery request's context carries
// the endpoint ID (EndpointIDFromContext), for transports that act per endpoint.
//
// A Dispatcher is safe for concurrent use. The zero value is not usable: its Run, DeliverDue and
// Cleanup return an error that wraps ErrNotBuilt, and its Wake has nothing to wake. Build one with
// NewDispatcher.
type Dispatcher struct {
	log         driver.Log
	endpoints   driver.Endpoints
	client      *http.Client
	clientFor   func(Endpoint) *http.Client // nil: client for every endpoint
	timeout     time.Duration
	schedule    []time.Duration
	jitter      float64
	rand        func() float64
	lease       time.Duration
	batch       int
	streamBatch int
	workers     int
	perOwner    int
	perEndpoint int
	poll        time.Duration
	now         func() time.Time
	logger      *slog.Logger
	render      RenderFunc
	userAgent   string
	retention   time.Duration // 0: never
	cleanup     time.Duration
	signers     signerCache
	group       groupCommit
	sequencer   *Sequencer // nil unless log is Sequencing
	observer    Observer

	mu       sync.Mutex
	inFlight int               // request slots reserved, over all endpoints
	busy     map[string]bool   // streams with a worker
	owners   map[string]int    // licensee → request slots reserved
	ownerOf  map[string]string // stream → licensee, as last looked up
	wake     chan struct{}     // a worker finished while Run wanted capacity
	starved  bool              // Run's last claim was cut short by capacity
}

// NewDispatcher returns a Dispatcher for the deliveries of log to the endpoints in endpoints. It fails
// when an option is out of range.
func NewDispatcher(log driver.Log, endpoints driver.Endpoints, opts *DispatcherOptions) (*Dispatcher, error) {
	if opts == nil {
		opts = &DispatcherOptions{}
	}
	d := &Dispatcher{
		log:         log,
		endpoints:   endpoints,
		client:      opts.Client,
		clientFor:   opts.ClientFor,
		timeout:     cmp.Or(opts.Timeout, DefaultTimeout),
		schedule:    slices.Clone(opts.Schedule),
		jitter:      opts.Jitter,
		rand:        opts.Rand,
		batch:       cmp.Or(opts.BatchSize, DefaultBatchSize),
		streamBatch: cmp.Or(opts.StreamBatch, DefaultStreamBatch),
		workers:     cmp.Or(opts.Workers, DefaultWorkers),
		perOwner:    cmp.Or(opts.PerOwner, DefaultPerOwner),
		perEndpoint: cmp.Or(opts.PerEndpoint, DefaultPerEndpoint),
		poll:        cmp.Or(opts.PollInterval, DefaultPollInterval),
		now:         opts.Now,
		logger:      opts.Logger,
		render:      opts.Render,
		userAgent:   cmp.Or(opts.UserAgent, DefaultUserAgent),
		retention:   cmp.Or(opts.Retention, DefaultRetention),
		cleanup:     cmp.Or(opts.CleanupInterval, DefaultCleanupInterval),
		busy:        make(map[string]bool),
		owners:      make(map[string]int),
		ownerOf:     make(map[string]string),
		wake:        make(chan struct{}, 1),
		observer:    opts.Observer,
	}
	switch {
	case log == nil || endpoints == nil:
		return nil, errors.New("producer: NewDispatcher needs a Log and Endpoints")
	case d.timeout < 0, d.batch < 0, d.streamBatch < 0, d.workers < 0, d.perOwner < 0, d.perEndpoint < 0,
		d.poll < 0, opts.Lease < 0, d.cleanup < 0:
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
		d.client = NewDeliveryClient(opts.Guard)
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
	if sq, ok := log.(driver.Sequencing); ok {
		var so SequencerOptions
		if opts.Sequencer != nil {
			so = *opts.Sequencer
		}
		if so.Logger == nil {
			so.Logger = d.logger
		}
		user := so.OnSequenced
		so.OnSequenced = func(runs []driver.SequencedRun) {
			if user != nil {
				user(runs)
			}
			d.signal() // numbered events are deliverable: claim them now rather than at the next poll
		}
		var err error
		if d.sequencer, err = NewSequencer(sq, &so); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Wake tells the Dispatcher that events were just committed. On a Sequencing log its Sequencer
// numbers them at once (and the claim loop follows); on another it claims at once. Either way Run
// would find them at its next poll; Wake only saves the wait. It never blocks.
func (d *Dispatcher) Wake() {
	if d == nil {
		return
	}
	if d.sequencer != nil {
		d.sequencer.Wake()
		return
	}
	d.signal()
}

// signal wakes Run's claim loop without blocking.
func (d *Dispatcher) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Stats counts what a DeliverDue pass did. It is a plain value; the zero value is a pass that did
// nothing.
type Stats struct {
	Claimed   int // deliveries leased
	Delivered int // attempts that got a 2xx
	Failed    int // failed attempts scheduled for a retry
	Abandoned int // failed attempts that exhausted the schedule, and deliveries to deleted endpoints
	Released  int // deliveries handed back unattempted (behind a failure, lease running out, no slot, stopping)
}

func (s *Stats) add(o Stats) {
	s.Claimed += o.Claimed
	s.Delivered += o.Delivered
	s.Failed += o.Failed
	s.Abandoned += o.Abandoned
	s.Released += o.Released
}

// Run delivers due events until ctx is cancelled, and applies the retention (Cleanup) every
// CleanupInterval. It claims again at once after a full claim or when a worker frees capacity it was
// short of, otherwise after PollInterval; workers deliver each endpoint's run while Run goes on
// claiming for the others. On cancellation it waits for the workers: in-flight requests are cancelled
// and their deliveries handed back without counting an attempt, and outcomes already known are
// recorded. Store and delivery errors are logged and retried, never returned; Run returns nil.
func (d *Dispatcher) Run(ctx context.Context) error {
	if d == nil || d.log == nil {
		return errZeroDispatcher
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if d.sequencer != nil {
		wg.Go(func() { _ = d.sequencer.Run(ctx) })
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	var lastCleanup time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-d.wake:
			timer.Stop()
		}
		if now := d.now(); d.retention > 0 && now.Sub(lastCleanup) >= d.cleanup {
			lastCleanup = now
			if _, err := d.Cleanup(ctx); err != nil && ctx.Err() == nil {
				d.logger.ErrorContext(ctx, "producer: retention cleanup failed", "error", err)
			}
		}
		full, err := d.claim(ctx, &wg, nil)
		if err != nil && ctx.Err() == nil {
			d.logger.ErrorContext(ctx, "producer: claiming deliveries failed", "error", err)
		}
		wait := d.poll
		if err == nil && full {
			wait = 0
		}
		timer.Reset(wait)
	}
}

// Cleanup removes the events older than the retention (Now minus Retention), in batches of
// CleanupBatch, and returns how many it removed. With a negative Retention it does nothing.
func (d *Dispatcher) Cleanup(ctx context.Context) (int, error) {
	if d == nil || d.log == nil {
		return 0, errZeroDispatcher
	}
	if d.retention <= 0 {
		return 0, nil
	}
	before := cutoff(d.now().Add(-d.retention))
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

// DeliverDue makes one pass: on a Sequencing log it first numbers every committed, unnumbered event
// (Sequencer.Drain); then one claim of due deliveries, delivered by the workers (endpoints in
// parallel, each endpoint's in sequence order), and every outcome recorded before it returns. It
// returns an error only when the numbering or the claim fails. Run does the same without waiting between claims.
func (d *Dispatcher) DeliverDue(ctx context.Context) (Stats, error) {
	if d == nil || d.log == nil {
		return Stats{}, errZeroDispatcher
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total Stats
	)
	if d.sequencer != nil {
		if _, err := d.sequencer.Drain(ctx); err != nil {
			return Stats{}, fmt.Errorf("producer: numbering events: %w", err)
		}
	}
	_, err := d.claim(ctx, &wg, func(st Stats) {
		mu.Lock()
		defer mu.Unlock()
		total.add(st)
	})
	wg.Wait()
	return total, err
}

// claim leases due deliveries within the free capacity and starts a worker per endpoint on wg. It
// reports whether Run should claim again at once: the claim came back full. report, when not nil,
// receives each worker's Stats (and the claim's own).
func (d *Dispatcher) claim(ctx context.Context, wg *sync.WaitGroup, report func(Stats)) (full bool, err error) {
	d.mu.Lock()
	free := d.workers - d.inFlight
	var skip []string
	for s := range d.busy {
		skip = append(skip, s)
	}
	// The endpoints of licensees whose share is in use wait; the scan runs only when there are such.
	saturated := false
	for _, n := range d.owners {
		saturated = saturated || n >= d.perOwner
	}
	if saturated {
		for s, o := range d.ownerOf {
			if d.owners[o] >= d.perOwner && !d.busy[s] {
				skip = append(skip, s)
			}
		}
	}
	d.starved = free <= 0
	d.mu.Unlock()
	if free <= 0 {
		return false, nil
	}
	limit := min(d.batch, free*d.streamBatch)
	now := d.now()
	batch, err := d.log.Claim(ctx, driver.ClaimRequest{Now: now, LeaseUntil: now.Add(d.lease), Limit: limit,
		PerStream: d.streamBatch, Skip: skip})
	if err != nil {
		return false, fmt.Errorf("producer: claim deliveries: %w", err)
	}
	st := Stats{Claimed: len(batch)}
	settle := context.WithoutCancel(ctx)
	for _, g := range groupByStream(batch) {
		d.mu.Lock()
		ok := d.inFlight < d.workers && !d.busy[g[0].Stream]
		if ok {
			d.inFlight++
			d.busy[g[0].Stream] = true
		} else {
			d.starved = true
		}
		d.mu.Unlock()
		if !ok {
			// More endpoints came back than there are slots (or another pass of this dispatcher holds
			// the endpoint): give these back for the next claim.
			st.Released += d.release(settle, g, d.now())
			continue
		}
		wg.Go(func() {
			ws := d.work(ctx, g)
			if report != nil {
				report(ws)
			}
		})
	}
	if report != nil {
		report(st)
	}
	return len(batch) >= limit, nil
}

// groupByStream splits a claimed batch per stream, each group in sequence order, the groups in the
// order their first delivery was claimed.
func groupByStream(batch []driver.Delivery) [][]driver.Delivery {
	idx := make(map[string]int)
	var groups [][]driver.Delivery
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
		slices.SortFunc(g, func(a, b driver.Delivery) int { return cmp.Compare(a.Sequence, b.Sequence) })
	}
	return groups
}

// work is one endpoint's worker: it holds one request slot (reserved by claim) and the endpoint's
// busy mark, looks the endpoint up, takes up to PerEndpoint slots within the licensee's PerOwner, and
// delivers the group. It gives everything back when done and wakes Run if Run was short of capacity.
func (d *Dispatcher) work(ctx context.Context, group []driver.Delivery) (st Stats) {
	stream := group[0].Stream
	slots := 1 // reserved by claim
	owner, haveOwner := "", false
	defer func() {
		// A full run delivered in full means the endpoint probably has more waiting: claim again now
		// rather than after a poll interval.
		backlog := len(group) >= d.streamBatch && st.Delivered == len(group)
		d.mu.Lock()
		d.inFlight -= slots
		if haveOwner {
			if d.owners[owner] -= slots; d.owners[owner] <= 0 {
				delete(d.owners, owner)
			}
		}
		delete(d.busy, stream)
		wake := d.starved || backlog
		d.starved = false
		d.mu.Unlock()
		if wake {
			select {
			case d.wake <- struct{}{}:
			default:
			}
		}
	}()
	settle := context.WithoutCancel(ctx)

	ep, err := d.endpoints.Lookup(ctx, stream)
	switch {
	case errors.Is(err, ErrUnknownEndpoint):
		// The endpoint was deleted: nobody can receive these any more. They stay retrievable by range.
		at := d.now()
		for _, dl := range group {
			if o := d.observer; o != nil {
				actx := o.AttemptStart(ctx, attemptInfo(dl))
				o.AttemptEnd(actx, AttemptResult{Endpoint: dl.Stream, EventType: dl.Event.Type, Outcome: driver.OutcomeAbandoned,
					Class: ClassEndpointDeleted})
			}
			d.record(ctx, dl, driver.Settlement{Lease: dl.Lease, Attempt: driver.Attempt{At: at, Class: ClassEndpointDeleted, Reason: "endpoint not found"}})
		}
		return Stats{Abandoned: len(group)}
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
		return Stats{Released: d.release(settle, group, retry)}
	}

	// Take this endpoint's request slots within its licensee's share.
	d.mu.Lock()
	owner, haveOwner = ep.Owner, true
	if len(d.ownerOf) >= ownerCacheSize {
		clear(d.ownerOf)
	}
	d.ownerOf[stream] = owner
	room := d.perOwner - d.owners[owner]
	if room <= 0 {
		// The licensee's share is in use by its other endpoints: these wait for the next claim, which
		// skips the licensee's endpoints until a slot frees.
		haveOwner = false
		d.mu.Unlock()
		return Stats{Released: d.release(settle, group, d.now())}
	}
	want := min(d.perEndpoint, len(group), room)
	extra := min(want-1, max(d.workers-d.inFlight, 0))
	slots += extra
	d.inFlight += extra
	d.owners[owner] += slots
	d.mu.Unlock()

	return d.deliverStream(ctx, ep, group, slots)
}

// deliverStream delivers one endpoint's claimed deliveries in sequence order, window requests at a
// time, recording each outcome right after its attempt, and stops at the first failure.
//
// A success is recorded while the next request goes out (the endpoint's order is the order of the
// requests, which recording does not change), and the worker waits for every record before it
// returns; a failure is recorded before anything else happens, because it decides when the rest go.
func (d *Dispatcher) deliverStream(ctx context.Context, ep Endpoint, group []driver.Delivery, window int) Stats {
	var st Stats
	var records sync.WaitGroup
	defer records.Wait()
	settle := context.WithoutCancel(ctx)
	for i := 0; i < len(group); {
		if ctx.Err() != nil {
			st.Released += d.release(settle, group[i:], d.now())
			return st
		}
		n := min(window, len(group)-i)
		results := make([]result, n)
		prepared := 0
		for k := range n {
			dl := group[i+k]
			body, sig, fail := d.prepare(ctx, ep, dl)
			// Checked after rendering, which may take any time, and right before the request, which
			// takes up to Timeout: the lease must outlast the request, or another replica could
			// re-claim the delivery and send it while ours is still in flight.
			if now := d.now(); ctx.Err() != nil || now.Add(d.timeout).After(dl.LeaseUntil) {
				break
			}
			results[k] = result{body: body, sig: sig, Attempt: fail}
			prepared++
		}
		if prepared == 0 {
			// Stopping, or the lease would run out during the request: hand the rest back for the next
			// claim (or another replica) instead of racing a re-claim.
			st.Released += d.release(settle, group[i:], d.now())
			return st
		}
		if prepared == 1 {
			d.attempt(ctx, ep, group[i], &results[0])
		} else {
			var wg sync.WaitGroup
			for k := range prepared {
				wg.Go(func() { d.attempt(ctx, ep, group[i+k], &results[k]) })
			}
			wg.Wait()
		}
		// Outcomes are recorded in sequence order; the first failure sends the rest behind it.
		for k := range prepared {
			dl, r := group[i+k], &results[k]
			if r.Class == "" {
				records.Go(func() { d.record(ctx, dl, driver.Settlement{Lease: dl.Lease, Delivered: true, Attempt: r.Attempt}) })
				st.Delivered++
				continue
			}
			if r.cancelled {
				// The request was cut short by our own shutdown, not by the endpoint: no attempt counted.
				st.Released += d.release(settle, group[i+k:], r.At)
				return st
			}
			st.add(d.recordFailure(ctx, dl, r))
			retry := r.RetryAt
			if retry.IsZero() {
				retry = r.At // the rest need not wait for a delivery that will never be retried
			}
			// The endpoint just failed: the rest of its events wait for the failed one's retry, which
			// keeps them behind it in order and spares an endpoint that is down a burst of doomed
			// requests. Later ones of this window already went out; their outcomes are recorded.
			st.add(d.settleWindowTail(ctx, group[i+k+1:i+prepared], results[k+1:prepared]))
			st.Released += d.release(settle, group[i+prepared:], retry)
			return st
		}
		i += prepared
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

func (d *Dispatcher) release(ctx context.Context, group []driver.Delivery, retryAt time.Time) int {
	for _, dl := range group {
		d.settleErr(ctx, dl, "release", d.log.Release(ctx, dl.Lease, retryAt))
	}
	return len(group)
}

// settleWindowTail records the outcomes of requests that went out together with one that failed: the
// deliveries that succeeded are delivered, the failed ones wait for their own retry, the cancelled
// ones are handed back.
func (d *Dispatcher) settleWindowTail(ctx context.Context, group []driver.Delivery, results []result) Stats {
	var st Stats
	for k, dl := range group {
		r := &results[k]
		switch {
		case r.Class == "":
			d.record(ctx, dl, driver.Settlement{Lease: dl.Lease, Delivered: true, Attempt: r.Attempt})
			st.Delivered++
		case r.cancelled:
			st.Released += d.release(context.WithoutCancel(ctx), []driver.Delivery{dl}, r.At)
		default:
			st.add(d.recordFailure(ctx, dl, r))
		}
	}
	return st
}

// recordFailure schedules the failed attempt r's retry (zero when the schedule is exhausted), logs it
// and records it, and counts it as Failed or Abandoned.
func (d *Dispatcher) recordFailure(ctx context.Context, dl driver.Delivery, r *result) Stats {
	r.RetryAt = d.retryAt(dl.Attempts+1, r.At.Add(r.Latency))
	d.logger.WarnContext(ctx, "producer: delivery failed", "endpoint", dl.Stream, "sequence", dl.Sequence,
		"attempt", dl.Attempts+1, "reason", r.Reason, "retry_at", r.RetryAt)
	d.record(ctx, dl, driver.Settlement{Lease: dl.Lease, Attempt: r.Attempt})
	if r.RetryAt.IsZero() {
		return Stats{Abandoned: 1}
	}
	return Stats{Failed: 1}
}

// record records an attempt's outcome, each try with its own deadline, until it succeeds or the lease
// is lost. A delivery the endpoint acknowledged must not be sent again because a store call timed out,
// so failures are retried with backoff for as long as the dispatcher runs; once it is stopping, until
// the delivery's lease ends (after which another dispatcher may claim it anyway, and the consumer's
// duplicate check takes over).
func (d *Dispatcher) record(ctx context.Context, dl driver.Delivery, s driver.Settlement) {
	what := outcomeOf(s.Delivered, s.Attempt).String()
	wait := recordBackoffMin
	for try := 1; ; try++ {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		err := d.settleOne(c, s)
		cancel()
		if err == nil || errors.Is(err, driver.ErrLeaseLost) {
			d.settleErr(ctx, dl, what, err)
			return
		}
		if ctx.Err() != nil && !d.now().Before(dl.LeaseUntil) {
			d.logger.ErrorContext(ctx, "producer: recording delivery outcome failed; giving up as the lease has ended",
				"endpoint", dl.Stream, "sequence", dl.Sequence, "outcome", what, "tries", try, "error", err)
			return
		}
		d.logger.ErrorContext(ctx, "producer: recording delivery outcome failed; retrying", "endpoint", dl.Stream,
			"sequence", dl.Sequence, "outcome", what, "try", try, "error", err)
		t := time.NewTimer(wait)
		<-t.C
		wait = min(2*wait, recordBackoffMax)
	}
}

// settleOne records one outcome: through the group commit when the Log is a Settler, else by
// Delivered or Failed.
func (d *Dispatcher) settleOne(ctx context.Context, s driver.Settlement) error {
	if st, ok := d.log.(driver.Settler); ok {
		return d.group.do(ctx, st, s)
	}
	if s.Delivered {
		return d.log.Delivered(ctx, s.Lease, s.Attempt)
	}
	return d.log.Failed(ctx, s.Lease, s.Attempt)
}

// groupCommit gathers the settlements that workers have ready at the same moment into one
// Settler.Settle call. There is no background goroutine and no timer: the first caller to find no call
// running makes one for everything queued, and keeps making them while more queue up behind it; the
// others wait for their answer. Under light load every settlement is its own call, as without it;
// under heavy load one call carries as many as arrived during the previous one, up to maxSettleBatch.
type groupCommit struct {
	mu      sync.Mutex
	queue   []*pendingSettle
	running bool
}

// maxSettleBatch bounds one Settle call.
const maxSettleBatch = 500

type pendingSettle struct {
	s    driver.Settlement
	ctx  context.Context
	err  error
	done chan struct{}
}

func (g *groupCommit) do(ctx context.Context, st driver.Settler, s driver.Settlement) error {
	p := &pendingSettle{s: s, ctx: ctx, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, p)
	if g.running {
		g.mu.Unlock()
		select {
		case <-p.done:
			return p.err
		case <-ctx.Done():
			// Our deadline passed while others' call ran; the outcome may still be recorded by it,
			// and a retry of an already recorded outcome is ErrLeaseLost, which record accepts.
			return ctx.Err()
		}
	}
	g.running = true
	g.mu.Unlock()
	g.drain(st, p)
	return p.err
}

// drain makes Settle calls for the queue until mine is answered (nil: until the queue is empty). A
// caller that became the leader leaves as soon as its own settlement is done, handing what queued up
// meanwhile to a goroutine, so that a steady stream of others' settlements never holds its endpoint up.
func (g *groupCommit) drain(st driver.Settler, mine *pendingSettle) {
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		if mine != nil && isDone(mine) {
			g.mu.Unlock()
			go g.drain(st, nil)
			return
		}
		n := min(len(g.queue), maxSettleBatch)
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		g.mu.Unlock()
		g.run(st, batch)
	}
}

func isDone(p *pendingSettle) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// run makes one Settle call under the deadline of its latest-ending caller, so that no caller's
// budget is cut short by another's.
func (g *groupCommit) run(st driver.Settler, batch []*pendingSettle) {
	ss := make([]driver.Settlement, len(batch))
	deadline, bounded := time.Time{}, true
	for i, p := range batch {
		ss[i] = p.s
		dl, ok := p.ctx.Deadline()
		if !ok {
			bounded = false
		} else if dl.After(deadline) {
			deadline = dl
		}
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if bounded {
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	errs := st.Settle(ctx, ss)
	cancel()
	for i, p := range batch {
		if i < len(errs) {
			p.err = errs[i]
		} else {
			p.err = errors.New("producer: Settle returned fewer answers than settlements")
		}
		close(p.done)
	}
}

func (d *Dispatcher) settleErr(ctx context.Context, dl driver.Delivery, what string, err error) {
	switch {
	case err == nil:
	case errors.Is(err, driver.ErrLeaseLost):
		// Another dispatcher re-claimed the delivery after our lease ran out; its outcome wins.
		d.logger.WarnContext(ctx, "producer: delivery lease lost", "endpoint", dl.Stream, "sequence", dl.Sequence, "outcome", what)
	default:
		// The lease will run out and the delivery be retried: at least once, never lost.
		d.logger.ErrorContext(ctx, "producer: recording delivery outcome failed", "endpoint", dl.Stream,
			"sequence", dl.Sequence, "outcome", what, "error", err)
	}
}

// result is one request of a window: what is sent and what became of it.
type result struct {
	body      []byte
	sig       string
	cancelled bool // cut short by the dispatcher's own shutdown: no attempt counts
	sent      bool // the request was handed to the client
	driver.Attempt
}

// prepare renders and signs one delivery: the body and its X-SVC-Signature, or, as a failed Attempt,
// why it cannot be sent.
func (d *Dispatcher) prepare(ctx context.Context, ep Endpoint, dl driver.Delivery) (body []byte, sig string, fail driver.Attempt) {
	body, err := encodeEvent(ctx, d.render, ep, dl.Event)
	if err != nil {
		d.logger.ErrorContext(ctx, "producer: cannot render event", "endpoint", ep.ID, "sequence", dl.Sequence, "error", err)
		return nil, "", driver.Attempt{Class: ClassRender, Reason: "render failed"}
	}
	signer, err := d.signers.get(ep)
	if err == nil {
		sig, err = signer.Sign(body, d.now())
	}
	if err != nil {
		return nil, "", driver.Attempt{Class: ClassNoSecret, Reason: "no signing secret"}
	}
	return body, sig, driver.Attempt{}
}

// attempt makes one delivery request (unless prepare already failed it) and fills in r's Attempt.
func (d *Dispatcher) attempt(ctx context.Context, ep Endpoint, dl driver.Delivery, r *result) {
	o := d.observer
	if o != nil {
		ctx = o.AttemptStart(ctx, attemptInfo(dl))
	}
	start := d.now()
	if r.Class == "" {
		r.Attempt, r.sent = d.send(ctx, ep, dl, r.body, r.sig)
		r.cancelled = r.Class != "" && ctx.Err() != nil
	}
	r.At = start
	r.Latency = max(d.now().Sub(start), 0)
	if o != nil {
		o.AttemptEnd(ctx, d.attemptResult(dl, r))
	}
}

// attemptInfo describes dl's next attempt for the Observer.
func attemptInfo(dl driver.Delivery) AttemptInfo {
	return AttemptInfo{Endpoint: dl.Stream, EventID: dl.Event.ID, EventType: dl.Event.Type, Sequence: dl.Sequence,
		Attempt: dl.Attempts + 1, Trace: TraceContext{TraceParent: dl.TraceParent, TraceState: dl.TraceState}}
}

// attemptResult describes r for the Observer. The outcome is decided here as deliverStream will
// record it: a failure is retried unless it exhausted the schedule (retryAt's rule).
func (d *Dispatcher) attemptResult(dl driver.Delivery, r *result) AttemptResult {
	res := AttemptResult{Endpoint: dl.Stream, EventType: dl.Event.Type, Sent: r.sent, StatusCode: r.StatusCode,
		Class: r.Class, Duration: r.Latency}
	switch {
	case r.cancelled:
		res.Released = true
	case r.Class == "":
		res.Outcome = driver.OutcomeDelivered
	case dl.Attempts+1 > len(d.schedule):
		res.Outcome = driver.OutcomeAbandoned
	default:
		res.Outcome = driver.OutcomeFailed
	}
	return res
}

// send makes one delivery request and describes its outcome; Class is empty on success. sent reports
// whether the request reached the client.
func (d *Dispatcher) send(ctx context.Context, ep Endpoint, dl driver.Delivery, body []byte, sig string) (a driver.Attempt, sent bool) {
	rctx, cancel := context.WithTimeout(WithEndpointID(ctx, ep.ID), d.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return driver.Attempt{Class: ClassInvalidURL, Reason: "invalid endpoint URL"}, false
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", d.userAgent)
	h.Set(webhook.HeaderSignature, sig)
	h.Set(webhook.HeaderSequence, strconv.FormatUint(dl.Sequence, 10))
	if o := d.observer; o != nil {
		o.InjectTrace(rctx, webhook.NewTraceCarrier(h))
	}
	// Whether the connection (new or reused) is one that only an allow-list admitted: its answer is
	// then not recorded. Atomic: a transport may report the connection from another goroutine.
	var internal atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if info.Conn != nil && allowListed(info.Conn) {
				internal.Store(true)
			}
		},
	}))
	client := d.client
	if d.clientFor != nil {
		if c := d.clientFor(ep); c != nil {
			client = c
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return transportFailure(rctx, err), true
	}
	var snip [maxResponseSnippet]byte
	n, _ := io.ReadFull(resp.Body, snip[:])
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	if internal.Load() {
		n = 0 // its status only: see Dispatcher
	}
	a = driver.Attempt{StatusCode: resp.StatusCode, Response: snippet(snip[:n])}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		a.Class, a.Reason = ClassStatus, "status "+strconv.Itoa(resp.StatusCode)
	}
	return a, true
}

// snippet returns b as a string cut to whole UTF-8 characters, with invalid bytes replaced, so that the
// history stores text whatever the endpoint sent.
func snippet(b []byte) string {
	if len(b) == maxResponseSnippet {
		// The cut may have split a character: drop its leading bytes.
		for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:]) {
					b = b[:i]
				}
				break
			}
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// transportFailure describes a failed request without the URL, which may carry a token in its query.
func transportFailure(rctx context.Context, err error) driver.Attempt {
	if errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return driver.Attempt{Class: ClassTimeout, Reason: "timeout"}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var (
		ne net.Error
		be *BlockedAddressError
	)
	switch {
	case errors.As(err, &be):
		// Only the class: the resolved address would tell the endpoint's owner about our network.
		return driver.Attempt{Class: ClassBlockedAddress, Reason: "request refused: " + be.Error()}
	case errors.Is(err, ErrBlockedAddress):
		return driver.Attempt{Class: ClassBlockedAddress, Reason: "request refused: blocked address"}
	case errors.As(err, &ne) && ne.Timeout():
		return driver.Attempt{Class: ClassTimeout, Reason: "timeout"}
	}
	return driver.Attempt{Class: ClassConnection, Reason: "request failed: " + err.Error()}
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
