package otelconv

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcplatform/conventions/apierror"
)

// Attribute keys of the apierror metrics.
const (
	attrStatus = attribute.Key("http.response.status_code")
	attrCode   = attribute.Key("svc.apierror.code")
	attrType   = attribute.Key("svc.apierror.type")
	attrOpaque = attribute.Key("svc.apierror.opaque")
)

// maxProblemKinds bounds the distinct (status, code, type) combinations the observer keeps attribute
// sets for. Codes are chosen by the library and the service, never by a client, so a service has a
// few dozen; past the bound the code is counted as otherValue, with its status and nothing else (and
// a cardinality leak shows up as such instead of as a memory leak).
const maxProblemKinds = 512

// problemKind is one combination of a problem's bounded attributes.
type problemKind struct {
	status int
	code   string
	typ    string
	opaque bool
}

// apierrorObserver fills apierror.Hooks with one counter. It is safe for concurrent use; recording
// allocates nothing once a kind of problem has been seen.
type apierrorObserver struct {
	problems metric.Int64Counter
	kinds    *boundedSets[problemKind, []metric.AddOption]
	overflow *boundedSets[int, []metric.AddOption] // by status, past maxProblemKinds
	// hooks are the observer's methods as the hooks APIError returns, built once.
	hooks *apierror.Hooks
}

func (t *Telemetry) buildAPIError() error {
	o := &apierrorObserver{}
	var err error
	if o.problems, err = t.meter.Int64Counter("svc.apierror.problems", metric.WithUnit("{problem}"),
		metric.WithDescription("Problem responses (RFC 9457) written, by status and code.")); err != nil {
		return err
	}
	o.kinds = newBoundedSets(maxProblemKinds, problemKind{code: otherValue}, problemOptions)
	o.overflow = newBoundedSets(600, 0, func(status int) []metric.AddOption {
		return problemOptions(problemKind{status: status, code: otherValue})
	})
	o.hooks = &apierror.Hooks{ProblemWritten: o.ProblemWritten}
	t.apierror = o
	return nil
}

// problemOptions builds the attribute options of one kind of problem.
func problemOptions(k problemKind) []metric.AddOption {
	kvs := []attribute.KeyValue{attrCode.String(k.code)}
	if k.status != 0 {
		kvs = append(kvs, attrStatus.Int(k.status))
	}
	if k.typ != "" {
		kvs = append(kvs, attrType.String(k.typ))
	}
	if k.opaque {
		kvs = append(kvs, attrOpaque.Bool(true))
	}
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kvs...))}
}

// APIError returns the hooks of package apierror, for apierror.Writer.Hooks on the Writer the service
// installs with Writer.Handler. They record svc.apierror.problems.
//
// On a nil or zero Telemetry it returns nil: no hooks.
func (t *Telemetry) APIError() *apierror.Hooks {
	if t == nil || t.apierror == nil {
		return nil
	}
	return t.apierror.hooks
}

// ProblemWritten is apierror.Hooks.ProblemWritten. Besides the counter, it adds an event
// "svc.apierror.problem" with the status and code to the request's span, when one is recording.
func (o *apierrorObserver) ProblemWritten(ctx context.Context, p apierror.WrittenProblem) {
	opts, ok := o.kinds.get(problemKind{status: p.Status, code: p.Code, typ: p.Type, opaque: p.Opaque})
	if !ok {
		opts, _ = o.overflow.get(p.Status)
	}
	o.problems.Add(ctx, 1, opts...)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("svc.apierror.problem", trace.WithAttributes(attrStatus.Int(p.Status), attrCode.String(p.Code)))
	}
}
