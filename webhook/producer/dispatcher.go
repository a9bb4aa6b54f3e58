package producer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// Defaults of DispatcherOptions.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultJitter       = 0.2
	DefaultBatchSize    = 100
	DefaultStreamBatch  = 100
	DefaultWorkers      = 256
	DefaultPerOwner     = 32
	DefaultPerEndpoint  = 1
	DefaultPollInterval = time.Second
	DefaultUserAgent    = "svcplatform-webhooks/1"
	// DefaultRetention is how long events stay retrievable by range (docs/decisions.md D3): 30 days.
	DefaultRetention = 30 * 24 * time.Hour
	// DefaultCleanupInterval is how often Run applies the retention.
	DefaultCleanupInterval = time.Minute
	// CleanupBatch is how many events one Log.Cleanup call may remove: enough that what a store
	// pays once per batch (a pgstore.EventLog reads each stream it looks at and commits once) is
	// spread thin, few enough that a batch holds the streams it prunes for tens of milliseconds.
	CleanupBatch = 10_000
)

// maxDrain is how much of a response body is read so the connection can be reused; beyond the
// snippet the history keeps, the body means nothing to the producer.
const maxDrain = 64 << 10

// ownerCacheSize bounds the dispatcher's memory of which licensee owns which endpoint.
const ownerCacheSize = 1 << 16

// DispatcherOptions configures a Dispatcher. The zero value (or nil) means the defaults. NewDispatcher
// copies what it needs, so the options may be reused.
type DispatcherOptions struct {
	// Client sends the deliveries. nil means ssrf.NewClient(Guard): it dials only public unicast
	// addresses (checked after DNS resolution, at dial time) and does not follow redirects, so a 3xx
	// is a failed attempt. A Client of your own replaces both protections: build it with
	// ssrf.NewClient unless your endpoints are all trusted.
	Client *http.Client
	// Guard is the address policy of the default Client; nil means public unicast addresses only.
	// The sandbox, tests and a demo on loopback allow-list what they need here. Ignored when Client
	// is set.
	Guard *ssrf.Guard
	// ClientFor, when set, picks the client of each endpoint's deliveries, so that endpoints of
	// different environments go through different guards: a production endpoint through a client
	// whose ssrf.Guard opens nothing the sandbox's opens. Return one of a few clients built once
	// (ssrf.NewClient per environment), never a new one per call; nil means the default client
	// (Client, or ssrf.NewClient(Guard)).
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
	// Hooks are told of every delivery attempt (AttemptStart, InjectTrace, AttemptEnd) and of every
	// endpoint the Dispatcher disables (EndpointDisabled), for metrics and traces; nil observes
	// nothing, at no cost.
	Hooks *Hooks
	// DisableAfter is how long an endpoint's deliveries may fail, with no success between, before
	// the Dispatcher disables it (DisabledReason DisabledFailing); an endpoint that answers 410 Gone
	// is disabled at once (DisabledGone). Either way its events keep their sequence numbers: they are
	// appended and numbered while it is disabled, and its consumer fetches them by range once it is
	// enabled again. The Dispatcher tells the endpoint's owner: in its log, through
	// Hooks.EndpointDisabled, and by a webhook_endpoint.disabled event (EventEndpointDisabled) to the
	// owner's other endpoints that subscribe to it, when the registry is an EndpointLister. It
	// needs a registry that is an EndpointEditor (memstore.Endpoints, pgstore.EndpointStore), where
	// it also keeps each endpoint's FailingSince; with another, endpoints are never disabled. 0
	// means DefaultDisableAfter; negative means never, not even on a 410.
	DisableAfter time.Duration
	// MaxRetryAfter caps the pause an endpoint may ask for with Retry-After (delay-seconds or an
	// HTTP-date) on a 429 or 503: the failed delivery's next attempt, and every other delivery of the
	// endpoint, wait at least that long (up to the cap) — a Retry-After never shortens the Schedule's
	// delay. 0 means DefaultMaxRetryAfter; negative ignores Retry-After. The endpoint is held back
	// across replicas on a Log that is a Settler (see driver.Settlement.Hold).
	MaxRetryAfter time.Duration
	// APIVersion is the api_version stamped on the events the Dispatcher publishes itself
	// (webhook_endpoint.disabled), which Render then renders for each endpoint as it does the
	// Publisher's: set it to the Publisher's PublisherOptions.APIVersion. Empty means
	// DefaultAPIVersion.
	APIVersion string
}

// Dispatcher delivers the due events of a Log to their endpoints: POST of the event JSON with
// X-SVC-Signature (one v1 per endpoint secret) and X-SVC-Sequence; any 2xx is success; anything else,
// a transport error or the per-request timeout is a failed attempt, retried on the schedule with
// jitter. Every attempt is recorded right after it is made, with its status, latency and the start of
// the answer (Log.Attempts lists them) — except that an answer from a connection that only an
// ssrf.Guard's allow-list admitted (an address that is not public unicast) is recorded by its
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
	hooks       *Hooks
	// disableAfter is DispatcherOptions.DisableAfter with the default applied (negative: never);
	// maxRetryAfter is MaxRetryAfter's (negative: Retry-After ignored).
	disableAfter  time.Duration
	maxRetryAfter time.Duration
	// notices publishes webhook_endpoint.disabled events on the Dispatcher's own Log.
	notices *Publisher

	mu       sync.Mutex
	inFlight int               // request slots reserved, over all endpoints
	busy     map[string]bool   // streams with a worker
	owners   map[string]int    // licensee → request slots reserved
	ownerOf  map[string]string // stream → licensee, as last looked up
	wake     chan struct{}     // a worker finished while Run wanted capacity
	starved  bool              // Run's last claim was cut short by capacity
	dues     []time.Time       // the times workers held endpoints back to, for Run to claim at (maxDues)
}

// maxDues bounds the times Run remembers to claim at; past it, an endpoint held back waits for a
// poll.
const maxDues = 1024

// NewDispatcher returns a Dispatcher for the deliveries of log to the endpoints in endpoints. It fails
// when an option is out of range.
func NewDispatcher(log driver.Log, endpoints driver.Endpoints, opts *DispatcherOptions) (*Dispatcher, error) {
	if opts == nil {
		opts = &DispatcherOptions{}
	}
	d := &Dispatcher{
		log:           log,
		endpoints:     endpoints,
		client:        opts.Client,
		clientFor:     opts.ClientFor,
		timeout:       cmp.Or(opts.Timeout, DefaultTimeout),
		schedule:      slices.Clone(opts.Schedule),
		jitter:        opts.Jitter,
		rand:          opts.Rand,
		batch:         cmp.Or(opts.BatchSize, DefaultBatchSize),
		streamBatch:   cmp.Or(opts.StreamBatch, DefaultStreamBatch),
		workers:       cmp.Or(opts.Workers, DefaultWorkers),
		perOwner:      cmp.Or(opts.PerOwner, DefaultPerOwner),
		perEndpoint:   cmp.Or(opts.PerEndpoint, DefaultPerEndpoint),
		poll:          cmp.Or(opts.PollInterval, DefaultPollInterval),
		now:           opts.Now,
		logger:        opts.Logger,
		render:        opts.Render,
		userAgent:     cmp.Or(opts.UserAgent, DefaultUserAgent),
		retention:     cmp.Or(opts.Retention, DefaultRetention),
		cleanup:       cmp.Or(opts.CleanupInterval, DefaultCleanupInterval),
		busy:          make(map[string]bool),
		owners:        make(map[string]int),
		ownerOf:       make(map[string]string),
		wake:          make(chan struct{}, 1),
		hooks:         opts.Hooks,
		disableAfter:  cmp.Or(opts.DisableAfter, DefaultDisableAfter),
		maxRetryAfter: cmp.Or(opts.MaxRetryAfter, DefaultMaxRetryAfter),
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
		d.client = ssrf.NewClient(opts.Guard)
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
	var err error
	if d.notices, err = NewPublisher(log, endpoints, &PublisherOptions{APIVersion: opts.APIVersion, Now: opts.Now, Hooks: opts.Hooks}); err != nil {
		return nil, err
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

// noteDue tells Run that a worker held an endpoint back until t, so that Run claims again then
// rather than at its next poll.
func (d *Dispatcher) noteDue(t time.Time) {
	d.mu.Lock()
	if len(d.dues) < maxDues {
		d.dues = append(d.dues, t)
	}
	d.mu.Unlock()
	d.signal()
}

// nextDue returns how long Run may wait, at most, after a claim made at claimed: until the soonest
// time a worker held an endpoint back to, when that is before wait. The times the claim already
// covered are forgotten.
func (d *Dispatcher) nextDue(claimed time.Time, wait time.Duration) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dues = slices.DeleteFunc(d.dues, func(t time.Time) bool { return !t.After(claimed) })
	if len(d.dues) == 0 {
		return wait
	}
	return min(wait, max(slices.MinFunc(d.dues, time.Time.Compare).Sub(d.now()), 0))
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
		claimed := d.now()
		full, err := d.claim(ctx, &wg, nil)
		if err != nil && ctx.Err() == nil {
			d.logger.ErrorContext(ctx, "producer: claiming deliveries failed", "error", err)
		}
		wait := d.poll
		if err == nil && full {
			wait = 0
		}
		timer.Reset(d.nextDue(claimed, wait))
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
		// Until a batch finds nothing: a Log may remove less than a batch while more is due (a
		// pgstore.EventLog reads a bounded window of each stream per batch).
		if n == 0 {
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
