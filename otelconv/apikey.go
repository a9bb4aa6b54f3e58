package otelconv

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcplatform/conventions/apikey"
)

// Attribute keys of the API key metrics. The environment keeps its svc.sandbox. name: it is the
// sandbox-or-production class every metric that has one is split by, the webhook producer's too.
const (
	attrEnvironment = attribute.Key("svc.sandbox.environment")
	attrAuthResult  = attribute.Key("svc.apikey.auth.result")
)

// numEnvironments indexes the attribute tables: 0 is no environment (the attribute is left out),
// 1 the sandbox, 2 production.
const numEnvironments = 3

func environmentIndex(e apikey.Environment) int {
	switch e {
	case apikey.Sandbox:
		return 1
	case apikey.Live:
		return 2
	}
	return 0
}

// environmentAttrs are the attributes of environment index i.
func environmentAttrs(i int) []attribute.KeyValue {
	switch i {
	case 1:
		return []attribute.KeyValue{attrEnvironment.String(string(apikey.Sandbox))}
	case 2:
		return []attribute.KeyValue{attrEnvironment.String(string(apikey.Live))}
	}
	return nil
}

// numAuthOutcomes sizes the tables of apikeyObserver: one more than the largest apikey.Outcome this
// version knows. TestAuthOutcomesKnown fails when apikey grows an outcome, so that it is added here
// and in the documented values of svc.apikey.auth.result. An outcome past it (a newer apikey under
// this otelconv) is counted at index numAuthOutcomes, as otherValue.
const numAuthOutcomes = int(apikey.OutcomeEnvironmentMismatch) + 1

// apikeyObserver fills apikey.Hooks with two instruments and one attribute set per outcome and
// environment, built once. It is safe for concurrent use; recording allocates nothing unless
// Options.LicenseeAttribute is set.
type apikeyObserver struct {
	auths    metric.Int64Counter
	authTime metric.Float64Histogram

	// The attribute sets by outcome (the last index for an outcome this version does not know) and
	// environment index.
	authSets [numAuthOutcomes + 1][numEnvironments]attribute.Set
	authAdd  [numAuthOutcomes + 1][numEnvironments][]metric.AddOption
	authRec  [numAuthOutcomes + 1][numEnvironments][]metric.RecordOption
	licensee bool
	// hooks are the observer's method as the hooks APIKey returns, built once.
	hooks *apikey.Hooks
}

func (t *Telemetry) buildAPIKey() error {
	o := &apikeyObserver{licensee: t.opts.LicenseeAttribute}
	var err error
	if o.auths, err = t.meter.Int64Counter("svc.apikey.authentications", metric.WithUnit("{authentication}"),
		metric.WithDescription("API key authentications, by result and the environment the key names.")); err != nil {
		return err
	}
	if o.authTime, err = t.meter.Float64Histogram("svc.apikey.authentication.duration", metric.WithUnit("s"),
		metric.WithDescription("Time an authentication took, the credential lookup included."),
		metric.WithExplicitBucketBoundaries(fastBuckets...)); err != nil {
		return err
	}
	for r := 1; r <= numAuthOutcomes; r++ {
		result := otherValue
		if r < numAuthOutcomes {
			result = apikey.Outcome(r).String()
		}
		for e := range numEnvironments {
			set := attribute.NewSet(append(environmentAttrs(e), attrAuthResult.String(result))...)
			o.authSets[r][e] = set
			o.authAdd[r][e] = []metric.AddOption{metric.WithAttributeSet(set)}
			o.authRec[r][e] = []metric.RecordOption{metric.WithAttributeSet(set)}
		}
	}
	o.hooks = &apikey.Hooks{Authenticated: o.Authenticated}
	t.apikey = o
	return nil
}

// APIKey returns the hooks of package apikey, for apikey.AuthenticatorOptions.Hooks. They record
// svc.apikey.authentications and svc.apikey.authentication.duration, and annotate the request's
// span.
//
// On a nil or zero Telemetry it returns nil: no hooks.
func (t *Telemetry) APIKey() *apikey.Hooks {
	if t == nil || t.apikey == nil {
		return nil
	}
	return t.apikey.hooks
}

// Authenticated is apikey.Hooks.Authenticated. The request's span, when one is recording, gets the
// result and the environment as attributes.
func (o *apikeyObserver) Authenticated(ctx context.Context, a apikey.Observation) {
	r, e := int(a.Outcome), environmentIndex(a.Environment)
	switch {
	case r == 0:
		return // no outcome: not a value the Authenticator reports
	case r >= numAuthOutcomes:
		r = numAuthOutcomes // an outcome newer than this otelconv: otherValue
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

// withLicensee returns set with the licensee added: one allocation per measurement, the price of the
// opt-in.
func withLicensee(set attribute.Set, licensee string) attribute.Set {
	return attribute.NewSet(append(set.ToSlice(), attrLicensee.String(licensee))...)
}
