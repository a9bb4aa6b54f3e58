package sandbox

import (
	"container/list"
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/svcplatform/conventions/apierror"
)

// Limiter is the production rate-limit hook: it decides whether a principal may make one more request
// at now. The RateLimit middleware never calls it for sandbox principals: the sandbox has no ceiling.
// Implementations must be safe for concurrent use; a distributed one (a shared counter in Redis, say)
// plugs in here.
type Limiter interface {
	// Allow reports whether p may make one request at now; when it may not, retryAfter is how long
	// until it may. An error means the limiter itself failed.
	Allow(ctx context.Context, p Principal, now time.Time) (ok bool, retryAfter time.Duration, err error)
}

// DefaultMaxLicensees bounds how many licensees' buckets a TokenBucket keeps.
const DefaultMaxLicensees = 10_000

// TokenBucketOptions tune a TokenBucket. A nil *TokenBucketOptions means the defaults.
type TokenBucketOptions struct {
	// MaxLicensees bounds the buckets kept; the least recently used is dropped beyond it. Zero means
	// DefaultMaxLicensees. A dropped bucket comes back full, so keep the bound above the number of
	// licensees active within a bucket's refill time.
	MaxLicensees int
	// Limits, when set, chooses the rate and burst per principal (a licensee's plan, say); it is
	// called once when a licensee's bucket is created. A burst below 1 is raised to 1.
	Limits func(p Principal) (perSecond float64, burst int)
}

// TokenBucket is a Limiter with one token bucket per licensee and environment, kept in a bounded LRU map. It is safe for concurrent use. Build one with
// NewTokenBucket; the zero value is not usable.
type TokenBucket struct {
	limit  float64
	burst  int
	limits func(Principal) (float64, int)
	max    int

	mu      sync.Mutex
	buckets map[string]*list.Element // scope → element of lru holding a *bucket
	lru     list.List                // front = most recently used
}

type bucket struct {
	scope string
	rate  float64 // tokens per second; +Inf admits everything, 0 never refills
	burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time // when tokens was last brought up to date; zero until first use
}

// take refills the bucket up to now and takes one token. When none is there it reports how long until
// one is; a refused request takes nothing, so refusals never push the next admission further out.
// A clock that steps backwards refills nothing.
func (b *bucket) take(now time.Time) (bool, time.Duration) {
	if math.IsInf(b.rate, 1) {
		return true, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() {
		b.tokens, b.last = b.burst, now
	} else if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(b.burst, b.tokens+elapsed.Seconds()*b.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	if b.rate <= 0 {
		return false, time.Hour // never refills: tell the client to stop for a long while
	}
	wait := time.Duration(math.Ceil((1 - b.tokens) / b.rate * float64(time.Second)))
	return false, max(wait, time.Nanosecond)
}

var _ Limiter = (*TokenBucket)(nil)

// NewTokenBucket returns a TokenBucket that lets each licensee make perSecond requests per second on
// average and up to burst at once; math.Inf(1) admits everything. It panics when burst is below 1,
// since such a bucket refuses everything, or when perSecond is negative or NaN.
func NewTokenBucket(perSecond float64, burst int, opts *TokenBucketOptions) *TokenBucket {
	if burst < 1 {
		panic("sandbox: NewTokenBucket needs a burst of at least 1")
	}
	if !(perSecond >= 0) {
		panic("sandbox: NewTokenBucket needs a rate of zero or more")
	}
	tb := &TokenBucket{limit: perSecond, burst: burst, max: DefaultMaxLicensees, buckets: make(map[string]*list.Element)}
	if opts != nil {
		if opts.MaxLicensees > 0 {
			tb.max = opts.MaxLicensees
		}
		tb.limits = opts.Limits
	}
	return tb
}

// Allow implements Limiter.
func (tb *TokenBucket) Allow(ctx context.Context, p Principal, now time.Time) (bool, time.Duration, error) {
	ok, wait := tb.bucket(p).take(now)
	return ok, wait, nil
}

func (tb *TokenBucket) bucket(p Principal) *bucket {
	scope := p.Scope()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if el, ok := tb.buckets[scope]; ok {
		tb.lru.MoveToFront(el)
		return el.Value.(*bucket)
	}
	r, b := tb.limit, tb.burst
	if tb.limits != nil {
		r, b = tb.limits(p)
		b = max(b, 1)
		if !(r >= 0) {
			r = 0 // a negative or NaN rate from the hook refills nothing rather than admitting all
		}
	}
	bk := &bucket{scope: scope, rate: r, burst: float64(b)}
	tb.buckets[scope] = tb.lru.PushFront(bk)
	for tb.lru.Len() > tb.max {
		old := tb.lru.Back()
		tb.lru.Remove(old)
		delete(tb.buckets, old.Value.(*bucket).scope)
	}
	return bk
}

// Len returns the number of buckets kept.
func (tb *TokenBucket) Len() int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.lru.Len()
}

// RateLimitOptions tune a RateLimit. A nil *RateLimitOptions means the defaults.
type RateLimitOptions struct {
	// Now is the clock passed to the Limiter; nil means time.Now.
	Now func() time.Time
	// Problems writes the problem responses (its TypeBase and Logger). Fields left empty come from the
	// Writer apierror.Writer.Handler put in the request's context, else apierror's defaults.
	Problems apierror.Writer
	// Logger records limiter failures; nil logs nothing.
	Logger *slog.Logger
	// FailClosed answers 503 when the Limiter fails. By default the request goes through: a rate limit
	// protects capacity, and an outage of the limiter should not become an outage of the API.
	FailClosed bool
}

// ErrRateLimited: the principal is over its production rate limit.
var ErrRateLimited = errors.New("sandbox: rate limited")

// RateLimit is the rate-limit middleware. It must run after the Authenticator: the environment of the
// request's principal decides, and in the sandbox no ceiling applies at all (the Limiter is not even
// consulted, so a sandbox load test measures the build, not a throttle). Production requests over the
// limit get a 429 problem with Retry-After. A request without a principal is a wiring mistake and gets
// an opaque 500.
//
// A RateLimit is safe for concurrent use. Build one with NewRateLimit; the zero value is not usable.
type RateLimit struct {
	limiter    Limiter
	now        func() time.Time
	writer     apierror.Writer
	log        *slog.Logger
	failClosed bool
}

// NewRateLimit returns middleware that limits production requests with l. A nil l limits nothing.
func NewRateLimit(l Limiter, opts *RateLimitOptions) *RateLimit {
	rl := &RateLimit{limiter: l, now: time.Now}
	if opts != nil {
		if opts.Now != nil {
			rl.now = opts.Now
		}
		rl.writer, rl.log, rl.failClosed = opts.Problems, opts.Logger, opts.FailClosed
	}
	return rl
}

// Check is the middleware's decision without HTTP: nil when r may proceed, otherwise an error that
// wraps the condition (ErrRateLimited, ErrNoPrincipal, or the limiter's failure) and the
// *apierror.Error to answer with.
func (rl *RateLimit) Check(r *http.Request) error {
	p, ok := FromContext(r.Context())
	if !ok {
		return &problemError{cause: ErrNoPrincipal, problem: apierror.Internal()}
	}
	if p.Environment == Sandbox || rl.limiter == nil {
		return nil
	}
	allowed, retry, err := rl.limiter.Allow(r.Context(), p, rl.now())
	if err != nil {
		if rl.log != nil {
			rl.log.ErrorContext(r.Context(), "sandbox: rate limiter failed", "licensee", p.Licensee,
				"fail_closed", rl.failClosed, "error", err)
		}
		if !rl.failClosed {
			return nil
		}
		return &problemError{cause: err, problem: apierror.Unavailable(time.Second, "rate_limiter_unavailable",
			"the rate limiter could not be consulted; retry after the number of seconds in Retry-After")}
	}
	if !allowed {
		return &problemError{cause: ErrRateLimited, problem: apierror.RateLimited(retry, "")}
	}
	return nil
}

// Handler returns middleware that applies Check before next runs.
func (rl *RateLimit) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := rl.Check(r); err != nil {
			if rl.log != nil && errors.Is(err, ErrNoPrincipal) {
				rl.log.ErrorContext(r.Context(), "sandbox: RateLimit ran without an authenticated principal; put it after the Authenticator")
			}
			rl.writer.Write(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}
