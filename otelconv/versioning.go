package otelconv

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcplatform/conventions/versioning"
)

// Attribute keys of the versioning metrics.
const (
	attrVersion           = attribute.Key("svc.versioning.version")
	attrLifecycle         = attribute.Key("svc.versioning.lifecycle")
	attrVersioningOutcome = attribute.Key("svc.versioning.outcome")
	// attrLicensee is recorded only with Options.LicenseeAttribute.
	attrLicensee = attribute.Key("svc.licensee")
)

// unknownVersion is the value of svc.versioning.version for a path that names no answering version:
// one fixed value, whatever the client wrote.
const unknownVersion = "unknown"

// maxVersions bounds the distinct version names the observer keeps attribute sets for. The router
// reports registered versions only, so this is far above any real registry; names beyond it are
// counted as otherValue.
const maxVersions = 64

// otherValue stands for any value past a bound, as in OpenTelemetry's semantic conventions.
const otherValue = "_OTHER"

// The sizes of the tables indexed by versioning's enums: one more than the largest value this
// version knows. TestVersioningEnumTables fails when versioning grows a value; until the tables grow
// with it, a value past them is recorded as otherValue (each table has a last entry for it), never
// out of range.
const (
	numLifecycles         = int(versioning.LifecycleUnknown) + 1
	numVersioningOutcomes = int(versioning.OutcomeError) + 1
)

// lifecycleName is the svc.versioning.lifecycle of a table index.
func lifecycleName(l int) string {
	if l >= numLifecycles {
		return otherValue
	}
	return versioning.Lifecycle(l).String()
}

// versioningOutcomeName is the svc.versioning.outcome of a table index.
func versioningOutcomeName(oc int) string {
	if oc >= numVersioningOutcomes {
		return otherValue
	}
	return versioning.Outcome(oc).String()
}

// versionSets are the precomputed attribute options of one version name.
type versionSets struct {
	requests [numLifecycles + 1][numVersioningOutcomes + 1][]metric.AddOption
	pin      []metric.AddOption
}

// versioningObserver fills versioning.Hooks with three instruments. It is safe for concurrent use;
// recording allocates nothing unless Options.LicenseeAttribute is set.
type versioningObserver struct {
	requests  metric.Int64Counter
	duration  metric.Float64Histogram
	pins      metric.Int64Counter
	byOutcome [numVersioningOutcomes + 1][]metric.RecordOption
	sets      *boundedSets[string, *versionSets]
	licensee  bool
	// hooks are the observer's method as the hooks Versioning returns, built once.
	hooks *versioning.Hooks
}

func (t *Telemetry) buildVersioning() error {
	o := &versioningObserver{licensee: t.opts.LicenseeAttribute}
	var err error
	if o.requests, err = t.meter.Int64Counter("svc.versioning.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests the versioning router decided, by version, lifecycle state and outcome.")); err != nil {
		return err
	}
	if o.duration, err = t.meter.Float64Histogram("svc.versioning.decision.duration", metric.WithUnit("s"),
		metric.WithDescription("Time the versioning router took to decide a request, pin store reads and writes included."),
		metric.WithExplicitBucketBoundaries(fastBuckets...)); err != nil {
		return err
	}
	if o.pins, err = t.meter.Int64Counter("svc.versioning.pin.changes", metric.WithUnit("{pin}"),
		metric.WithDescription("Licensee pins created on first use or moved off a lapsed version, by the version pinned.")); err != nil {
		return err
	}
	for i := 1; i < len(o.byOutcome); i++ { // 0 is no outcome, which the router never reports
		o.byOutcome[i] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrVersioningOutcome.String(versioningOutcomeName(i))))}
	}
	o.sets = newBoundedSets(maxVersions, otherValue, newVersionSets)
	o.hooks = &versioning.Hooks{Decided: o.Decided}
	t.versioning = o
	return nil
}

func newVersionSets(name string) *versionSets {
	vs := &versionSets{pin: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrVersion.String(name)))}}
	for l := range len(vs.requests) {
		for oc := 1; oc < len(vs.requests[l]); oc++ {
			vs.requests[l][oc] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
				attrVersion.String(name),
				attrLifecycle.String(lifecycleName(l)),
				attrVersioningOutcome.String(versioningOutcomeName(oc)),
			))}
		}
	}
	return vs
}

// Versioning returns the hooks of package versioning, for versioning.Options.Hooks. They record
// svc.versioning.requests, svc.versioning.decision.duration and svc.versioning.pin.changes, and
// annotate the request's span.
//
// On a nil or zero Telemetry it returns nil: no hooks.
func (t *Telemetry) Versioning() *versioning.Hooks {
	if t == nil || t.versioning == nil {
		return nil
	}
	return t.versioning.hooks
}

// Decided is versioning.Hooks.Decided.
func (o *versioningObserver) Decided(ctx context.Context, ob versioning.Observation) {
	if ob.Outcome == 0 {
		return // no outcome, which the router never reports
	}
	name := ob.Version
	if name == "" || ob.Lifecycle == versioning.LifecycleUnknown {
		name = unknownVersion
	}
	vs, ok := o.sets.get(name)
	if !ok {
		name = otherValue
	}
	// A value past the tables (versioning grew one this version does not know) takes their last
	// entry, otherValue's.
	l, oc := min(int(ob.Lifecycle), numLifecycles), min(int(ob.Outcome), numVersioningOutcomes)
	if o.licensee && ob.Licensee != "" {
		o.requests.Add(ctx, 1, metric.WithAttributes(attrVersion.String(name),
			attrLifecycle.String(lifecycleName(l)), attrVersioningOutcome.String(versioningOutcomeName(oc)),
			attrLicensee.String(ob.Licensee)))
	} else {
		o.requests.Add(ctx, 1, vs.requests[l][oc]...)
	}
	o.duration.Record(ctx, ob.Duration.Seconds(), o.byOutcome[oc]...)
	if ob.PinChanged && ob.Pinned != "" {
		// The new pin is a registered version: the same bound applies.
		ps, _ := o.sets.get(ob.Pinned)
		o.pins.Add(ctx, 1, ps.pin...)
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrVersion.String(name), attrVersioningOutcome.String(ob.Outcome.String()))
	}
}
