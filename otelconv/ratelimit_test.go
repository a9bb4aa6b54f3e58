package otelconv

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/ratelimit"
)

// BenchmarkRateLimitObserved is ratelimit.Middleware.Check of a production principal with no hooks
// and with otelconv's.
func BenchmarkRateLimitObserved(b *testing.B) {
	for _, observed := range []bool{false, true} {
		name := "nil"
		opts := &ratelimit.Options{Now: func() time.Time { return edgesNow }}
		if observed {
			name = "otel"
			opts.Hooks = newHarness(b, nil).tel.RateLimit()
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

// TestLimitOutcomesKnown: numLimitOutcomes is one more than the last ratelimit.Outcome. It fails
// when ratelimit grows an outcome: raise numLimitOutcomes, and add the value to svc.ratelimit.result
// in doc.go and README.md.
func TestLimitOutcomesKnown(t *testing.T) {
	for o := ratelimit.Outcome(1); int(o) < numLimitOutcomes; o++ {
		if s := o.String(); s == "" || s == "invalid" {
			t.Errorf("ratelimit.Outcome(%d) is %q: numLimitOutcomes is past the last outcome", o, s)
		}
	}
	if s := ratelimit.Outcome(numLimitOutcomes).String(); s != "invalid" {
		t.Errorf("ratelimit.Outcome(%d) is %q, which otelconv does not count: raise numLimitOutcomes", numLimitOutcomes, s)
	}
}

// TestLimitOutcomeUnknown: an outcome this otelconv does not know (a newer ratelimit's) is counted as
// _OTHER, with the principal's environment; the zero Outcome, which the Middleware never reports, is
// not counted. Neither panics.
func TestLimitOutcomeUnknown(t *testing.T) {
	h := newHarness(t, nil)
	hooks := h.tel.RateLimit()
	ctx := apikey.NewContext(context.Background(), apikey.Principal{Licensee: "lic_a", Environment: apikey.Live})
	for _, o := range []ratelimit.Outcome{ratelimit.Outcome(numLimitOutcomes), ratelimit.Outcome(numLimitOutcomes + 1), 255} {
		hooks.Checked(ctx, ratelimit.Observation{Outcome: o})
	}
	hooks.Checked(ctx, ratelimit.Observation{})
	other := []attribute.KeyValue{attrLimitResult.String(otherValue), attrEnvironment.String(string(apikey.Live))}
	if got := h.sum(t, "svc.ratelimit.checks", other...); got != 3 {
		t.Errorf("checks as %s = %d, want 3", otherValue, got)
	}
	if got := h.sum(t, "svc.ratelimit.checks"); got != 3 {
		t.Errorf("checks = %d, want 3", got)
	}
}
