package ratelimit

import (
	"container/list"
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// Limiter is the rate-limit hook: it decides whether the caller a key names may make one more request
// at now. Keys come from the Middleware's key function (apikey.RateLimitKey, or a team's own user or
// account ID), so a Limiter knows nothing of how callers are authenticated. Implementations must be
// safe for concurrent use; a distributed one (a shared counter in Redis, say) plugs in here.
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
	buckets map[string]*list.Element // key → element of lru holding a *bucket
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
		return nil, fmt.Errorf("ratelimit: NewTokenBucket needs a burst of at least 1, not %d", burst)
	}
	if !(perSecond >= 0) {
		return nil, fmt.Errorf("ratelimit: NewTokenBucket needs a rate of zero or more, not %v", perSecond)
	}
	tb := &TokenBucket{limit: perSecond, burst: burst, max: DefaultMaxKeys, buckets: make(map[string]*list.Element)}
	if opts != nil {
		if opts.MaxKeys < 0 {
			return nil, fmt.Errorf("ratelimit: NewTokenBucket: MaxKeys %d is negative", opts.MaxKeys)
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
