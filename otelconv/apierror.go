package otelconv

import (
	"context"
	"sync"
	"sync/atomic"

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

// apierrorObserver implements apierror.Observer with one counter. It is safe for concurrent use;
// recording allocates nothing once a kind of problem has been seen.
type apierrorObserver struct {
	problems metric.Int64Counter
	kinds    *boundedSets[problemKind, []metric.AddOption]
	overflow *boundedSets[int, []metric.AddOption] // by status, past maxProblemKinds
}

var _ apierror.Observer = (*apierrorObserver)(nil)

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

// APIError returns the observer to set as apierror.Writer.Observer, on the Writer the service installs
// with Writer.Handler; nil for a nil Telemetry.
func (t *Telemetry) APIError() apierror.Observer {
	if t == nil || t.apierror == nil {
		return nil
	}
	return t.apierror
}

// ProblemWritten implements apierror.Observer. Besides the counter, it adds an event
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

// boundedSets maps up to max distinct keys to values built once per key (attribute options, mostly),
// so that recording a measurement looks a value up instead of building attributes. Reads take no
// lock: the map is replaced, never changed, when a key is added. It is safe for concurrent use.
type boundedSets[K comparable, V any] struct {
	max   int
	build func(K) V
	other V

	mu sync.Mutex // serializes additions
	m  atomic.Pointer[map[K]V]
}

// newBoundedSets returns a boundedSets whose keys past max share the value built for overflow.
func newBoundedSets[K comparable, V any](max int, overflow K, build func(K) V) *boundedSets[K, V] {
	b := &boundedSets[K, V]{max: max, build: build, other: build(overflow)}
	m := make(map[K]V)
	b.m.Store(&m)
	return b
}

// get returns k's value, built on first use, and true; past the bound, the overflow value and false.
func (b *boundedSets[K, V]) get(k K) (V, bool) {
	if v, ok := (*b.m.Load())[k]; ok {
		return v, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := *b.m.Load()
	if v, ok := cur[k]; ok {
		return v, true
	}
	if len(cur) >= b.max {
		return b.other, false
	}
	next := make(map[K]V, len(cur)+1)
	for kk, vv := range cur {
		next[kk] = vv
	}
	v := b.build(k)
	next[k] = v
	b.m.Store(&next)
	return v, true
}
