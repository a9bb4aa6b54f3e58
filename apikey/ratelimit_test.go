package apikey

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/ratelimit"
)

func TestRateLimitKey(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
	_, err := RateLimitKey(r)
	require.ErrorIs(t, err, ErrNoPrincipal, "a rate limit in front of the Authenticator is a wiring mistake")
	with := func(p Principal) *http.Request { return r.WithContext(NewContext(r.Context(), p)) }
	k, err := RateLimitKey(with(Principal{Licensee: "lic_a", Environment: Sandbox}))
	require.NoError(t, err)
	require.Empty(t, k, "the sandbox has no rate ceiling")
	k, err = RateLimitKey(with(Principal{Licensee: "lic_a", Environment: Live}))
	require.NoError(t, err)
	require.Equal(t, "live:lic_a", k, "production is limited per licensee")
}

// countingLimiter wraps a Limiter and counts its calls.
type countingLimiter struct {
	ratelimit.Limiter
	calls atomic.Int64
}

func (c *countingLimiter) Allow(ctx context.Context, key string, now time.Time) (bool, time.Duration, error) {
	c.calls.Add(1)
	return c.Limiter.Allow(ctx, key, now)
}

// The sandbox has no rate ceiling: with the clock frozen, 20,000 requests arrive "in the same
// instant" through a limiter of 1 request per second, and not one is throttled — while the very same
// middleware throttles a production key after its single token.
func TestSandboxHasNoRateCeiling(t *testing.T) {
	clk := newClock()
	iss := must(NewIssuer(nil, &IssuerOptions{Now: clk.Now}))
	lim := &countingLimiter{Limiter: must(ratelimit.NewTokenBucket(1, 1, nil))}
	var served atomic.Int64
	h := must(NewAuthenticator(iss, nil)).Handler(must(ratelimit.New(lim, RateLimitKey, &ratelimit.Options{Now: clk.Now})).Handler(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served.Add(1)
			w.WriteHeader(http.StatusCreated)
		})))
	sandboxKey := issue(t, iss, "lic_a", Sandbox).APIKey
	liveKey := issue(t, iss, "lic_a", Live).APIKey

	const requests, workers = 20_000, 16
	var throttled, other atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < requests; i += workers {
				r := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
				r.Header.Set("Authorization", "Bearer "+sandboxKey)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				switch rec.Code {
				case http.StatusCreated:
				case http.StatusTooManyRequests:
					throttled.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, throttled.Load(), "sandbox requests throttled")
	require.Zero(t, other.Load())
	require.Equal(t, int64(requests), served.Load())
	require.Zero(t, lim.calls.Load(), "the limiter is not even consulted in the sandbox")

	// The same build, the same instant, a production key: one token, then 429.
	rec := do(t, h, http.MethodPost, "/v1/orders", liveKey, "")
	require.Equal(t, http.StatusCreated, rec.Code)
	rec = do(t, h, http.MethodPost, "/v1/orders", liveKey, "")
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, int64(2), lim.calls.Load())
}
