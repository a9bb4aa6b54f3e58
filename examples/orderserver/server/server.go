package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/examples/internal/graceful"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/otelconv"
	"github.com/svcplatform/conventions/portal"
	"github.com/svcplatform/conventions/ratelimit"
	"github.com/svcplatform/conventions/requestlog"
	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/seal"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/versioning"
	"github.com/svcplatform/conventions/webhook/producer"
)

// Defaults of Config and WebhookOptions.
const (
	// DefaultPollInterval is how often the dispatcher looks for due deliveries when it is idle. Short,
	// so that an evaluator sees an order's event within a blink; each look is one cheap query.
	DefaultPollInterval = 100 * time.Millisecond
	// DefaultShutdownTimeout bounds the graceful shutdown: requests in flight get this long to finish.
	DefaultShutdownTimeout = 10 * time.Second
	// LiveRate and LiveBurst are the default production rate limit per licensee (Config.LiveRate,
	// Config.LiveBurst). The sandbox has none.
	LiveRate  = 100
	LiveBurst = 200
	// DefaultMaxEndpoints is how many webhook endpoints one licensee may register in one environment
	// (Stripe's limit too): enough for every real integration, and a bound on the fan-out of one
	// order, which emits an event to each of them.
	DefaultMaxEndpoints = 16
	// DefaultPerOwner and DefaultPerEndpoint are the server's in-flight delivery limits: at most
	// this many requests at once to one licensee's endpoints, and to one endpoint. One endpoint at a
	// time keeps a healthy endpoint's deliveries in sequence order; a licensee's slow endpoints hold
	// at most DefaultPerOwner of the dispatcher's workers.
	DefaultPerOwner    = 8
	DefaultPerEndpoint = 1
	// DefaultMaxStreamEvents is how many events the stores' event logs keep per webhook endpoint
	// (memstore.Log.MaxStreamEvents, pgstore.EventLogOptions.MaxStreamEvents): with
	// DefaultMaxEndpoints endpoints, one licensee keeps at most 160,000 events per environment in
	// the 30 days of retention, and at most 40 GiB at the publisher's largest event (256 KiB; an
	// order's event is about 300 bytes, a sandbox trigger's data at most 64 KiB). An order or a
	// trigger past it is 429 events_quota_exceeded; retention frees room.
	DefaultMaxStreamEvents = 10_000
	// eventsQuotaRetryAfter is the Retry-After of events_quota_exceeded: room frees as the oldest
	// events pass the retention, which the cleanup applies every minute.
	eventsQuotaRetryAfter = time.Minute
)

// DefaultRetrySchedule is the server's webhook retry schedule: the first retry after one second,
// doubling up to an hour, about three days in all. Shorter at the start than the library's default
// (one minute) because this server is where evaluators inject faults, and a consumer that rejected a
// bad signature should see the retry while they watch.
func DefaultRetrySchedule() []time.Duration {
	return producer.ExponentialSchedule(time.Second, time.Hour, 72*time.Hour)
}

// WebhookOptions tune webhook delivery. The zero value means the defaults.
type WebhookOptions struct {
	// RetrySchedule lists the delays between attempts; nil means DefaultRetrySchedule().
	RetrySchedule []time.Duration
	// PollInterval is how often an idle dispatcher looks for due deliveries; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// Timeout bounds each delivery request; 0 means the producer's default (10 s).
	Timeout time.Duration
	// ReorderHold is the longest a delivery held back by the reorder fault waits for the endpoint's
	// next one; 0 means the sandbox default (5 s).
	ReorderHold time.Duration
	// FaultRand draws the injected faults; nil means unseeded. Pass a seeded one for a reproducible
	// run.
	FaultRand *rand.Rand

	// SandboxGuard decides which addresses the deliveries to sandbox keys' endpoints may connect to,
	// checked at dial time after DNS resolution, and which URLs registration accepts from sandbox
	// keys. nil means public unicast addresses only: loopback, private networks, link-local (cloud
	// metadata) and the other special ranges are refused. A sandbox, demo or test whose consumers
	// listen on loopback allow-lists them here (Allow: 127.0.0.0/8, ::1/128; AllowHosts: localhost).
	// Answers from a destination only the allow-list admits are recorded by status alone.
	SandboxGuard *ssrf.Guard
	// LiveGuard is the same for production keys' endpoints. Each environment is checked against its
	// own guard only, at registration and at every dial: a production endpoint never reaches what
	// only the sandbox was allowed. nil means public unicast addresses only, which production needs
	// unless its consumers live on a private network the operator names here.
	LiveGuard *ssrf.Guard
	// SandboxRequireHTTPS refuses http URLs for sandbox keys too. By default a sandbox key may
	// register http URLs (a consumer on a laptop has no certificate) and a production key must use
	// https.
	SandboxRequireHTTPS bool
	// LiveAllowHTTP lets production keys register http URLs; a deployment whose deliveries stay on
	// a private, trusted network might. Deliveries over http are readable on the way.
	LiveAllowHTTP bool
	// MaxEndpoints is how many webhook endpoints one licensee may register in one environment; 0
	// means DefaultMaxEndpoints, negative means no limit. It holds across replicas sharing a
	// PostgreSQL store.
	MaxEndpoints int
	// PerOwner and PerEndpoint bound the delivery requests in flight to one licensee's endpoints and
	// to one endpoint (producer.DispatcherOptions); 0 means DefaultPerOwner and DefaultPerEndpoint.
	PerOwner, PerEndpoint int
	// MaxEventBytes bounds one event's envelope (producer.PublisherOptions.MaxEventBytes); a larger
	// order or trigger is 413 event_too_large. 0 means producer.DefaultMaxEventBytes.
	MaxEventBytes int
	// DisableAfter is how long an endpoint's deliveries may fail without a success before the
	// dispatcher disables it (producer.DispatcherOptions.DisableAfter); an endpoint that answers
	// 410 Gone is disabled at once. 0 means the producer's five days; a sandbox for evaluations may
	// use minutes; negative never disables.
	DisableAfter time.Duration
}

// maxEndpoints is the endpoint limit per owner, 0 for none.
func (o WebhookOptions) maxEndpoints() int {
	switch {
	case o.MaxEndpoints == 0:
		return DefaultMaxEndpoints
	case o.MaxEndpoints < 0:
		return 0
	}
	return o.MaxEndpoints
}

// Config configures a Server. The zero value is a complete in-memory server.
type Config struct {
	// Store keeps orders and webhook endpoints, and owns the event log. Nil means NewMemoryStore().
	Store Store
	// Credentials keeps the API keys' hashes. Nil means apikey.NewMemoryCredentialStore().
	Credentials apikey.CredentialStore
	// Idempotency keeps the idempotency records of production (live) keys; replicas must share one.
	// Nil means an in-memory store, right for a single process only.
	Idempotency driver.Store
	// SandboxIdempotency keeps the records of sandbox keys and of the admin's requests, apart from
	// production's: sandbox keys have no rate ceiling, so an evaluation that floods the sandbox must
	// never use up capacity that production requests need. Nil means an in-memory store of its own
	// when Idempotency is nil too, and Idempotency otherwise (set both when a shared store is used).
	SandboxIdempotency driver.Store
	// Transactor, when set, runs each mutating request's idempotency claim, its handler's writes and
	// its stored response in one database transaction (pgstore.Transactor); the Store must then write
	// through the request's transaction (pgserver.Store does). Nil means the ordinary mode.
	// SandboxTransactor is the sandbox's (its records in SandboxIdempotency's table); nil means
	// Transactor.
	Transactor, SandboxTransactor driver.Transactor
	// Sealer seals every stored idempotency record at rest (see idempotency.Options.Sealer): a record
	// that is not sealed, or does not open, is then answered 500, never replayed. Nil means none:
	// responses that carry a secret (an issued API key, a webhook signing secret) are then stored
	// without their body, so no secret lies in any idempotency store either way. The Store seals the
	// webhook signing secrets it keeps with the same ring (pgserver.Config).
	Sealer *seal.Ring
	// Pins keeps each licensee's pinned API version; replicas must share one. Nil means in memory.
	Pins versioning.PinStore
	// RollbackWindow is how long after an upgrade of its pin (POST /{version}/version_pin) a licensee
	// may go back, once, to the version it came from; afterwards the upgrade is final (409
	// version_upgrade_final). Zero means versioning.DefaultRollbackWindow, 72 hours; negative means
	// no rollback: every upgrade is final at once.
	RollbackWindow time.Duration
	// RequestLog keeps the request log: one entry per request the server serves (its ID, the API
	// key's ID, the route, the status and problem code, the Idempotency-Key and whether it was
	// replayed, the version, the latency; never a body or a credential), which each licensee reads
	// through GET /{version}/requests. Replicas must share one (pgstore.RequestLogStore, which
	// pgserver.Config sets) for a request to be found on any of them. Nil means
	// requestlog.NewMemoryStore's: this process only, lost at a restart.
	RequestLog requestlog.Store
	// Portal keeps the webhook portal's links and sessions (portal.Store); replicas must share one
	// (pgserver.Config sets pgstore's). Nil means in memory: a link minted on one replica opens only
	// there.
	Portal portal.Store
	// PortalFrameAncestors lists the origins that may show the portal in a frame
	// (portal.Options.FrameAncestors); nil means none.
	PortalFrameAncestors []string
	// DisableRequestLog records nothing: the requests API then reads only what RequestLog already
	// holds. For measuring what the log costs (BenchmarkPGThroughput); a service keeps it on.
	DisableRequestLog bool
	// V1Deprecated and V1Sunset date v1's deprecation and sunset; zero means V1DeprecatesIn and
	// V1SunsetsIn after the start of the day the server started (versions.go).
	V1Deprecated, V1Sunset time.Time
	// AdminToken authorises POST /v1/sandbox/credentials. Empty means a fresh random one (AdminToken).
	AdminToken string
	// BaseURL is the server's address as clients reach it, returned with issued credentials. Empty
	// means the sandbox package's default.
	BaseURL string
	// Webhooks tune delivery.
	Webhooks WebhookOptions
	// Logger receives the server's logs; nil means none. No log line holds a key, token or secret.
	Logger *slog.Logger
	// Telemetry, when set, reports every convention's metrics and spans to OpenTelemetry (see the
	// otelconv module), and each request gets a server span (otelconv.HTTPHandler) that continues the client's
	// traceparent. Nil means none, at no cost.
	Telemetry *otelconv.Telemetry
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Timeouts bound what one client may hold of the server's connections (Serve); zero fields mean
	// graceful.DefaultTimeouts: headers in 5 s, a request in 30 s, a response in 60 s, 120 s idle,
	// headers of at most 64 KiB.
	Timeouts graceful.Timeouts
	// LiveRate and LiveBurst are the production rate limit per licensee: requests a second, and how
	// many at once. Zero means the package's LiveRate and LiveBurst. The sandbox has none.
	LiveRate  float64
	LiveBurst int
}

// Stats counts what the server did, for the demo's report.
type Stats struct {
	OrdersCreated int64
	EventsEmitted int64
	// Faults counts the webhook faults injected, by kind ("drop", "duplicate", …).
	Faults map[string]int64
	// Idempotency is what the idempotency middleware did: replays served, conflicts, …
	Idempotency idempotency.Stats
}

type stats struct {
	ordersCreated atomic.Int64
	eventsEmitted atomic.Int64
	mu            sync.Mutex
	faults        map[string]int64
}

// Server is the reference order server: every package of the library wired together the way a product
// team would. Build one with New, serve it with Serve. A Server is safe for concurrent use.
type Server struct {
	store        Store
	issuer       *apikey.Issuer
	auth         *apikey.Authenticator
	limit        *ratelimit.Middleware
	idem         *idempotency.Middleware // production keys
	idemSbx      *idempotency.Middleware // sandbox keys and the admin
	publisher    *producer.Publisher
	dispatcher   *producer.Dispatcher
	wake         func() // after a request's events committed: the dispatcher's Wake (tests watch it)
	faults       sandbox.FaultTable
	transport    *sandbox.FaultTransport // sandbox endpoints' deliveries, through SandboxGuard
	liveTrans    *http.Transport         // production endpoints' deliveries, through LiveGuard
	controls     *sandbox.Controls
	ranges       *producer.RangeHandler
	deliveries   *producer.DeliveriesHandler
	endpointsAPI *producer.EndpointsHandler
	keys         *apikey.KeysHandler
	reqlog       *requestlog.Log  // nil when Config.DisableRequestLog
	reqlogStore  requestlog.Store // what reqlog writes and requests reads
	requests     *requestlog.RequestsHandler
	portal       *portal.Portal
	portalAPI    http.Handler   // the API as the portal calls it: below authentication (routes.go)
	urlLive      ssrf.URLPolicy // registration's URL checks, per environment
	urlSandbox   ssrf.URLPolicy
	maxEPs       int // webhook endpoints per owner; 0: no limit
	versions     *versioning.Router
	adminToken   string
	problems     apierror.Writer
	docs         *apierror.ProblemDocs // every code's documentation, at the problems' type URIs
	tel          *otelconv.Telemetry   // nil: no telemetry
	timeouts     graceful.Timeouts
	log          *slog.Logger
	now          func() time.Time
	stats        stats
	openapi      map[string][]byte // each version's OpenAPI document
	handler      http.Handler
	// The API mux, the root mux and what each API route requires (routes.go, permissions.go).
	api, root *http.ServeMux
	rules     map[string]routeRule
	ruleErrs  []error // mistakes in the declarations, reported by checkRules
}

// New returns a Server configured by cfg.
func New(cfg Config) (_ *Server, err error) {
	s := &Server{store: cfg.Store, adminToken: cfg.AdminToken, log: cfg.Logger, now: cfg.Now, timeouts: cfg.Timeouts,
		tel: cfg.Telemetry}
	if s.store == nil {
		s.store = NewMemoryStore()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.adminToken == "" {
		s.adminToken = NewAdminToken()
	}
	// Every problem's type URI resolves to its documentation, which this server serves (ProblemsPath).
	s.problems = apierror.Writer{TypeBase: problemTypeBase(cfg.BaseURL), Logger: s.log, Hooks: s.tel.APIError()}
	if s.docs, err = newProblemDocs(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.stats.faults = make(map[string]int64)

	// Authentication: keys are stored as hashes; the environment comes from the key alone. A key may
	// be restricted to some of the API's permissions (routes.go declares them, and which route needs
	// which); the keys API lists, creates, revokes and rolls a licensee's keys.
	if s.issuer, err = apikey.NewIssuer(cfg.Credentials, &apikey.IssuerOptions{Now: s.now, SandboxBaseURL: cfg.BaseURL,
		LiveBaseURL: cfg.BaseURL, Logger: s.log, Permissions: permissions}); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if s.keys, err = apikey.NewKeysHandler(s.issuer, &apikey.KeysHandlerOptions{Problems: s.problems}); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if s.auth, err = apikey.NewAuthenticator(s.issuer, &apikey.AuthenticatorOptions{Problems: s.problems, Logger: s.log,
		Hooks: s.tel.APIKey()}); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	// Production keys are rate limited per licensee; sandbox keys never are, so a load test in the
	// sandbox measures the build rather than a throttle.
	rate, burst := cmp.Or(cfg.LiveRate, LiveRate), cmp.Or(cfg.LiveBurst, LiveBurst)
	bucket, err := ratelimit.NewTokenBucket(rate, burst, nil)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if s.limit, err = ratelimit.New(bucket, apikey.RateLimitKey,
		&ratelimit.Options{Now: s.now, Problems: s.problems, Logger: s.log, Hooks: s.tel.RateLimit()}); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}

	// Idempotency: every mutating route, scoped by credential, with sandbox and production records in
	// stores of their own (see Config.SandboxIdempotency).
	sbxStore, sbxTx := cfg.SandboxIdempotency, cmp.Or(cfg.SandboxTransactor, cfg.Transactor)
	if sbxStore == nil && cfg.Idempotency != nil {
		sbxStore = cfg.Idempotency
	}
	if s.idem, err = idempotency.New(&idempotency.Options{Store: cfg.Idempotency, Transactor: cfg.Transactor,
		Scope: s.idempotencyScope, Sealer: cfg.Sealer, Now: s.now, Logger: s.log, Problems: s.problems,
		Hooks: s.tel.Idempotency()}); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if s.idemSbx, err = idempotency.New(&idempotency.Options{Store: sbxStore, Transactor: sbxTx,
		Scope: s.idempotencyScope, Sealer: cfg.Sealer, Now: s.now, Logger: s.log, Problems: s.problems,
		Hooks: s.tel.Idempotency()}); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}

	// Versioning: v2 is the newest; v1 is reshaped from it and announces its deprecation and sunset
	// (versions.go). Licensees stay pinned to the version of their first request until they upgrade.
	registry, err := newRegistry(s.now(), cfg.V1Deprecated, cfg.V1Sunset)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.versions, err = versioning.New(registry, &versioning.Options{Now: s.now, Pins: cfg.Pins, Licensee: versionLicensee,
		FirstUse: versioning.PinRequested, AllowOverride: allowOverride, StripVersion: true, RollbackWindow: cfg.RollbackWindow,
		Problems: s.problems, Logger: s.log, Hooks: s.tel.Versioning()})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	// Every event is rendered at the version its endpoint's licensee is pinned to, for deliveries and
	// range retrieval alike: an endpoint's owner is the principal's scope, the router's licensee.
	render := s.versions.EventRenderer(nil)

	// Webhooks: the publisher appends to the store's log (inside the order's transaction, see
	// createOrder); the dispatcher delivers each endpoint through the guarded delivery transport of
	// its environment — the sandbox's under the fault-injecting transport, which acts only on
	// endpoints whose sandbox owner turned faults on: whatever a URL's name resolves to at delivery
	// time, a delivery connects only to an address its environment's guard allows (registration's
	// URL check, with the same guard, is the early, friendly refusal; this is the defence). A
	// transport per environment, because a pooled connection is reused without a new dial: one
	// transport for both would let a production delivery ride a connection only the sandbox's
	// allow-list admitted. The guards' transports ignore HTTP(S)_PROXY, through which they would see
	// only the proxy.
	wh := cfg.Webhooks
	s.maxEPs = wh.maxEndpoints()
	s.urlLive = ssrf.URLPolicy{AllowHTTP: wh.LiveAllowHTTP, Guard: wh.LiveGuard}
	s.urlSandbox = ssrf.URLPolicy{AllowHTTP: !wh.SandboxRequireHTTPS, Guard: wh.SandboxGuard}
	s.publisher, err = producer.NewPublisher(s.store.Log(), s.store, &producer.PublisherOptions{
		APIVersion: registry.Newest().Name, Now: s.now, Hooks: s.tel.Producer(), MaxEventBytes: wh.MaxEventBytes})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.transport, err = sandbox.NewFaultTransport(ssrf.NewTransport(wh.SandboxGuard), &s.faults, &sandbox.FaultTransportOptions{
		Rand:    cfg.Webhooks.FaultRand,
		HoldFor: cfg.Webhooks.ReorderHold,
		OnFault: s.countFault,
		Logger:  s.log,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	schedule := cfg.Webhooks.RetrySchedule
	if schedule == nil {
		schedule = DefaultRetrySchedule()
	}
	poll := cfg.Webhooks.PollInterval
	if poll == 0 {
		poll = DefaultPollInterval
	}
	s.liveTrans = ssrf.NewTransport(wh.LiveGuard)
	// No redirects: a 3xx is not a 2xx, so it is a failed attempt.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	sandboxClient := &http.Client{Transport: s.transport, CheckRedirect: noRedirect}
	liveClient := &http.Client{Transport: s.liveTrans, CheckRedirect: noRedirect}
	s.dispatcher, err = producer.NewDispatcher(s.store.Log(), s.store, &producer.DispatcherOptions{
		Client: liveClient,
		ClientFor: func(ep producer.Endpoint) *http.Client {
			if endpointInSandbox(ep) {
				return sandboxClient
			}
			return liveClient // the stricter default for an owner of no known environment
		},
		Timeout:      cfg.Webhooks.Timeout,
		Schedule:     schedule,
		PollInterval: poll,
		PerOwner:     cmp.Or(wh.PerOwner, DefaultPerOwner),
		PerEndpoint:  cmp.Or(wh.PerEndpoint, DefaultPerEndpoint),
		Now:          s.now,
		Logger:       s.log,
		Render:       render,
		Hooks:        s.tel.Producer(),
		DisableAfter: wh.DisableAfter,
		APIVersion:   registry.Newest().Name,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.wake = s.dispatcher.Wake
	s.ranges, err = producer.NewRangeHandler(s.store.Log(), s.store, s.rangeOwner, &producer.RangeHandlerOptions{
		Render: render, Now: s.now, Problems: s.problems, Hooks: s.tel.Producer()})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.deliveries, err = producer.NewDeliveriesHandler(s.store.Log(), s.store, s.rangeOwner, &producer.DeliveriesHandlerOptions{
		Problems: s.problems, Now: s.now, Wake: s.dispatcher.Wake})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	// The endpoints API: owned by the principal's scope, URLs checked by the policy of its environment,
	// a new endpoint at the licensee's pinned version, any supported version settable, the limit per
	// licensee and environment (none when MaxEndpoints is negative).
	maxEPs := s.maxEPs
	if maxEPs == 0 {
		maxEPs = -1
	}
	s.endpointsAPI, err = producer.NewEndpointsHandler(s.store, scopeOf, &producer.EndpointsHandlerOptions{
		EventTypes: EventCatalogue, URLPolicy: s.urlPolicy, APIVersion: s.pinnedVersion,
		APIVersions: func() []string { return registry.Supported(s.now()) }, MaxEndpoints: maxEPs,
		Now: s.now, Problems: s.problems, Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	// The router strips the version, so the controls live under "/sandbox" as the handlers see it.
	s.controls, err = sandbox.NewControls(sandbox.Hooks{Trigger: s.trigger, SetFaults: s.setFaults, Reset: s.reset},
		&sandbox.ControlsOptions{Prefix: "/sandbox", NotFound: s.notFoundHandler(), Problems: s.problems, Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	// The webhook portal: the page where a licensee manages its endpoints, at PortalPath, opened by
	// a one-time link from POST /{version}/portal_sessions. Each of its actions is a request to the
	// API below authentication, as the session's principal (routes.go builds s.portalAPI).
	if s.portal, err = portal.New(&portal.Options{
		API:            http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.portalAPI.ServeHTTP(w, r) }),
		BaseURL:        portalBaseURL(cfg.BaseURL),
		Store:          cfg.Portal,
		Title:          "Orders API · Webhooks",
		FrameAncestors: cfg.PortalFrameAncestors,
		APIVersions:    func() []string { return registry.Supported(s.now()) },
		Now:            s.now,
		Logger:         s.log,
	}); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	// The request log: every request, refused ones included, recorded off the request's path and
	// written in batches; each licensee reads its own through the requests API (routes.go). Its
	// flusher runs from here on: a failure below stops it, and Serve closes it at shutdown.
	s.reqlogStore = cfg.RequestLog
	if s.reqlogStore == nil {
		if s.reqlogStore, err = requestlog.NewMemoryStore(nil); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	if s.requests, err = requestlog.NewRequestsHandler(s.reqlogStore, scopeOf,
		&requestlog.RequestsHandlerOptions{Problems: s.problems, Logger: s.log}); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if !cfg.DisableRequestLog {
		if s.reqlog, err = requestlog.New(&requestlog.Options{Store: s.reqlogStore, Route: routeOf, Now: s.now,
			Logger: s.log}); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		defer func() {
			if err != nil {
				_ = s.reqlog.Close(context.Background()) // nothing was served: nothing to write
			}
		}()
	}
	if s.handler, err = s.routes(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	// The documents show each route's permission: they are built from the routes' declarations.
	if s.openapi, err = s.openAPIDocuments(cfg.BaseURL); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if s.tel != nil {
		s.handler = traced(s.handler, s.tel)
	}
	return s, nil
}

// NewAdminToken returns a fresh admin token: "adm_" and 128 random bits.
func NewAdminToken() string { return adminTokens.New() }

// AdminToken returns the token that authorises POST /v1/sandbox/credentials.
func (s *Server) AdminToken() string { return s.adminToken }

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// IssueCredentials starts a new evaluation (sandbox) or a new production licensee (live): a fresh
// licensee and an API key for it. The key is in the result only; the store keeps its hash.
func (s *Server) IssueCredentials(ctx context.Context, env apikey.Environment) (apikey.Credentials, error) {
	return s.issuer.Issue(ctx, apikey.Evaluation{Licensee: licenseeIDs.New(), Environment: env})
}

// Stats returns what the server has done so far.
func (s *Server) Stats() Stats {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	st := Stats{OrdersCreated: s.stats.ordersCreated.Load(), EventsEmitted: s.stats.eventsEmitted.Load(),
		Faults: make(map[string]int64, len(s.stats.faults)), Idempotency: addStats(s.idem.Stats(), s.idemSbx.Stats())}
	for k, v := range s.stats.faults {
		st.Faults[k] = v
	}
	return st
}

// addStats sums the two middlewares' counters for the report.
func addStats(a, b idempotency.Stats) idempotency.Stats {
	return idempotency.Stats{
		Executed: a.Executed + b.Executed, Replayed: a.Replayed + b.Replayed, Conflicts: a.Conflicts + b.Conflicts,
		Reused: a.Reused + b.Reused, Rejected: a.Rejected + b.Rejected, StoreErrors: a.StoreErrors + b.StoreErrors,
		FailedOpen: a.FailedOpen + b.FailedOpen, LeaseLost: a.LeaseLost + b.LeaseLost, Released: a.Released + b.Released,
		Panics: a.Panics + b.Panics, Renewals: a.Renewals + b.Renewals, QuotaExceeded: a.QuotaExceeded + b.QuotaExceeded,
		CompletionRetries: a.CompletionRetries + b.CompletionRetries, Pending: a.Pending + b.Pending,
	}
}

func (s *Server) countFault(ev sandbox.FaultEvent) {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	s.stats.faults[string(ev.Fault)]++
}

// DeliverDue makes one delivery pass at once, for callers that want events out without waiting for
// the next poll (the demo's final flush).
func (s *Server) DeliverDue(ctx context.Context) (producer.Stats, error) {
	return s.dispatcher.DeliverDue(ctx)
}

// Serve answers HTTP on ln, delivers webhooks and records the API keys' last uses until ctx is
// cancelled, then shuts down gracefully: it stops accepting connections and lets requests in flight
// finish (a connection that has not sent a request yet is closed after a short grace instead of
// being waited on: see package graceful), writes what the request log holds and stops it, stops the
// dispatcher (deliveries in flight are handed back, to be retried, never lost), writes the last uses
// noted since the last write, and sends any delivery the reorder fault still holds. It returns nil
// after a clean shutdown. A Server serves once: the requests of a second Serve are not logged.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// A slow or hostile client cannot hold a connection open forever (graceful.DefaultTimeouts).
	hs := graceful.NewServer(s.handler, s.timeouts, slog.NewLogLogger(s.log.Handler(), slog.LevelWarn))
	conns := graceful.Track(hs)
	dispatchCtx, stopDispatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopDispatch()
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.dispatcher.Run(dispatchCtx) })
	// The keys' last uses, noted as requests authenticate, are written once a minute, off every
	// request's path, and once more at shutdown.
	wg.Go(func() { _ = s.issuer.Run(dispatchCtx) })
	if s.tel != nil {
		// The backlog gauges read the event log at each collection, while this server serves.
		reg, err := s.tel.ObserveBacklog(s.dispatcher)
		if err != nil {
			s.log.Warn("webhook backlog gauges unavailable", "error", err)
		} else {
			defer func() { _ = reg.Unregister() }()
		}
	}

	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served: // the listener failed: shut down the rest all the same
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), DefaultShutdownTimeout)
	defer cancel()
	err := graceful.Shutdown(shutdownCtx, hs, conns)
	// Responses whose completion the store refused are still being retried: give them what is left
	// of the shutdown's time. Then the request log writes what it holds: every request has ended.
	err = errors.Join(err, s.idem.Close(shutdownCtx), s.idemSbx.Close(shutdownCtx))
	if s.reqlog != nil {
		err = errors.Join(err, s.reqlog.Close(shutdownCtx))
	}
	stopDispatch()
	wg.Wait()
	if cerr := s.transport.Close(); cerr != nil && !errors.Is(cerr, sandbox.ErrTransportClosed) {
		err = errors.Join(err, cerr)
	}
	s.liveTrans.CloseIdleConnections()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return errors.Join(serveErr, err)
	}
	return err
}
