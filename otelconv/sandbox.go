package otelconv

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcplatform/conventions/sandbox"
)

// Attribute keys of the sandbox metrics.
const (
	attrEnvironment = attribute.Key("svc.sandbox.environment")
	attrAuthResult  = attribute.Key("svc.sandbox.auth.result")
	attrLimitResult = attribute.Key("svc.sandbox.rate_limit.result")
)

// numEnvironments indexes the attribute tables: 0 is no environment (the attribute is left out),
// 1 the sandbox, 2 production.
const numEnvironments = 3

func environmentIndex(e sandbox.Environment) int {
	switch e {
	case sandbox.Sandbox:
		return 1
	case sandbox.Live:
		return 2
	}
	return 0
}

// environmentAttrs are the attributes of environment index i.
func environmentAttrs(i int) []attribute.KeyValue {
	switch i {
	case 1:
		return []attribute.KeyValue{attrEnvironment.String(string(sandbox.Sandbox))}
	case 2:
		return []attribute.KeyValue{attrEnvironment.String(string(sandbox.Live))}
	}
	return nil
}

// sandboxObserver implements sandbox.Observer with three instruments and one attribute set per
// result and environment, built once. It is safe for concurrent use; recording allocates nothing
// unless Options.LicenseeAttribute is set.
type sandboxObserver struct {
	auths    metric.Int64Counter
	authTime metric.Float64Histogram
	limits   metric.Int64Counter

	authSets  [sandbox.NumAuthResults][numEnvironments]attribute.Set
	authAdd   [sandbox.NumAuthResults][numEnvironments][]metric.AddOption
	authRec   [sandbox.NumAuthResults][numEnvironments][]metric.RecordOption
	limitSets [sandbox.NumLimitResults][numEnvironments]attribute.Set
	limitAdd  [sandbox.NumLimitResults][numEnvironments][]metric.AddOption
	licensee  bool
}

var _ sandbox.Observer = (*sandboxObserver)(nil)

func (t *Telemetry) buildSandbox() error {
	o := &sandboxObserver{licensee: t.opts.LicenseeAttribute}
	var err error
	if o.auths, err = t.meter.Int64Counter("svc.sandbox.authentications", metric.WithUnit("{authentication}"),
		metric.WithDescription("API key authentications, by result and the environment the key names.")); err != nil {
		return err
	}
	if o.authTime, err = t.meter.Float64Histogram("svc.sandbox.authentication.duration", metric.WithUnit("s"),
		metric.WithDescription("Time an authentication took, the credential lookup included."),
		metric.WithExplicitBucketBoundaries(fastBuckets...)); err != nil {
		return err
	}
	if o.limits, err = t.meter.Int64Counter("svc.sandbox.rate_limit.checks", metric.WithUnit("{request}"),
		metric.WithDescription("Rate-limit decisions, by result and the environment of the request's principal; refused is a 429.")); err != nil {
		return err
	}
	for r := range sandbox.NumAuthResults {
		for e := range numEnvironments {
			set := attribute.NewSet(append(environmentAttrs(e), attrAuthResult.String(sandbox.AuthResult(r).String()))...)
			o.authSets[r][e] = set
			o.authAdd[r][e] = []metric.AddOption{metric.WithAttributeSet(set)}
			o.authRec[r][e] = []metric.RecordOption{metric.WithAttributeSet(set)}
		}
	}
	for r := range sandbox.NumLimitResults {
		for e := range numEnvironments {
			set := attribute.NewSet(append(environmentAttrs(e), attrLimitResult.String(sandbox.LimitResult(r).String()))...)
			o.limitSets[r][e] = set
			o.limitAdd[r][e] = []metric.AddOption{metric.WithAttributeSet(set)}
		}
	}
	t.sandbox = o
	return nil
}

// Sandbox returns the observer to set as sandbox.AuthOptions.Observer and
// sandbox.RateLimitOptions.Observer; nil for a nil Telemetry.
func (t *Telemetry) Sandbox() sandbox.Observer {
	if t == nil || t.sandbox == nil {
		return nil
	}
	return t.sandbox
}

// Authenticated implements sandbox.Observer. The request's span, when one is recording, gets the
// result and the environment as attributes.
func (o *sandboxObserver) Authenticated(ctx context.Context, a sandbox.AuthObservation) {
	r, e := int(a.Result), environmentIndex(a.Environment)
	if r >= sandbox.NumAuthResults {
		return // not a value the Authenticator reports
	}
	if o.licensee && a.Licensee != "" {
		o.auths.Add(ctx, 1, metric.WithAttributeSet(withLicensee(o.authSets[r][e], a.Licensee)))
	} else {
		o.auths.Add(ctx, 1, o.authAdd[r][e]...)
	}
	o.authTime.Record(ctx, a.Duration.Seconds(), o.authRec[r][e]...)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(o.authSets[r][e].ToSlice()...)
	}
}

// LimitChecked implements sandbox.Observer.
func (o *sandboxObserver) LimitChecked(ctx context.Context, l sandbox.LimitObservation) {
	r, e := int(l.Result), environmentIndex(l.Environment)
	if r >= sandbox.NumLimitResults {
		return // not a value the RateLimit reports
	}
	if o.licensee && l.Licensee != "" {
		o.limits.Add(ctx, 1, metric.WithAttributeSet(withLicensee(o.limitSets[r][e], l.Licensee)))
	} else {
		o.limits.Add(ctx, 1, o.limitAdd[r][e]...)
	}
	if l.Result == sandbox.LimitRefused {
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.AddEvent("svc.sandbox.rate_limited", trace.WithAttributes(o.limitSets[r][e].ToSlice()...))
		}
	}
}

// withLicensee returns set with the licensee added: one allocation per measurement, the price of the
// opt-in.
func withLicensee(set attribute.Set, licensee string) attribute.Set {
	return attribute.NewSet(append(set.ToSlice(), attrLicensee.String(licensee))...)
}
