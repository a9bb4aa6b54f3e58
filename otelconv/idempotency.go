package otelconv

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

// Attribute keys of the idempotency instruments.
const (
	keyIdemOutcome   = attribute.Key("svc.idempotency.outcome")
	keyIdemOperation = attribute.Key("svc.idempotency.store.operation")
	keyIdemBackend   = attribute.Key("svc.idempotency.store.backend")
	keyIdemRenewal   = attribute.Key("svc.idempotency.renewal.result")
)

// The error.type values of a store call: the library's conditions by name, a deadline, or any other
// failure.
const (
	storeErrNone = iota
	storeErrLeaseLost
	storeErrQuota
	storeErrFull
	storeErrTimeout
	storeErrOther
	storeErrKinds
)

var storeErrNames = [storeErrKinds]string{"", "lease_lost", "quota_exceeded", "store_full", "timeout", "store_error"}

func storeErrKind(err error) int {
	switch {
	case err == nil:
		return storeErrNone
	case errors.Is(err, idempotency.ErrLeaseLost):
		return storeErrLeaseLost
	case errors.Is(err, idempotency.ErrQuotaExceeded):
		return storeErrQuota
	case errors.Is(err, memstore.ErrStoreFull):
		return storeErrFull
	case errors.Is(err, context.DeadlineExceeded):
		return storeErrTimeout
	}
	return storeErrOther
}

// maxBackends bounds the backends told apart: a store that names itself per instance would otherwise
// make a series per instance. Past it, a backend is counted as "custom".
const maxBackends = 16

// The sizes of the tables indexed by idempotency's enums: one more than the largest value this
// version knows. TestIdempotencyEnumTables fails when idempotency grows a value; until the tables
// grow with it, a value past them is recorded as otherValue (each table has a last entry for it),
// never out of range.
const (
	numStoreOps     = int(idempotency.OpRenew) + 1
	numIdemOutcomes = int(idempotency.OutcomeReleased) + 1
)

// storeOpName is the svc.idempotency.store.operation of a table index.
func storeOpName(op int) string {
	if op >= numStoreOps {
		return otherValue
	}
	return idempotency.StoreOp(op).String()
}

// storeOpts are the precomputed record options of one backend, by operation and error kind.
type storeOpts [numStoreOps + 1][storeErrKinds][]metric.RecordOption

// idempotencyObserver fills idempotency.Hooks. Its instruments and attribute sets are made once, by
// buildIdempotency; it is safe for concurrent use.
type idempotencyObserver struct {
	// hooks are the observer's methods as the Hooks Idempotency returns, built once.
	hooks idempotency.Hooks

	tracer   trace.Tracer
	requests metric.Int64Counter
	store    metric.Float64Histogram
	handler  metric.Float64Histogram
	renewals metric.Int64Counter

	outcomeOpts [numIdemOutcomes + 1][]metric.AddOption
	renewOpts   [3][]metric.AddOption            // ok, lease_lost, error
	backends    *boundedSets[string, *storeOpts] // built on a backend's first call

	handlerStatus [600][]metric.RecordOption // by status code; 0 for codes outside 100–599
	handlerPanic  []metric.RecordOption
}

func (t *Telemetry) buildIdempotency() error {
	o := &idempotencyObserver{tracer: t.tracer, backends: newBoundedSets(maxBackends, "custom", buildStoreOpts)}
	var err, e error
	o.requests, e = t.meter.Int64Counter("svc.idempotency.requests",
		metric.WithUnit("{request}"),
		metric.WithDescription("Requests governed by the idempotency middleware, by outcome."))
	err = errors.Join(err, e)
	o.store, e = t.meter.Float64Histogram("svc.idempotency.store.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of idempotency store calls, by operation and backend."),
		metric.WithExplicitBucketBoundaries(fastBuckets...))
	err = errors.Join(err, e)
	o.handler, e = t.meter.Float64Histogram("svc.idempotency.handler.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of the handlers the idempotency middleware ran, by status."),
		metric.WithExplicitBucketBoundaries(slowBuckets...))
	err = errors.Join(err, e)
	o.renewals, e = t.meter.Int64Counter("svc.idempotency.renewals",
		metric.WithUnit("{renewal}"),
		metric.WithDescription("Lease renewals of in-flight requests, by result."))
	err = errors.Join(err, e)
	if err != nil {
		return err
	}
	for oc := 1; oc < numIdemOutcomes; oc++ { // 0 is no outcome, which the Hooks are never told
		o.outcomeOpts[oc] = addOpts(keyIdemOutcome.String(idempotency.Outcome(oc).String()))
	}
	o.outcomeOpts[numIdemOutcomes] = addOpts(keyIdemOutcome.String(otherValue))
	for i, r := range [3]string{"ok", "lease_lost", "error"} {
		o.renewOpts[i] = addOpts(keyIdemRenewal.String(r))
	}
	o.handlerStatus[0] = recordOpts(semconv.HTTPResponseStatusCode(0))
	for code := 100; code < len(o.handlerStatus); code++ {
		o.handlerStatus[code] = recordOpts(semconv.HTTPResponseStatusCode(code))
	}
	o.handlerPanic = recordOpts(semconv.HTTPResponseStatusCode(500), semconv.ErrorTypeKey.String("panic"))
	o.hooks = idempotency.Hooks{StoreStart: o.StoreStart, StoreEnd: o.StoreEnd, HandlerStart: o.HandlerStart,
		HandlerEnd: o.HandlerEnd, Outcome: o.Outcome}
	t.idempotency = o
	return nil
}

func buildStoreOpts(backend string) *storeOpts {
	s := new(storeOpts)
	for op := 1; op < len(s); op++ { // 0 is no operation, which the Hooks are never told
		for kind := range storeErrKinds {
			attrs := []attribute.KeyValue{keyIdemOperation.String(storeOpName(op)), keyIdemBackend.String(backend)}
			if kind != storeErrNone {
				attrs = append(attrs, semconv.ErrorTypeKey.String(storeErrNames[kind]))
			}
			s[op][kind] = recordOpts(attrs...)
		}
	}
	return s
}

func addOpts(attrs ...attribute.KeyValue) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
}

func recordOpts(attrs ...attribute.KeyValue) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
}

// Idempotency returns the hooks to set in idempotency.Options.Hooks.
//
// Metrics: svc.idempotency.requests, svc.idempotency.store.duration,
// svc.idempotency.handler.duration and svc.idempotency.renewals (see the package documentation).
// Spans: idempotency.claim, idempotency.handler, idempotency.complete and idempotency.release, as
// children of the request's span, made only while that span is recording (the server's
// instrumentation, otelhttp or the team's own, decides what is traced); the outcome is set on the
// request's span as svc.idempotency.outcome.
//
// On a nil or zero Telemetry it returns nil: no hooks.
func (t *Telemetry) Idempotency() *idempotency.Hooks {
	if t == nil || t.idempotency == nil {
		return nil
	}
	return &t.idempotency.hooks
}

var storeSpanNames = [numStoreOps]string{"", "idempotency.claim", "idempotency.complete", "idempotency.release", "idempotency.renew"}

// StoreStart is idempotency.Hooks.StoreStart: a span per claim, completion and release, as a child
// of the request's span while that span is recording.
func (o *idempotencyObserver) StoreStart(ctx context.Context, call idempotency.StoreCall) context.Context {
	if call.Op == 0 || call.Op == idempotency.OpRenew || int(call.Op) >= numStoreOps || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	ctx, _ = o.tracer.Start(ctx, storeSpanNames[call.Op], trace.WithAttributes(keyIdemBackend.String(call.Backend)))
	return ctx
}

// StoreEnd is idempotency.Hooks.StoreEnd: it records the call's duration (and a renewal's result)
// and ends StoreStart's span.
func (o *idempotencyObserver) StoreEnd(ctx context.Context, call idempotency.StoreCall, took time.Duration, err error) {
	if call.Op == 0 {
		return
	}
	// An operation past the table (idempotency grew one this version does not know) takes its last
	// entry, otherValue's.
	op := min(int(call.Op), numStoreOps)
	kind := storeErrKind(err)
	opts, _ := o.backends.get(call.Backend) // past maxBackends, custom's
	o.store.Record(ctx, took.Seconds(), opts[op][kind]...)
	if call.Op == idempotency.OpRenew {
		i := 0
		switch kind {
		case storeErrNone:
		case storeErrLeaseLost:
			i = 1
		default:
			i = 2
		}
		o.renewals.Add(ctx, 1, o.renewOpts[i]...)
		return
	}
	if op == numStoreOps {
		return // StoreStart began no span for it
	}
	// A recording span here is the one StoreStart began: it began one exactly when the request's
	// span was recording.
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		if kind != storeErrNone {
			span.SetAttributes(semconv.ErrorTypeKey.String(storeErrNames[kind]))
			if kind != storeErrLeaseLost {
				span.SetStatus(codes.Error, storeErrNames[kind])
			}
		}
		span.End()
	}
}

// HandlerStart is idempotency.Hooks.HandlerStart: the idempotency.handler span.
func (o *idempotencyObserver) HandlerStart(ctx context.Context) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	ctx, _ = o.tracer.Start(ctx, "idempotency.handler")
	return ctx
}

// HandlerEnd is idempotency.Hooks.HandlerEnd: it records the handler's duration by status and ends
// its span.
func (o *idempotencyObserver) HandlerEnd(ctx context.Context, status int, took time.Duration, panicked bool) {
	opts := o.handlerPanic
	if !panicked {
		opts = o.statusOpts(status)
	}
	o.handler.Record(ctx, took.Seconds(), opts...)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		if panicked {
			span.SetStatus(codes.Error, "handler panicked")
		}
		span.End()
	}
}

// statusOpts returns the record options of a status code; codes outside 100–599 share one set, so
// a handler cannot make the series unbounded.
func (o *idempotencyObserver) statusOpts(status int) []metric.RecordOption {
	if status < 100 || status >= len(o.handlerStatus) {
		status = 0
	}
	return o.handlerStatus[status]
}

// Outcome is idempotency.Hooks.Outcome: it counts the request and sets svc.idempotency.outcome on the
// request's span.
func (o *idempotencyObserver) Outcome(ctx context.Context, outcome idempotency.Outcome) {
	if outcome == 0 {
		return
	}
	// An outcome past the table (idempotency grew one this version does not know) takes its last
	// entry, otherValue's.
	o.requests.Add(ctx, 1, o.outcomeOpts[min(int(outcome), numIdemOutcomes)]...)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(keyIdemOutcome.String(outcome.String()))
	}
}
