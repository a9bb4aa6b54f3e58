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

// numLimitOutcomes sizes the tables of rateLimitObserver: one more than the largest ratelimit.Outcome
// this version knows. TestLimitOutcomesKnown fails when ratelimit grows an outcome, so that it is
// added here and in the documented values of svc.ratelimit.result. An outcome past it (a newer
// ratelimit under this otelconv) is counted at index numLimitOutcomes, as otherValue.
const numLimitOutcomes = int(ratelimit.OutcomeFailedClosed) + 1

// rateLimitObserver fills ratelimit.Hooks with one instrument and one attribute set per outcome and
// environment, built once. The environment and licensee are the request's principal's
// (apikey.FromContext), absent without one. It is safe for concurrent use; recording allocates
// nothing unless Options.LicenseeAttribute is set.
type rateLimitObserver struct {
	limits metric.Int64Counter
	// The attribute sets by outcome (the last index for an outcome this version does not know) and
	// environment index.
	limitSets [numLimitOutcomes + 1][numEnvironments]attribute.Set
	limitAdd  [numLimitOutcomes + 1][numEnvironments][]metric.AddOption
	licensee  bool
	// hooks are the observer's method as the hooks RateLimit returns, built once.
	hooks *ratelimit.Hooks
}

func (t *Telemetry) buildRateLimit() error {
	o := &rateLimitObserver{licensee: t.opts.LicenseeAttribute}
	var err error
	if o.limits, err = t.meter.Int64Counter("svc.ratelimit.checks", metric.WithUnit("{request}"),
		metric.WithDescription("Rate-limit decisions, by result and the environment of the request's principal; refused is a 429.")); err != nil {
		return err
	}
	for r := 1; r <= numLimitOutcomes; r++ {
		result := otherValue
		if r < numLimitOutcomes {
			result = ratelimit.Outcome(r).String()
		}
		for e := range numEnvironments {
			set := attribute.NewSet(append(environmentAttrs(e), attrLimitResult.String(result))...)
			o.limitSets[r][e] = set
			o.limitAdd[r][e] = []metric.AddOption{metric.WithAttributeSet(set)}
		}
	}
	o.hooks = &ratelimit.Hooks{Checked: o.Checked}
	t.rateLimit = o
	return nil
}

// RateLimit returns the hooks of package ratelimit, for ratelimit.Options.Hooks. They record
// svc.ratelimit.checks, and add an event to the request's span for a refusal.
//
// On a nil or zero Telemetry it returns nil: no hooks.
func (t *Telemetry) RateLimit() *ratelimit.Hooks {
	if t == nil || t.rateLimit == nil {
		return nil
	}
	return t.rateLimit.hooks
}

// Checked is ratelimit.Hooks.Checked. A refusal adds an event to the request's span, when one is
// recording.
func (o *rateLimitObserver) Checked(ctx context.Context, l ratelimit.Observation) {
	r := int(l.Outcome)
	switch {
	case r == 0:
		return // no outcome: not a value the Middleware reports
	case r >= numLimitOutcomes:
		r = numLimitOutcomes // an outcome newer than this otelconv: otherValue
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
