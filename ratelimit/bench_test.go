package ratelimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svcplatform/conventions/apikey"
)

// Check with the principal-keyed key function: a sandbox principal never reaches the Limiter, a live one
// does.
func BenchmarkCheck(b *testing.B) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	rl := must(New(must(NewTokenBucket(1e9, 1e9, nil)), apikey.RateLimitKey, &Options{Now: func() time.Time { return now }}))
	for _, env := range []apikey.Environment{apikey.Sandbox, apikey.Live} {
		b.Run(string(env), func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
			r = r.WithContext(apikey.NewContext(r.Context(), apikey.Principal{Licensee: "lic_a", Environment: env}))
			b.ReportAllocs()
			for b.Loop() {
				if err := rl.Check(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkTokenBucketManyLicensees(b *testing.B) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	tb := must(NewTokenBucket(1e9, 1e9, &TokenBucketOptions{MaxKeys: 1000}))
	ps := make([]apikey.Principal, 4096) // more than the bound: evictions on the way
	for i := range ps {
		ps[i] = apikey.Principal{Licensee: "lic_" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)), Environment: apikey.Live}
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, _, err := tb.Allow(ctx, ps[i%len(ps)].Scope(), now); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
