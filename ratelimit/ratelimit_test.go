package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/internal/syncbuf"
)

func TestTokenBucket(t *testing.T) {
	clk := newClock()
	ctx := context.Background()
	tb := must(NewTokenBucket(2, 3, nil)) // 2 requests/s, burst 3
	a := apikey.Principal{Licensee: "lic_a", Environment: apikey.Live}
	b := apikey.Principal{Licensee: "lic_b", Environment: apikey.Live}

	for i := range 3 {
		ok, _, err := tb.Allow(ctx, a.Scope(), clk.Now())
		require.NoError(t, err)
		require.True(t, ok, "burst request %d", i)
	}
	ok, retry, err := tb.Allow(ctx, a.Scope(), clk.Now())
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, 500*time.Millisecond, retry, "one token every 500ms")

	ok, _, _ = tb.Allow(ctx, b.Scope(), clk.Now())
	require.True(t, ok, "licensees have their own buckets")

	// Refused requests must not consume: after exactly retry, one request goes through.
	for range 5 {
		ok, _, _ = tb.Allow(ctx, a.Scope(), clk.Now())
		require.False(t, ok)
	}
	clk.Advance(retry)
	ok, _, _ = tb.Allow(ctx, a.Scope(), clk.Now())
	require.True(t, ok)
	ok, _, _ = tb.Allow(ctx, a.Scope(), clk.Now())
	require.False(t, ok)
}

func TestTokenBucketBoundsItsMemory(t *testing.T) {
	clk := newClock()
	tb := must(NewTokenBucket(1, 1, &TokenBucketOptions{MaxKeys: 4}))
	for i := range 100 {
		ok, _, err := tb.Allow(context.Background(), apikey.Principal{Licensee: fmt.Sprint("lic_", i), Environment: apikey.Live}.Scope(), clk.Now())
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.Equal(t, 4, tb.Len())

	// The most recently used licensee keeps its (empty) bucket while others come and go.
	hot := apikey.Principal{Licensee: "lic_hot", Environment: apikey.Live}
	ok, _, _ := tb.Allow(context.Background(), hot.Scope(), clk.Now())
	require.True(t, ok)
	for i := range 10 {
		ok, _, _ = tb.Allow(context.Background(), hot.Scope(), clk.Now())
		require.False(t, ok, "hot licensee must stay limited (%d)", i)
		_, _, _ = tb.Allow(context.Background(), apikey.Principal{Licensee: fmt.Sprint("lic_cold", i), Environment: apikey.Live}.Scope(), clk.Now())
	}
}

func TestTokenBucketPerPrincipalLimits(t *testing.T) {
	clk := newClock()
	tb := must(NewTokenBucket(1, 1, &TokenBucketOptions{Limits: func(key string) (float64, int) {
		if key == "live:lic_big" {
			return 100, 10
		}
		return 1, 0 // raised to 1
	}}))
	count := func(p apikey.Principal) int {
		n := 0
		for range 50 {
			if ok, _, _ := tb.Allow(context.Background(), p.Scope(), clk.Now()); ok {
				n++
			}
		}
		return n
	}
	require.Equal(t, 10, count(apikey.Principal{Licensee: "lic_big", Environment: apikey.Live}))
	require.Equal(t, 1, count(apikey.Principal{Licensee: "lic_small", Environment: apikey.Live}))
	_, err := NewTokenBucket(1, 0, nil)
	require.ErrorContains(t, err, "burst of at least 1")
}

func TestMiddleware429(t *testing.T) {
	clk := newClock()
	iss := must(apikey.NewIssuer(nil, &apikey.IssuerOptions{Now: clk.Now}))
	h := must(apikey.NewAuthenticator(iss, nil)).Handler(must(New(must(NewTokenBucket(0.25, 2, nil)), apikey.RateLimitKey, &Options{Now: clk.Now})).Handler(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })))
	live := issue(t, iss, "lic_a", apikey.Live).APIKey
	otherLicensee := issue(t, iss, "lic_b", apikey.Live).APIKey

	codes := make([]int, 0, 4)
	var last *httptest.ResponseRecorder
	for range 4 {
		last = do(t, h, http.MethodGet, "/v1/orders", live)
		codes = append(codes, last.Code)
	}
	require.Equal(t, []int{200, 200, 429, 429}, codes)
	requireConforms(t, last)
	require.Equal(t, apierror.CodeRateLimited, problem(t, last).Code)
	require.Equal(t, "4", last.Header().Get("Retry-After"), "a token every 4 s")
	require.Equal(t, http.StatusOK, do(t, h, http.MethodGet, "/v1/orders", otherLicensee).Code)

	retry, err := strconv.Atoi(last.Header().Get("Retry-After"))
	require.NoError(t, err)
	clk.Advance(time.Duration(retry) * time.Second)
	require.Equal(t, http.StatusOK, do(t, h, http.MethodGet, "/v1/orders", live).Code, "Retry-After is honest")
}

// failingLimiter fails every call.
type failingLimiter struct{}

func (failingLimiter) Allow(context.Context, string, time.Time) (bool, time.Duration, error) {
	return false, 0, errors.New("limiter down")
}

func TestMiddlewareFailures(t *testing.T) {
	live := apikey.Principal{Licensee: "lic_a", Environment: apikey.Live}
	req := func(p *apikey.Principal) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
		if p != nil {
			r = r.WithContext(apikey.NewContext(r.Context(), *p))
		}
		return r
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	serve := func(rl *Middleware, r *http.Request) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		rl.Handler(ok).ServeHTTP(rec, r)
		return rec
	}
	logger, logs := syncbuf.Logger()
	key := apikey.RateLimitKey
	tests := []struct {
		name string
		rl   *Middleware
		p    *apikey.Principal
		code int
	}{
		{"fails open by default", must(New(failingLimiter{}, key, &Options{Logger: logger})), &live, http.StatusOK},
		{"fails closed when told", must(New(failingLimiter{}, key, &Options{FailClosed: true})), &live, http.StatusServiceUnavailable},
		{"the zero Middleware refuses to guess", &Middleware{}, &live, http.StatusInternalServerError},
		{"no principal is a wiring mistake", must(New(must(NewTokenBucket(1, 1, nil)), key, &Options{Logger: logger})), nil, http.StatusInternalServerError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(tc.rl, req(tc.p))
			require.Equal(t, tc.code, rec.Code)
			if tc.code == http.StatusServiceUnavailable {
				require.Equal(t, "1", rec.Header().Get("Retry-After"))
			}
		})
	}
	require.Contains(t, logs.String(), "limiter down")
	require.Contains(t, logs.String(), "no authenticated principal")
	require.Contains(t, logs.String(), "put the rate limit after the middleware that identifies the caller")

	_, err := New(nil, key, nil)
	require.ErrorContains(t, err, "needs a Limiter", "a limit that limits nothing is a configuration error")
	_, _, err = (&TokenBucket{}).Allow(context.Background(), "k", time.Now())
	require.ErrorIs(t, err, ErrNotBuilt)
}

// A team with its own authentication limits by its own key: no apikey.Principal anywhere.
func TestMiddlewareByATeamsOwnKey(t *testing.T) {
	clk := newClock()
	type userKey struct{}
	// The team's authentication middleware put the user in the context; the API token header stands
	// in for it here.
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u := r.Header.Get("X-Test-User"); u != "" {
				r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
			}
			next.ServeHTTP(w, r)
		})
	}
	key := func(r *http.Request) (string, error) {
		u, ok := r.Context().Value(userKey{}).(string)
		switch {
		case !ok:
			return "", apierror.Unauthenticated("user_missing", "send X-Test-User")
		case u == "admin":
			return "", nil // not limited
		}
		return "user:" + u, nil
	}
	rl := must(New(must(NewTokenBucket(1, 2, nil)), key, &Options{Now: clk.Now}))
	h := apierror.WithRequestID(auth(rl.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))))
	codes := func(user string, n int) []int {
		var out []int
		for range n {
			r := httptest.NewRequest(http.MethodGet, "/v1/things", nil)
			if user != "" {
				r.Header.Set("X-Test-User", user)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			out = append(out, rec.Code)
		}
		return out
	}
	require.Equal(t, []int{200, 200, 429, 429}, codes("ann", 4), "burst 2, then limited")
	require.Equal(t, []int{200, 200, 429}, codes("bob", 3), "each key its own bucket")
	require.Equal(t, []int{200, 200, 200, 200, 200}, codes("admin", 5), "an empty key is not limited")
	require.Equal(t, []int{401}, codes("", 1), "the key's own problem is written as it is")
	clk.Advance(time.Second)
	require.Equal(t, []int{200, 429}, codes("ann", 2))
}

func TestTokenBucketEdgeRates(t *testing.T) {
	clk := newClock()
	ctx := context.Background()
	p := apikey.Principal{Licensee: "lic_a", Environment: apikey.Live}

	unlimited := must(NewTokenBucket(math.Inf(1), 1, nil))
	for range 1000 {
		ok, _, _ := unlimited.Allow(ctx, p.Scope(), clk.Now())
		require.True(t, ok)
	}

	never := must(NewTokenBucket(0, 2, nil))
	for range 2 {
		ok, _, _ := never.Allow(ctx, p.Scope(), clk.Now())
		require.True(t, ok)
	}
	clk.Advance(24 * time.Hour)
	ok, retry, _ := never.Allow(ctx, p.Scope(), clk.Now())
	require.False(t, ok, "a zero rate never refills")
	require.Positive(t, retry)

	// A clock that steps backwards refills nothing and takes nothing extra.
	back := must(NewTokenBucket(1, 1, nil))
	ok, _, _ = back.Allow(ctx, p.Scope(), clk.Now())
	require.True(t, ok)
	ok, _, _ = back.Allow(ctx, p.Scope(), clk.Now().Add(-time.Hour))
	require.False(t, ok)
	ok, _, _ = back.Allow(ctx, p.Scope(), clk.Now().Add(time.Second))
	require.True(t, ok, "one second after the last take, one token is back")

	// Fractional rates round Retry-After up, never down to zero.
	slow := must(NewTokenBucket(3, 1, nil))
	_, _, _ = slow.Allow(ctx, p.Scope(), clk.Now())
	ok, retry, _ = slow.Allow(ctx, p.Scope(), clk.Now())
	require.False(t, ok)
	require.Equal(t, time.Duration(333333334), retry)

	for _, rate := range []float64{-1, math.NaN()} {
		_, err := NewTokenBucket(rate, 1, nil)
		require.ErrorContains(t, err, "rate of zero or more")
	}
	_, err := NewTokenBucket(1, 1, &TokenBucketOptions{MaxKeys: -1})
	require.ErrorContains(t, err, "MaxKeys -1 is negative")
}

// Concurrent callers on one bucket never get more than the burst plus what the elapsed time refills.
func TestTokenBucketConcurrentAdmissionsAreExact(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tb := must(NewTokenBucket(10, 50, nil))
	p := apikey.Principal{Licensee: "lic_a", Environment: apikey.Live}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 100 {
				if ok, _, _ := tb.Allow(context.Background(), p.Scope(), now); ok {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 50, admitted.Load())
}
