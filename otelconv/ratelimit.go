package otelconv

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/ratelimit"
)

// attrLimitResult is the outcome of a rate-limit check.
const attrLimitResult = attribute.Key("svc.ratelimit.result")

// rateLimitObserver implements ratelimit.Observer with one instrument and one attribute set per
// outcome and environment, built once. The environment and licensee are the request's principal's
// (apikey.FromContext), absent without one. It is safe for concurrent use; recording allocates
// nothing unless Options.LicenseeAttribute is set.
type rateLimitObserver struct {
	limits    metric.Int64Counter
	limitSets [ratelimit.NumOutcomes][numEnvironments]attribute.Set
	limitAdd  [ratelimit.NumOutcomes][numEnvironments][]metric.AddOption
	licensee  bool
}

var _ ratelimit.Observer = (*rateLimitObserver)(nil)

func (t *Telemetry) buildRateLimit() error {
	o := &rateLimitObserver{licensee: t.opts.LicenseeAttribute}
	var err error
	if o.limits, err = t.meter.Int64Counter("svc.ratelimit.checks", metric.WithUnit("{request}"),
		metric.WithDescription("Rate-limit decisions, by result and the environment of the request's principal; refused is a 429.")); err != nil {
		return err
	}
	for r := ratelimit.Outcome(1); r < ratelimit.NumOutcomes; r++ {
		for e := range numEnvironments {
			set := attribute.NewSet(append(environmentAttrs(e), attrLimitResult.String(r.String()))...)
			o.limitSets[r][e] = set
			o.limitAdd[r][e] = []metric.AddOption{metric.WithAttributeSet(set)}
		}
	}
	t.rateLimit = o
	return nil
}

// RateLimit returns the observer to set as ratelimit.Options.Observer; nil for a nil Telemetry.
func (t *Telemetry) RateLimit() ratelimit.Observer {
	if t == nil || t.rateLimit == nil {
		return nil
	}
	return t.rateLimit
}

// Checked implements ratelimit.Observer. A refusal adds an event to the request's span, when one is
// recording.
func (o *rateLimitObserver) Checked(ctx context.Context, l ratelimit.Observation) {
	r := int(l.Outcome)
	if r <= 0 || r >= ratelimit.NumOutcomes {
		return // not a value the Middleware reports
	}
	p, _ := apikey.FromContext(ctx)
	e := environmentIndex(p.Environment)
	if o.licensee && p.Licensee != "" {
		o.limits.Add(ctx, 1, metric.WithAttributeSet(withLicensee(o.limitSets[r][e], p.Licensee)))
	} else {
		o.limits.Add(ctx, 1, o.limitAdd[r][e]...)
	}
	if l.Outcome == ratelimit.OutcomeRefused {
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.AddEvent("svc.ratelimit.refused", trace.WithAttributes(o.limitSets[r][e].ToSlice()...))
		}
	}
}
