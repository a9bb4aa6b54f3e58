package versioning

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/svcplatform/conventions"
	"github.com/svcplatform/conventions/apierror"
)

// Defaults of Options.
const (
	DefaultMaxRequestBody  = apierror.DefaultMaxBodyBytes // 1 MiB, the library's request cap
	DefaultMaxResponseBody = 16 << 20
	DefaultRetryAfter      = time.Second
	DefaultPinCacheSize    = 100_000
	DefaultRollbackWindow  = 72 * time.Hour
)

// FirstUse says which version an unpinned licensee is pinned to by its first request. The zero value
// is PinNewest.
type FirstUse int

const (
	// PinNewest pins to the newest released version, whatever version the first request is on
	// (Stripe's behaviour): a new integration starts on the newest API. A first request on an older
	// version is then refused with 403 version_not_enabled, naming the pin.
	PinNewest FirstUse = iota
	// PinRequested pins to the version of the first request, unless that version is already
	// deprecated, in which case to the newest released version.
	PinRequested
)

// String returns "newest" or "requested".
func (f FirstUse) String() string {
	switch f {
	case PinNewest:
		return "newest"
	case PinRequested:
		return "requested"
	}
	return "invalid"
}

// Options configure a Router. A nil *Options and the zero value mean the defaults.
type Options struct {
	// Now is the clock; nil means time.Now. Lifecycle decisions and pin times use it.
	Now func() time.Time
	// Pins stores each licensee's pinned version; nil means a new MemoryPinStore, which a service
	// with more than one replica must replace with a shared store (pgstore.PinStore).
	Pins PinStore
	// Licensee names the licensee a request belongs to, normally from the principal an
	// authentication middleware put in the context (apikey.RequestScope, say). Requests it names no
	// licensee for ("" and a nil error, or a nil Licensee) are not pinned: they are served on the
	// version in their path. Its error is written as the response (an *apierror.Error such as a 401
	// as it is, anything else as the opaque 500), except on a sunset version, which answers 410
	// whoever asks.
	Licensee conventions.CallerFunc
	// AllowOverride, when set and returning true, lets a request on another version than the
	// licensee's pin be served anyway, once, without moving the pin: the per-request override the
	// sandbox offers so an integration can try the next version before upgrading. Nil allows none.
	AllowOverride func(r *http.Request, licensee, pinned, requested string) bool
	// FirstUse chooses the first pin of a licensee; the zero value is PinNewest.
	FirstUse FirstUse
	// PinCacheTTL, when positive, keeps pins read from Pins in memory for that long, so that a
	// request does not cost a store round trip. A cached pin is trusted only when it agrees with the
	// request's version; any disagreement is re-read from the store before a 403, so after an
	// upgrade on another replica the new version works at once, and only the old version may stay
	// reachable for up to the TTL. Zero (the default) reads the store on every request.
	PinCacheTTL time.Duration
	// PinCacheSize bounds the cached pins; zero means DefaultPinCacheSize.
	PinCacheSize int
	// RollbackWindow is how long after an upgrade (from the pin's PinnedAt) the licensee may move
	// its pin back, once, to the version it came from (Pin.Previous), through the pin endpoint or
	// Router.Rollback; afterwards the upgrade is final. The window also closes when that version is
	// sunset. Zero means DefaultRollbackWindow (72 hours); negative means no rollback at all: every
	// upgrade is final at once.
	RollbackWindow time.Duration
	// Hooks, when set, are told about every request the router decides, unknown versions included:
	// the telemetry that tells a team who still calls a deprecated version (UsageCounter.Observe)
	// and what every version answers (otelconv fills them). A nil *Hooks, and a nil field, call
	// nothing, at no cost.
	Hooks *Hooks
	// StripVersion removes the version segment from the path the handler sees ("/v1/orders" becomes
	// "/orders"), as http.StripPrefix does, so that one mux with patterns like "POST /orders" serves
	// every version. False (the default) leaves the path alone: mux patterns carry the version
	// ("POST /v1/orders") or a wildcard ("POST /{version}/orders").
	StripVersion bool
	// SuccessorLink returns the URL for Link: <…>; rel="successor-version" on a deprecated version's
	// responses. Nil means the request's own path with the version segment replaced by the
	// successor's ("/v1/orders/ord_1" links to "/v2/orders/ord_1"), prefixes that outer handlers
	// stripped included. Whatever builds it, a target holding a value shaped like a credential
	// (apierror.LooksLikeCredential, as sent or percent-decoded) is not sent: a key pasted into a
	// path is never reflected into Link.
	SuccessorLink func(r *http.Request, successor string) string
	// MaxRequestBody caps a request body that must be transformed to the newest shape; larger ones
	// get 413. Zero means DefaultMaxRequestBody. Bodies that need no transform are not read, nor
	// (beyond their first bytes) bodies that are not JSON objects, whatever their Content-Type.
	MaxRequestBody int64
	// MaxResponseBody caps a response body buffered for transformation; a handler that writes more
	// gets ErrResponseTooLarge from Write and the client a 500, because the body cannot be shaped
	// and sending the newest shape to an older version would break the client silently. Zero means
	// DefaultMaxResponseBody; negative means no cap.
	MaxResponseBody int64
	// RetryAfter is sent with the 503 written when Pins fails; zero means DefaultRetryAfter.
	RetryAfter time.Duration
	// Problems writes the problem responses: its TypeBase, and its Logger (nil means Logger). Fields
	// left empty come from the Writer apierror.Writer.Handler put in the request's context, else
	// apierror's defaults.
	Problems apierror.Writer
	// Logger records pins created and moved (Info), bodies that could not be shaped (Warn, Error),
	// store failures and misbehaving hooks (Error). Nil logs nothing.
	Logger *slog.Logger
}

// Router is the versioning middleware: it takes the version from the first path segment, refuses
// unknown (404), sunset (410) and not-enabled (403) versions, enforces and creates per-licensee pins,
// announces deprecation (Deprecation, Sunset, Link), echoes X-SVC-Version, puts the Decision in the
// request context, and dispatches to the version's own Handler or to the shared handler, shaping
// bodies for older versions with the registry's changes.
//
// A Router is safe for concurrent use. Build one with New; the zero value is not usable: its Decide,
// Pin, Upgrade, Rollback, Repin, Unpin and RenderEvent return an error that wraps ErrNotBuilt, its
// Handler, PinHandler and ChangelogHandler answer the opaque 500, and its Registry is nil.
type Router struct {
	reg           *Registry
	now           func() time.Time
	pins          PinStore
	licensee      conventions.CallerFunc
	allowOverride func(*http.Request, string, string, string) bool
	firstUse      FirstUse
	window        time.Duration // Options.RollbackWindow with its default; negative: no rollback
	cache         *pinCache
	decided       func(context.Context, Observation) // Hooks.Decided, nil for none
	strip         bool
	successorLink func(*http.Request, string) string
	maxReq        int64
	maxResp       int64
	retryAfter    time.Duration
	writer        apierror.Writer
	log           *slog.Logger
}

// New returns a Router over reg; a nil reg, or a negative RetryAfter, is an error.
func New(reg *Registry, opts *Options) (*Router, error) {
	if reg == nil {
		return nil, errors.New("versioning: New needs a Registry")
	}
	if opts != nil && opts.RetryAfter < 0 {
		return nil, fmt.Errorf("versioning: New: RetryAfter %v is negative", opts.RetryAfter)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	rt := &Router{
		reg: reg, now: o.Now, pins: o.Pins, licensee: o.Licensee, allowOverride: o.AllowOverride,
		firstUse: o.FirstUse, window: o.RollbackWindow, strip: o.StripVersion, successorLink: o.SuccessorLink,
		maxReq: o.MaxRequestBody, maxResp: o.MaxResponseBody, retryAfter: o.RetryAfter,
		writer: o.Problems, log: o.Logger,
	}
	if o.Hooks != nil {
		rt.decided = o.Hooks.Decided
	}
	if rt.now == nil {
		rt.now = time.Now
	}
	if rt.pins == nil {
		rt.pins = NewMemoryPinStore()
	}
	if rt.maxReq <= 0 {
		rt.maxReq = DefaultMaxRequestBody
	}
	if rt.maxResp == 0 {
		rt.maxResp = DefaultMaxResponseBody
	}
	if rt.retryAfter <= 0 {
		rt.retryAfter = DefaultRetryAfter
	}
	if rt.window == 0 {
		rt.window = DefaultRollbackWindow
	}
	if rt.log == nil {
		rt.log = slog.New(slog.DiscardHandler)
	}
	if rt.writer.Logger == nil && o.Logger != nil {
		rt.writer.Logger = o.Logger
	}
	if o.PinCacheTTL > 0 {
		size := o.PinCacheSize
		if size <= 0 {
			size = DefaultPinCacheSize
		}
		rt.cache = newPinCache(o.PinCacheTTL, size)
	}
	return rt, nil
}

// Registry returns the router's registry.
func (rt *Router) Registry() *Registry {
	if rt == nil {
		return nil
	}
	return rt.reg
}
