package idempotency

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/seal"
)

// minDownstreamSecret is the shortest Options.DownstreamSecret New accepts.
const minDownstreamSecret = 32

// Defaults of Options.
const (
	DefaultLease            = 30 * time.Second
	DefaultRetention        = 24 * time.Hour
	DefaultMaxRequestBytes  = 1 << 20
	DefaultMaxResponseBytes = 1 << 20
	DefaultRetryAfter       = time.Second
	DefaultStoreTimeout     = 5 * time.Second
	DefaultQuotaRetryAfter  = time.Minute
)

// Problem codes the middleware answers with. They are stable: clients may switch on them.
const (
	CodeKeyMissing = "idempotency_key_missing" // 400, located at header Idempotency-Key
	CodeKeyInvalid = "idempotency_key_invalid" // 400, located at header Idempotency-Key
	CodeKeyReused  = "idempotency_key_reused"  // 422, located at header Idempotency-Key
	CodeKeyInUse   = "idempotency_key_in_use"  // 409 with Retry-After
	// CodeCredentialMissing is the default Scope's 401 for a request without Authorization.
	CodeCredentialMissing = "credential_missing"
	// CodeBodyUnreadable is a 400 for a request body that failed while being read.
	CodeBodyUnreadable = "body_unreadable"
	// CodeResponseTooLarge is the 500 of transactional mode for a response over MaxResponseBytes: the
	// transaction was rolled back, so nothing was carried out.
	CodeResponseTooLarge = "idempotency_response_too_large"
	// CodeQuotaExceeded is the 429 for a scope that holds as many idempotency records as the store
	// allows one scope (located at header Idempotency-Key, with Retry-After).
	CodeQuotaExceeded = "idempotency_quota_exceeded"
)

// Options configures a Middleware. A nil *Options and the zero value mean the defaults.
type Options struct {
	// Store keeps the records. Default: a NewMemoryStore(nil) of this middleware's own, which is right
	// for one replica only: replicas that share traffic must share a Store (pgstore, redisstore).
	Store Store

	// Scope maps a request to its scope: records of different scopes never meet, so the same key sent
	// with two credentials is two requests, and no client can be replayed another's response. It must
	// return a non-empty string; an error is answered with apierror.Write (an *apierror.Error as it
	// is, anything else as an opaque 500).
	//
	// Default: the hex SHA-256 of the Authorization header (the credential itself is never stored),
	// and 401 credential_missing located at header Authorization when there is none. Services that
	// authenticate otherwise, or not at all, must set Scope: typically to the authenticated
	// principal's licensee and environment, which an earlier middleware put in the request context.
	Scope func(r *http.Request) (string, error)

	// Methods are the methods that require a key. Default POST, PUT, PATCH and DELETE. Other methods
	// pass through untouched.
	Methods []string

	// Lease is how long a claim holds its key without renewal; the middleware renews it every Lease/3
	// while the handler runs, so only a crashed or stalled process lets it lapse. Default DefaultLease.
	// Renewal runs on one goroutine per Middleware, started by the first claim and ended by the first
	// of its ticks (every Lease/6) that finds no request in flight; a test under testing/synctest lets
	// that much time pass after its last request so that the bubble can end.
	Lease time.Duration
	// Retention is how long a completed response is replayed. Default DefaultRetention (24 h).
	Retention time.Duration

	// MaxRequestBytes caps the request body the middleware reads to fingerprint the request; larger
	// bodies get 413 body_too_large and nothing is stored. Default DefaultMaxRequestBytes (1 MiB).
	MaxRequestBytes int64
	// MaxResponseBytes caps the response body that is stored for replay. A larger response still
	// streams to its client in full, but its record keeps only the status and the allow-listed
	// headers: the replay has an empty body and HeaderBodyOmitted. The handler never runs twice.
	// Default DefaultMaxResponseBytes (1 MiB).
	MaxResponseBytes int64
	// Fingerprint describes a request, so that a retry that is the same request replays while another
	// request under the same key is refused (422 idempotency_key_reused, on every path: in flight,
	// completed, lease expired). It gets the request and its whole body (at most MaxRequestBytes,
	// valid only during the call). An error is answered with apierror.Write (an *apierror.Error as it
	// is, anything else as an opaque 500), and the handler does not run.
	//
	// Default: NewFingerprint over the method, the escaped path, the canonical query and the SHA-256
	// of the body's bytes, so a retry must send the same bytes. CanonicalJSONFingerprint lets a JSON
	// client re-serialize the same body (members reordered, other whitespace). A team's own function
	// may leave out what a retry may change, or add what it must not (a header that selects the
	// behaviour); build it on NewFingerprint. Every replica must use the same function, and changing
	// it makes requests stored before the change different requests (422) until their Retention ends.
	Fingerprint func(r *http.Request, body []byte) (Fingerprint, error)

	// DownstreamSecret keys the HMAC-SHA256 that derives DownstreamKey's keys from a request's scope
	// and Idempotency-Key, so that an outside system that receives them cannot confirm a guess of
	// either, however guessable the client's keys and the scopes are. Every replica must have the
	// same secret (a key must be the same when a retry reaches another replica), and changing it
	// changes every downstream key: an outside system would then see the retry of a request made
	// before the change as a new call. At least 32 bytes, random; an empty one is an error. Default:
	// none, and a public HMAC key: enough when scopes or keys cannot be guessed (the default Scope is a
	// credential's SHA-256; Transport's keys are random UUIDs).
	DownstreamSecret []byte

	// ReplayHeaders are response headers stored and replayed in addition to Content-Type, Location
	// and Cache-Control. Other headers are not replayed: they may be per-request (Date, X-Request-Id)
	// or sensitive (Set-Cookie). A replay also carries Idempotent-Replayed: true, and Cache-Control:
	// no-store when the handler set no Cache-Control: it is one client's answer.
	ReplayHeaders []string

	// ReleaseServerErrors makes a 5xx response release the key instead of being stored, so that a
	// retry runs the handler again. By default every completed response is stored, 5xx included
	// (Stripe's rule): a 500 after a partial side effect must not be retried blindly.
	ReleaseServerErrors bool
	// FailOpen runs the handler without idempotency when the store cannot be reached, instead of
	// answering 503. It trades the exactly-once guarantee for availability; the default fails closed.
	FailOpen bool
	// RetryAfter is the Retry-After of 409 idempotency_key_in_use and of 503. Default 1 s.
	RetryAfter time.Duration
	// QuotaRetryAfter is the Retry-After of 429 idempotency_quota_exceeded: places free up as the
	// scope's records reach the end of their retention. Default DefaultQuotaRetryAfter (1 min).
	QuotaRetryAfter time.Duration

	// StoreTimeout bounds every store call the middleware makes (claim, renewal, completion,
	// release): a store that does not answer within it counts as failed, so a partitioned database
	// costs a client a 503 with Retry-After after StoreTimeout, not a hang. Default
	// DefaultStoreTimeout (5 s). Renewals are also bounded by a third of the lease.
	StoreTimeout time.Duration

	// Sealer, when set, seals every stored record — status, headers and body together — with
	// AES-256-GCM under its key ring, bound to the record's scope and key, so that no stored body is
	// readable at rest and nothing a writer of the store changes is replayed. A Sealer fails closed:
	// a record that is not sealed (written before the Sealer was set, or by someone without the
	// ring), was sealed body-only by an earlier version, or does not open (tampered with, moved to
	// another key, or sealed with a key no longer in the ring) is refused with ErrRecordRefused —
	// answered with the opaque 500, never replayed, and the handler never runs again; the record is
	// left in place until its retention ends. Keep a retired key in the ring for a Retention after a
	// rotation. Without a Sealer, records are stored as they are, except the bodies a handler marked
	// with Secret, which are not stored at all. See Secret and seal.Ring.
	Sealer *seal.Ring

	// CancelOnLeaseLoss gives the handler a request context that is cancelled, with cause
	// ErrLeaseLost (context.Cause), when renewal finds that the lease was lost to a newer claim:
	// the handler stalled past its lease and a retry took the key over. Whatever the handler then
	// returns is refused by fencing either way; cancelling lets it stop early. Off by default: it
	// costs a derived context and a copy of the request on every execution.
	CancelOnLeaseLoss bool

	// Transactor, when set, runs each governed request's claim, handler and completion in one
	// transaction (see Transactor); the response is then buffered until the commit.
	Transactor Transactor

	// Now is the clock. Default time.Now. Leases and retention are computed from it; the renewal
	// timer runs on the runtime's timers (use testing/synctest to control both in tests).
	Now func() time.Time
	// Logger receives store errors, refused stale completions, lost leases and released panics.
	// Keys are logged, credentials never. Default: nothing is logged.
	Logger *slog.Logger
	// Problems renders the problem responses. The zero value uses apierror's defaults.
	Problems apierror.Writer
	// Hooks are told every request's outcome and the duration of every store call and handler,
	// for metrics and traces (otelconv fills them with OpenTelemetry). Default: none, at no cost.
	Hooks *Hooks
}

// Middleware makes mutating requests idempotent: see the package documentation for the wire
// behaviour. Build one with New and wrap handlers with Handler, or decide without net/http with Begin.
//
// A Middleware is safe for concurrent use. Its zero value is not usable: its Begin and Close return
// ErrNotBuilt, its Handler answers the opaque 500 to every request and its Stats are all zero. Call
// New.
type Middleware struct {
	store            Store
	scope            func(*http.Request) (string, error)
	fingerprint      func(*http.Request, []byte) (Fingerprint, error) // nil: over the body's bytes
	methods          []string                                         // nil: the default set
	lease            time.Duration
	renewEvery       time.Duration
	retention        time.Duration
	maxRequestBytes  int64
	maxResponseBytes int64
	replayHeaders    []string // canonical names, Content-Type, Location and Cache-Control first
	releaseServer    bool
	failOpen         bool
	cancelOnLoss     bool
	storeTimeout     time.Duration
	sealer           *seal.Ring
	downstreamSecret []byte
	tx               Transactor
	now              func() time.Time
	log              *slog.Logger
	problems         apierror.Writer
	hooks            *Hooks // nil: none set, nothing measured
	backend          string // the store's name for the Hooks, asked once

	// Problems that do not depend on the request are built once; apierror.Writer never mutates them.
	pMissing, pInvalid, pReused, pInUse, pUnavailable, pTooLarge, pNoCredential, pUnreadable, pRespTooLarge, pQuota, pInternal *apierror.Error

	stats   counters
	buffers sync.Pool // *exchange
	renewer renewer
	pending pending
}

// New returns a Middleware configured by opts, which may be nil. A configuration it cannot honour is
// an error that names the option: a negative duration or size, a Retention not longer than the Lease
// (a record would expire while its request still runs, and a retry would run it again), or Methods that
// name a safe method (GET, HEAD, OPTIONS, TRACE) or something that is not a method.
func New(opts *Options) (*Middleware, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	m := &Middleware{
		store:            o.Store,
		scope:            o.Scope,
		fingerprint:      o.Fingerprint,
		lease:            o.Lease,
		retention:        o.Retention,
		maxRequestBytes:  o.MaxRequestBytes,
		maxResponseBytes: o.MaxResponseBytes,
		releaseServer:    o.ReleaseServerErrors,
		failOpen:         o.FailOpen,
		cancelOnLoss:     o.CancelOnLeaseLoss,
		storeTimeout:     o.StoreTimeout,
		sealer:           o.Sealer,
		downstreamSecret: bytes.Clone(o.DownstreamSecret),
		tx:               o.Transactor,
		now:              o.Now,
		log:              o.Logger,
		problems:         o.Problems,
		hooks:            o.Hooks.used(),
	}
	if m.store == nil {
		m.store = NewMemoryStore(nil)
	}
	m.backend = backendOf(m.store)
	if m.scope == nil {
		m.scope = m.credentialScope
	}
	if len(o.Methods) > 0 {
		m.methods = append([]string(nil), o.Methods...)
	}
	if m.lease <= 0 {
		m.lease = DefaultLease
	}
	m.renewEvery = m.lease / 3
	if m.renewEvery < 2*time.Millisecond {
		m.renewEvery = 2 * time.Millisecond // the renewer ticks at half of it
	}
	if m.retention <= 0 {
		m.retention = DefaultRetention
	}
	if m.maxRequestBytes <= 0 {
		m.maxRequestBytes = DefaultMaxRequestBytes
	}
	if m.maxResponseBytes <= 0 {
		m.maxResponseBytes = DefaultMaxResponseBytes
	}
	if m.storeTimeout <= 0 {
		m.storeTimeout = DefaultStoreTimeout
	}
	m.replayHeaders = []string{"Content-Type", "Location", "Cache-Control"}
	for _, h := range o.ReplayHeaders {
		h = textproto.CanonicalMIMEHeaderKey(h)
		if h != headerSealed && !slices.Contains(m.replayHeaders, h) {
			m.replayHeaders = append(m.replayHeaders, h)
		}
	}
	retryAfter := o.RetryAfter
	if retryAfter <= 0 {
		retryAfter = DefaultRetryAfter
	}
	quotaRetryAfter := o.QuotaRetryAfter
	if quotaRetryAfter <= 0 {
		quotaRetryAfter = DefaultQuotaRetryAfter
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}

	m.pMissing = apierror.Invalid(apierror.Header(HeaderKey, CodeKeyMissing,
		"header Idempotency-Key is required on "+m.methodList()+" requests"))
	m.pInvalid = apierror.Invalid(apierror.Header(HeaderKey, CodeKeyInvalid,
		"must be 1 to 255 bytes of visible ASCII (0x21-0x7E) and sent once"))
	m.pReused = apierror.Unprocessable(CodeKeyReused,
		"header Idempotency-Key: this key was used with a different request (method, path, query or body); use a new key for a new request",
		apierror.Header(HeaderKey, CodeKeyReused, "was used with a different request"))
	m.pInUse = apierror.Conflict(CodeKeyInUse,
		"header Idempotency-Key: a request with this key is still being processed; retry after the number of seconds in Retry-After",
		apierror.Header(HeaderKey, CodeKeyInUse, "a request with this key is still being processed")).
		WithHeader("Retry-After", apierror.RetryAfter(retryAfter))
	m.pUnavailable = apierror.Unavailable(retryAfter, "",
		"the request was not carried out because its idempotency record could not be checked; retry with the same Idempotency-Key")
	m.pTooLarge = apierror.BodyTooLarge(m.maxRequestBytes)
	m.pNoCredential = apierror.Unauthenticated(CodeCredentialMissing, "header Authorization is required",
		apierror.Header("Authorization", CodeCredentialMissing, "is required"))
	m.pUnreadable = apierror.Invalid(apierror.Body("", CodeBodyUnreadable, "the request body could not be read"))
	m.pQuota = apierror.New(http.StatusTooManyRequests, CodeQuotaExceeded,
		"header Idempotency-Key: this credential holds as many idempotency records as it may; retry after the number of seconds in Retry-After, as earlier records reach the end of their retention",
		apierror.Header(HeaderKey, CodeQuotaExceeded, "no room for another idempotency record for this credential")).
		WithHeader("Retry-After", apierror.RetryAfter(quotaRetryAfter))
	m.pInternal = apierror.Internal()
	m.pRespTooLarge = apierror.New(http.StatusInternalServerError, CodeResponseTooLarge,
		"the response was too large to store for replay, so the request was rolled back and not carried out")

	m.buffers.New = func() any { return new(exchange) }
	m.pending.init()
	return m, nil
}

func (m *Middleware) methodList() string {
	if m.methods == nil {
		return "POST, PUT, PATCH and DELETE"
	}
	s := ""
	for i, meth := range m.methods {
		switch {
		case i == 0:
		case i == len(m.methods)-1:
			s += " and "
		default:
			s += ", "
		}
		s += meth
	}
	return s
}

// governs reports whether requests with method need a key.
func (m *Middleware) governs(method string) bool {
	if m.methods == nil {
		switch method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			return true
		}
		return false
	}
	return slices.Contains(m.methods, method)
}

// credentialScope is the default Scope: the credential's hash, never the credential.
func (m *Middleware) credentialScope(r *http.Request) (string, error) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return "", m.pNoCredential
	}
	return CredentialScope(auth), nil
}

// CredentialScope is the scope the default Options.Scope gives a request whose Authorization header
// is authorization: the hex SHA-256 of the credential, never the credential itself. The
// authentication scheme is case-insensitive (RFC 9110 §11.1) and separated from the credential by one
// or more spaces, so "Bearer x", "bearer x" and "BEARER  x" are one credential and one scope; the
// credential itself is compared exactly. Use it to find the records of a credential (Store.Lookup).
func CredentialScope(authorization string) string {
	var sum [sha256.Size]byte
	if len(authorization) <= 512 {
		// Hashed from a stack copy: converting a string longer than 32 bytes allocates.
		var b [512]byte
		sum = sha256.Sum256(canonicalCredential(b[:0], authorization))
	} else {
		sum = sha256.Sum256(canonicalCredential(make([]byte, 0, len(authorization)), authorization))
	}
	var buf [2 * sha256.Size]byte
	hex.Encode(buf[:], sum[:])
	return string(buf[:])
}

// canonicalCredential appends auth to dst with its scheme in lower case and one space after it.
func canonicalCredential(dst []byte, auth string) []byte {
	i := 0
	for i < len(auth) && auth[i] != ' ' {
		c := auth[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
		i++
	}
	for i < len(auth) && auth[i] == ' ' {
		i++
	}
	if i == len(auth) {
		return dst // a scheme alone
	}
	dst = append(dst, ' ')
	return append(dst, auth[i:]...)
}

// ErrNotBuilt: a Middleware used without New. Its Begin and Close return it, and its Handler answers
// every request with the opaque 500 rather than let a mutating request through unguarded. The
// methods of a zero MemoryStore return errors that match it with errors.Is and name their type.
var ErrNotBuilt = errors.New("idempotency: Middleware not built with New")

// notBuiltError is ErrNotBuilt for a type other than Middleware: its message names the type and its
// constructor, and errors.Is matches ErrNotBuilt.
type notBuiltError struct{ msg string }

func (e *notBuiltError) Error() string        { return e.msg }
func (e *notBuiltError) Is(target error) bool { return target == ErrNotBuilt }

var errZeroMemoryStore error = &notBuiltError{"idempotency: MemoryStore not built with NewMemoryStore"}

// Handler returns next wrapped with the middleware.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	if m == nil || m.store == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { apierror.Write(w, r, ErrNotBuilt) })
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

// errBodyTooLarge marks a request body over MaxRequestBytes.
var errBodyTooLarge = errors.New("idempotency: request body too large")

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !m.governs(r.Method) {
		next.ServeHTTP(w, r)
		return
	}
	// The requester first (an unauthenticated client learns nothing else), then its key.
	scope, err := m.scope(r)
	if err != nil || scope == "" {
		m.stats.rejected.Add(1)
		m.outcome(r.Context(), OutcomeRejected)
		if err == nil {
			err = errors.New("idempotency: Options.Scope returned an empty scope")
			m.log.LogAttrs(r.Context(), slog.LevelError, "idempotency: empty scope", slog.String("path", r.URL.Path))
		}
		m.problems.Write(w, r, err)
		return
	}
	key, err := KeyFromHeader(r.Header)
	if err != nil {
		m.stats.rejected.Add(1)
		m.outcome(r.Context(), OutcomeRejected)
		if err == ErrKeyMissing {
			m.problems.Write(w, r, m.pMissing)
		} else {
			m.problems.Write(w, r, m.pInvalid)
		}
		return
	}
	x := m.buffers.Get().(*exchange)
	defer func() {
		if !x.retained {
			m.putExchange(x)
		}
	}()
	if err := x.readBody(r, m.maxRequestBytes); err != nil {
		m.stats.rejected.Add(1)
		m.outcome(r.Context(), OutcomeRejected)
		var mbe *http.MaxBytesError
		if err == errBodyTooLarge || errors.As(err, &mbe) {
			m.problems.Write(w, r, m.pTooLarge)
		} else {
			m.problems.Write(w, r, m.pUnreadable)
		}
		return
	}
	req := Request{Scope: scope, Key: key}
	if m.fingerprint == nil {
		req.Fingerprint = NewFingerprint(r.Method, r.URL.EscapedPath(), r.URL.RawQuery, sha256.Sum256(x.buf))
	} else if req.Fingerprint, err = m.fingerprint(r, x.buf); err != nil {
		m.stats.rejected.Add(1)
		m.outcome(r.Context(), OutcomeRejected)
		m.problems.Write(w, r, err)
		return
	}
	if m.tx != nil {
		m.serveTx(w, r, next, x, req)
		return
	}
	a := &x.attempt
	if err := m.begin(r.Context(), req, a, m.cancelOnLoss, &x.renewal); err != nil {
		if errors.Is(err, ErrQuotaExceeded) {
			m.problems.Write(w, r, m.pQuota)
			return
		}
		if errors.Is(err, ErrRecordRefused) {
			// Never FailOpen: the request was carried out once already.
			m.problems.Write(w, r, apierror.Internal())
			return
		}
		if m.failOpen {
			m.stats.failedOpen.Add(1)
			m.outcome(r.Context(), OutcomeFailedOpen)
			m.log.LogAttrs(r.Context(), slog.LevelWarn, "idempotency: store failed; running the handler without idempotency (FailOpen)",
				slog.String("idempotency_key", key), slog.Any("error", err))
			x.body.reset(x.buf)
			r2 := r.WithContext(m.withDownstream(r.Context(), Key{Scope: scope, Key: key}))
			r2.Body = &x.body
			next.ServeHTTP(w, r2)
			return
		}
		m.outcome(r.Context(), OutcomeStoreError)
		m.problems.Write(w, r, m.pUnavailable)
		return
	}
	switch a.Decision {
	case Replay:
		writeReplay(w, a.Response)
		return
	case InUse, Reused:
		m.problems.Write(w, r, a.Problem())
		return
	}
	m.execute(w, r, next, x, a)
}

// execute runs the handler for a claimed attempt and completes it.
func (m *Middleware) execute(w http.ResponseWriter, r *http.Request, next http.Handler, x *exchange, a *Attempt) {
	// The handler reads the buffered body. Swapping r.Body in place (and back) is what
	// http.MaxBytesReader users do. The handler's request is a copy with a context that carries the
	// DownstreamKey material: the copy and the context are one allocation, not pooled, since a
	// goroutine the handler leaves behind may still read them.
	x.body.reset(x.buf)
	ctx := a.ctx
	var start time.Time
	if m.hooks != nil {
		ctx, start = m.handlerStart(ctx, a)
	}
	g := &governedRequest{ctx: downstreamContext{Context: ctx, key: a.Key, secret: m.downstreamSecret}}
	g.req = *r.WithContext(&g.ctx) // WithContext is inlined: its own copy stays on the stack
	r2 := &g.req
	origBody := r.Body
	r2.Body = &x.body
	defer func() { r.Body = origBody }()
	rec := &x.rec
	rec.reset(w, m, false)
	finished := false
	defer func() {
		if finished {
			return
		}
		// The handler panicked (or called runtime.Goexit). Release the key so that a retry can run
		// — nothing is stored — and let the panic go on with its original stack.
		m.stats.panics.Add(1)
		if m.hooks != nil {
			m.handlerEnd(ctx, a, start, http.StatusInternalServerError, true)
		}
		x.detached.parent = r.Context()
		err := a.Release(&x.detached)
		m.log.LogAttrs(r.Context(), slog.LevelError, "idempotency: handler panicked; key released",
			slog.String("idempotency_key", a.Key.Key), slog.Any("release_error", err))
	}()
	next.ServeHTTP(rec, r2)
	finished = true
	if m.hooks != nil {
		m.handlerEnd(ctx, a, start, rec.finalStatus(), false)
	}
	x.detached.parent = r.Context()
	m.finish(&x.detached, x, a, rec)
}

// finish stores (or releases) the handler's response for a claimed attempt.
func (m *Middleware) finish(ctx context.Context, x *exchange, a *Attempt, rec *recorder) {
	rec.finalize()
	if m.releases(rec) {
		if err := a.Release(ctx); err != nil {
			m.completionFailed(ctx, a, err, "release")
		}
		return
	}
	omitted := rec.overflow || m.redacts(rec)
	err := a.completeRecorded(ctx, rec, omitted)
	if err == nil || errors.Is(err, ErrLeaseLost) {
		if err != nil {
			m.completionFailed(ctx, a, err, "complete")
		}
		return
	}
	if !omitted && errors.Is(err, ErrStoreFull) {
		// A memory store over its byte budget: a short answer still fits. Store the response without
		// its body rather than let a retry run the handler again.
		m.log.LogAttrs(ctx, slog.LevelWarn, "idempotency: the store refused the full response; storing it without its body",
			slog.String("idempotency_key", a.Key.Key), slog.Any("error", err))
		omitted = true
		if err = a.completeRecorded(ctx, rec, true); err == nil || errors.Is(err, ErrLeaseLost) {
			return
		}
	}
	// The store failed, and the claim is still ours (renewal goes on): keep trying in the background
	// until the response is stored, the claim is lost, or Close gives up. Meanwhile duplicates find
	// the key in flight (409), as its lease is kept alive.
	m.completionFailed(ctx, a, err, "complete")
	m.pending.defer_(m, ctx, x, a, rec.stored(omitted))
}

// redacts reports whether a response is stored without its body because it carries a secret and
// there is no Sealer to store it sealed.
func (m *Middleware) redacts(rec *recorder) bool { return rec.secret && m.sealer == nil }

// releases reports whether a finished handler's claim is released instead of stored: a 5xx under
// ReleaseServerErrors, or a 4xx whose handler said nothing was done (NotPerformed).
func (m *Middleware) releases(rec *recorder) bool {
	status := rec.status
	switch {
	case m.releaseServer && status >= 500:
		return true
	case rec.notPerformed && status >= 400 && status < 500:
		return true
	}
	return false
}

func (m *Middleware) completionFailed(ctx context.Context, a *Attempt, err error, op string) {
	if errors.Is(err, ErrLeaseLost) {
		// The lease lapsed and another request took the key over: its result, not ours, is the
		// record. Our client got our response; it is not stored.
		m.log.LogAttrs(ctx, slog.LevelWarn, "idempotency: stale owner's "+op+" refused: the key was taken over",
			slog.String("idempotency_key", a.Key.Key), slog.Uint64("token", a.Token))
		return
	}
	m.log.LogAttrs(ctx, slog.LevelError, "idempotency: "+op+" failed",
		slog.String("idempotency_key", a.Key.Key), slog.Any("error", err))
}

// writeReplay answers with a stored response. A replay is never cached (Cache-Control: no-store,
// unless the original response said otherwise): it is one client's answer, and may carry a secret.
func writeReplay(w http.ResponseWriter, resp *Response) {
	h := w.Header()
	for k, vs := range resp.Header {
		if k == headerSealed {
			continue
		}
		// Shared with the store: capped so that an Add downstream copies instead of writing into it.
		h[k] = vs[:len(vs):len(vs)]
	}
	vals := make([]string, 2) // one allocation for both values
	vals[0], vals[1] = "true", "no-store"
	h[HeaderReplayed] = vals[0:1:1]
	if _, ok := resp.Header["Cache-Control"]; !ok {
		h["Cache-Control"] = vals[1:2:2]
	}
	w.WriteHeader(resp.Status)
	if len(resp.Body) > 0 {
		_, _ = w.Write(resp.Body)
	}
}

// exchange is the per-request state of a governed request, pooled.
type exchange struct {
	retained bool   // a deferred completion still owns it: not pooled by serve
	buf      []byte // the request body
	body     bodyReader
	rec      recorder
	attempt  Attempt
	renewal  renewal // never copied or zeroed: see renewal
	detached detachedContext
}

// detachedContext is context.WithoutCancel without its allocation: the completion of a request must
// not be abandoned because its client went away, but it keeps the request's values (tracing, say).
type detachedContext struct{ parent context.Context }

func (detachedContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (detachedContext) Done() <-chan struct{}       { return nil }
func (detachedContext) Err() error                  { return nil }
func (c *detachedContext) Value(key any) any        { return c.parent.Value(key) }
func (c *detachedContext) String() string           { return "idempotency.detachedContext" }

// Pooled buffers above this are dropped, so that one huge request cannot pin memory.
const maxPooledBuffer = 256 << 10

func (m *Middleware) putExchange(x *exchange) {
	if cap(x.buf) > maxPooledBuffer {
		x.buf = nil
	}
	x.body = bodyReader{}
	x.detached.parent = nil
	x.rec.release()
	x.attempt = Attempt{}
	m.buffers.Put(x)
}

// readBody reads the whole request body into x.buf, at most limit bytes.
func (x *exchange) readBody(r *http.Request, limit int64) error {
	b := x.buf[:0]
	if r.Body != nil && r.Body != http.NoBody {
		if r.ContentLength > limit {
			return errBodyTooLarge
		}
		if r.ContentLength > 0 && int64(cap(b)) < r.ContentLength+1 {
			b = make([]byte, 0, r.ContentLength+1) // +1: room to see EOF without growing
		}
		for {
			if len(b) == cap(b) {
				b = append(b, 0)[:len(b)]
			}
			room := b[len(b):cap(b)]
			if int64(len(b)+len(room)) > limit+1 {
				room = room[:limit+1-int64(len(b))]
			}
			n, err := r.Body.Read(room)
			b = b[:len(b)+n]
			if int64(len(b)) > limit {
				x.buf = b
				return errBodyTooLarge
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				x.buf = b
				return err
			}
		}
	}
	x.buf = b
	return nil
}

// bodyReader replays the buffered request body to the handler.
type bodyReader struct {
	b   []byte
	off int
}

func (br *bodyReader) reset(b []byte) { *br = bodyReader{b: b} }

func (br *bodyReader) Read(p []byte) (int, error) {
	if br.off >= len(br.b) {
		return 0, io.EOF
	}
	n := copy(p, br.b[br.off:])
	br.off += n
	return n, nil
}

// WriteTo lets io.Copy and io.ReadAll skip an intermediate buffer.
func (br *bodyReader) WriteTo(w io.Writer) (int64, error) {
	if br.off >= len(br.b) {
		return 0, nil
	}
	n, err := w.Write(br.b[br.off:])
	br.off += n
	return int64(n), err
}

func (br *bodyReader) Close() error { return nil }

// validate reports the first option New cannot honour.
func (o *Options) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Lease", o.Lease}, {"Retention", o.Retention}, {"RetryAfter", o.RetryAfter},
		{"QuotaRetryAfter", o.QuotaRetryAfter}, {"StoreTimeout", o.StoreTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("idempotency: New: %s %v is negative", d.name, d.v)
		}
	}
	if o.DownstreamSecret != nil && len(o.DownstreamSecret) < minDownstreamSecret {
		return fmt.Errorf("idempotency: New: DownstreamSecret is %d bytes, want at least %d random bytes", len(o.DownstreamSecret), minDownstreamSecret)
	}
	if o.MaxRequestBytes < 0 {
		return fmt.Errorf("idempotency: New: MaxRequestBytes %d is negative", o.MaxRequestBytes)
	}
	if o.MaxResponseBytes < 0 {
		return fmt.Errorf("idempotency: New: MaxResponseBytes %d is negative", o.MaxResponseBytes)
	}
	lease, retention := cmp.Or(o.Lease, DefaultLease), cmp.Or(o.Retention, DefaultRetention)
	if retention <= lease {
		return fmt.Errorf("idempotency: New: Retention %v must be longer than Lease %v: a record would expire while its request runs", retention, lease)
	}
	for _, m := range o.Methods {
		switch {
		case !validMethodToken(m):
			return fmt.Errorf("idempotency: New: Methods: %q is not an HTTP method", m)
		case m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions || m == http.MethodTrace:
			return fmt.Errorf("idempotency: New: Methods: %s is a safe method and needs no Idempotency-Key", m)
		}
	}
	return nil
}

// validMethodToken reports whether m is an RFC 9110 method token.
func validMethodToken(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if c <= ' ' || c >= 0x7f || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", rune(c)) {
			return false
		}
	}
	return true
}
