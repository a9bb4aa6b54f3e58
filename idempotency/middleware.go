package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/textproto"
	"slices"
	"sync"
	"time"

	"github.com/svcplatform/conventions"
	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
	"github.com/svcplatform/conventions/seal"
)

// Middleware makes mutating requests idempotent: see the package documentation for the wire
// behaviour. Build one with New and wrap handlers with Handler, or decide without net/http with Begin.
//
// A Middleware is safe for concurrent use. Its zero value is not usable: its Begin and Close return
// ErrNotBuilt, its Handler answers the opaque 500 to every request and its Stats are all zero. Call
// New.
type Middleware struct {
	store            driver.Store
	scope            conventions.CallerFunc
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
	tx               driver.Transactor
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
		m.store = memstore.New(nil)
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
// credential itself is compared exactly. Use it to find the records of a credential
// (driver.Store.Lookup).
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
// every request with the opaque 500 rather than let a mutating request through unguarded. (A zero
// memstore.Store returns memstore.ErrNotBuilt.)
var ErrNotBuilt = errors.New("idempotency: Middleware not built with New")
