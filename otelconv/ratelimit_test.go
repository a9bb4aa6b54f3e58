package otelconv

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/ratelimit"
)

// BenchmarkRateLimitObserved is ratelimit.Middleware.Check of a production principal with no
// observer and with the otelconv observer.
func BenchmarkRateLimitObserved(b *testing.B) {
	for _, observed := range []bool{false, true} {
		name := "nil"
		opts := &ratelimit.Options{Now: func() time.Time { return edgesNow }}
		if observed {
			name = "otel"
			opts.Observer = newHarness(b, nil).tel.RateLimit()
		}
		b.Run(name, func(b *testing.B) {
			bucket, _ := ratelimit.NewTokenBucket(1e9, 1e9, nil)
			rl, _ := ratelimit.New(bucket, apikey.RateLimitKey, opts)
			r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
			r = r.WithContext(apikey.NewContext(r.Context(), apikey.Principal{Licensee: "lic_a", Environment: apikey.Live}))
			b.ReportAllocs()
			for b.Loop() {
				if err := rl.Check(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
