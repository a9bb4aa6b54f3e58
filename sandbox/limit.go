package sandbox

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/svcplatform/conventions/apierror"
)

// Limiter is the rate-limit hook: it decides whether the caller a key names may make one more request
// at now. Keys come from RateLimitOptions.Key — by default the sandbox principal's licensee and
// environment, and never at all for a sandbox principal, since the sandbox has no ceiling — so a
// Limiter knows nothing of how callers are authenticated. Implementations must be safe for concurrent
// use; a distributed one (a shared counter in Redis, say) plugs in here.
type Limiter interface {
	// Allow reports whether the caller named key may make one request at now; when it may not,
	// retryAfter is how long until it may. An error means the limiter itself failed.
	Allow(ctx context.Context, key string, now time.Time) (ok bool, retryAfter time.Duration, err error)
}

// DefaultMaxKeys bounds how many keys' buckets a TokenBucket keeps.
const DefaultMaxKeys = 10_000

// TokenBucketOptions tune a TokenBucket. A nil *TokenBucketOptions and the zero value mean the
// defaults.
type TokenBucketOptions struct {
	// MaxKeys bounds the buckets kept; the least recently used is dropped beyond it. Zero means
	// DefaultMaxKeys; negative is an error. A dropped bucket comes back full, so keep the bound above
	// the number of keys active within a bucket's refill time.
	MaxKeys int
	// Limits, when set, chooses the rate and burst per key (a licensee's plan, say); it is called once
	// when a key's bucket is created. A burst below 1 is raised to 1; a negative or NaN rate refills
	// nothing.
	Limits func(key string) (perSecond float64, burst int)
}

// TokenBucket is a Limiter with one token bucket per key, kept in a bounded LRU map. It is safe for
// concurrent use. Build one with NewTokenBucket; the zero value is not usable: its Allow returns
// ErrNotBuilt (and its Len is 0).
type TokenBucket struct {
	limit  float64
	burst  int
	limits func(string) (float64, int)
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

// NewTokenBucket returns a TokenBucket that lets each key make perSecond requests per second on
// average and up to burst at once; math.Inf(1) admits everything. A burst below 1 (such a bucket
// refuses everything), a negative or NaN perSecond, and a negative MaxKeys are errors.
func NewTokenBucket(perSecond float64, burst int, opts *TokenBucketOptions) (*TokenBucket, error) {
	if burst < 1 {
		return nil, fmt.Errorf("sandbox: NewTokenBucket needs a burst of at least 1, not %d", burst)
	}
	if !(perSecond >= 0) {
		return nil, fmt.Errorf("sandbox: NewTokenBucket needs a rate of zero or more, not %v", perSecond)
	}
	tb := &TokenBucket{limit: perSecond, burst: burst, max: DefaultMaxKeys, buckets: make(map[string]*list.Element)}
	if opts != nil {
		if opts.MaxKeys < 0 {
			return nil, fmt.Errorf("sandbox: NewTokenBucket: MaxKeys %d is negative", opts.MaxKeys)
		}
		if opts.MaxKeys > 0 {
			tb.max = opts.MaxKeys
		}
		tb.limits = opts.Limits
	}
	return tb, nil
}

// Allow implements Limiter.
func (tb *TokenBucket) Allow(ctx context.Context, key string, now time.Time) (bool, time.Duration, error) {
	if tb == nil || tb.buckets == nil {
		return false, 0, errZeroTokenBucket
	}
	ok, wait := tb.bucket(key).take(now)
	return ok, wait, nil
}

func (tb *TokenBucket) bucket(scope string) *bucket {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if el, ok := tb.buckets[scope]; ok {
		tb.lru.MoveToFront(el)
		return el.Value.(*bucket)
	}
	r, b := tb.limit, tb.burst
	if tb.limits != nil {
		r, b = tb.limits(scope)
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
	if tb == nil {
		return 0
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.lru.Len()
}

// KeyFunc names the caller a request is limited as: the key its Limiter counts by. An empty key means
// the request is not limited at all. An error is written as the response: an *apierror.Error (a 401,
// say) as it is, anything else as the opaque 500. The zero (nil) KeyFunc in RateLimitOptions.Key
// means PrincipalKey.
type KeyFunc func(r *http.Request) (key string, err error)

// PrincipalKey is the default KeyFunc: the sandbox principal's licensee and environment
// (Principal.Scope), and no limit for a sandbox principal — the sandbox has no ceiling. A request
// without a principal is a wiring mistake (RateLimit before the Authenticator): ErrNoPrincipal.
func PrincipalKey(r *http.Request) (string, error) {
	p, ok := FromContext(r.Context())
	if !ok {
		return "", ErrNoPrincipal
	}
	if p.Environment == Sandbox {
		return "", nil
	}
	return p.Scope(), nil
}

// RateLimitOptions tune a RateLimit. A nil *RateLimitOptions and the zero value mean the defaults.
type RateLimitOptions struct {
	// Key names the caller each request is limited as; nil means PrincipalKey. A team with its own
	// authentication gives its own: the user or account ID its middleware put in the context.
	Key KeyFunc
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
	// Observer, when set, is told the result of every check, with the environment and licensee of
	// the request's principal (never the key counted by); nil calls nothing, at no cost.
	Observer Observer
}

// ErrRateLimited: the principal is over its production rate limit.
var ErrRateLimited = errors.New("sandbox: rate limited")

// RateLimit is the rate-limit middleware: requests over the Limiter's limit for their key get a 429
// problem with Retry-After. With the default Key it must run after the Authenticator: the environment
// of the request's principal decides, and in the sandbox no ceiling applies at all (the Limiter is not
// even consulted, so a sandbox load test measures the build, not a throttle); a request without a
// principal is a wiring mistake and gets an opaque 500.
//
// A RateLimit is safe for concurrent use. Build one with NewRateLimit; the zero value is not usable:
// its Check returns ErrNotBuilt and its Handler answers the opaque 500.
type RateLimit struct {
	limiter    Limiter
	key        KeyFunc
	now        func() time.Time
	writer     apierror.Writer
	log        *slog.Logger
	failClosed bool
	observer   Observer
}

// NewRateLimit returns middleware that limits requests with l, by the key Options.Key gives each; a
// nil l is an error (a limit that limits nothing would be a silent no-op).
func NewRateLimit(l Limiter, opts *RateLimitOptions) (*RateLimit, error) {
	if l == nil {
		return nil, errors.New("sandbox: NewRateLimit needs a Limiter")
	}
	rl := &RateLimit{limiter: l, key: PrincipalKey, now: time.Now}
	if opts != nil {
		if opts.Key != nil {
			rl.key = opts.Key
		}
		if opts.Now != nil {
			rl.now = opts.Now
		}
		rl.writer, rl.log, rl.failClosed, rl.observer = opts.Problems, opts.Logger, opts.FailClosed, opts.Observer
	}
	return rl, nil
}

// Check is the middleware's decision without HTTP: nil when r may proceed, otherwise an error that
// wraps the condition (ErrRateLimited, ErrNoPrincipal or the Key's error, or the limiter's failure)
// and the *apierror.Error to answer with.
func (rl *RateLimit) Check(r *http.Request) error {
	if rl == nil || rl.limiter == nil {
		return &problemError{cause: errZeroRateLimit, problem: apierror.Internal()}
	}
	res, retry, err := rl.check(r)
	if o := rl.observer; o != nil {
		ctx := r.Context()
		p, _ := FromContext(ctx)
		o.LimitChecked(ctx, LimitObservation{Result: res, Environment: p.Environment, Licensee: p.Licensee, RetryAfter: retry})
	}
	return err
}

// check is Check with the result and the wait for the Observer.
func (rl *RateLimit) check(r *http.Request) (LimitResult, time.Duration, error) {
	key, err := rl.key(r)
	if err != nil {
		var p *apierror.Error
		if errors.As(err, &p) {
			return LimitNoKey, 0, err
		}
		return LimitNoKey, 0, &problemError{cause: err, problem: apierror.Internal()}
	}
	if key == "" {
		return LimitExempt, 0, nil
	}
	allowed, retry, err := rl.limiter.Allow(r.Context(), key, rl.now())
	if err != nil {
		if rl.log != nil {
			rl.log.ErrorContext(r.Context(), "sandbox: rate limiter failed", "key", key,
				"fail_closed", rl.failClosed, "error", err)
		}
		if !rl.failClosed {
			return LimitFailedOpen, 0, nil
		}
		return LimitFailedClosed, 0, &problemError{cause: err, problem: apierror.Unavailable(time.Second, "rate_limiter_unavailable",
			"the rate limiter could not be consulted; retry after the number of seconds in Retry-After")}
	}
	if !allowed {
		return LimitRefused, retry, &problemError{cause: ErrRateLimited, problem: apierror.RateLimited(retry, "")}
	}
	return LimitAllowed, 0, nil
}

// Handler returns middleware that applies Check before next runs.
func (rl *RateLimit) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := rl.Check(r); err != nil {
			if rl.log != nil {
				switch {
				case errors.Is(err, ErrNoPrincipal):
					rl.log.ErrorContext(r.Context(), "sandbox: RateLimit ran without an authenticated principal; put it after the Authenticator")
				case errors.Is(err, errZeroRateLimit):
					rl.log.ErrorContext(r.Context(), err.Error())
				case !errors.Is(err, ErrRateLimited):
					rl.log.ErrorContext(r.Context(), "sandbox: rate limit refused the request", "error", err)
				}
			}
			rl.writer.Write(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}
