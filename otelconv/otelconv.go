package otelconv

import (
	"errors"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// errNotBuilt is what a nil or zero Telemetry's methods that can fail return.
var errNotBuilt = errors.New("otelconv: Telemetry not built: use New")

// ScopeName is the instrumentation scope of every meter and tracer otelconv creates.
const ScopeName = "github.com/svcplatform/conventions/otelconv"

// Options configures a Telemetry. The zero value reports to the global MeterProvider and
// TracerProvider (otel.GetMeterProvider, otel.GetTracerProvider), propagates W3C Trace Context, and
// records no attribute of unbounded cardinality.
type Options struct {
	// MeterProvider creates the instruments; nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider creates the spans; nil means otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Propagator reads and writes trace context on deliveries and range requests; nil means W3C
	// Trace Context (traceparent, tracestate).
	Propagator propagation.TextMapPropagator
	// LicenseeAttribute records the licensee (svc.licensee) on the versioning, apikey and ratelimit
	// metrics. A service with many licensees makes as many series of each; off by default.
	LicenseeAttribute bool
	// EndpointAttribute records webhook endpoint IDs as the attribute svc.webhook.endpoint.id on the
	// producer's and the consumer's metrics and spans (and event IDs on the producer's spans): one
	// series per endpoint, so only for a bounded number of endpoints. Off, the backlog gauges report
	// the maximum and the total.
	EndpointAttribute bool
	// EventTypes is the catalogue of the service's webhook event types ("order.created", …): the
	// values svc.webhook.events.appended names. Any other type is counted as _OTHER of its licensee
	// class (svc.sandbox.environment: sandbox, live, or none without an authenticated principal in
	// the publishing context), so a sandbox key triggering hundreds of made-up types mints no series
	// and never pushes a live type out. Nil learns the types as they come, up to 256 per class.
	EventTypes []string
}

// Telemetry holds the instruments of every package's observer, created once by New. It is safe for
// concurrent use. The zero value observes nothing: its hook accessors return nil (no hooks) and its
// providers are nil. Build one with New.
type Telemetry struct {
	meter      metric.Meter
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	opts       Options

	// One observer per package, each with its instruments, built by New. Each lives in the file
	// named for its package.
	idempotency   *idempotencyObserver
	consumer      *consumerObserver
	consumerHooks *webhook.Hooks
	producer      *producerObserver
	// producerHooks are producer's methods as the hooks Producer returns.
	producerHooks *producer.Hooks
	versioning    *versioningObserver
	apikey        *apikeyObserver
	rateLimit     *rateLimitObserver
	apierror      *apierrorObserver
	http          *httpObserver
}

// New creates every instrument once. It returns an error when the MeterProvider refuses one.
func New(opts *Options) (*Telemetry, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	mp, tp, prop := o.MeterProvider, o.TracerProvider, o.Propagator
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	o.MeterProvider, o.TracerProvider, o.Propagator = mp, tp, prop
	t := &Telemetry{
		meter:      mp.Meter(ScopeName),
		tracer:     tp.Tracer(ScopeName),
		propagator: prop,
		opts:       o,
	}
	for _, build := range []func() error{
		t.buildIdempotency, t.buildConsumer, t.buildProducer, t.buildVersioning, t.buildAPIKey, t.buildRateLimit,
		t.buildAPIError,
		t.buildHTTP,
	} {
		if err := build(); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Bucket boundaries, in seconds. Store calls and signature checks are sub-millisecond on a healthy
// system, deliveries and handlers take milliseconds to seconds.
var (
	fastBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
	slowBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30}
)

// MeterProvider returns the provider t reports metrics to, for the team's other instrumentation
// (otelhttp.WithMeterProvider) to report next to it.
func (t *Telemetry) MeterProvider() metric.MeterProvider {
	if t == nil {
		return nil
	}
	return t.opts.MeterProvider
}

// TracerProvider returns the provider t makes spans with, for the team's other instrumentation.
func (t *Telemetry) TracerProvider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.opts.TracerProvider
}

// Propagator returns the propagator t reads and writes trace context with.
func (t *Telemetry) Propagator() propagation.TextMapPropagator {
	if t == nil {
		return nil
	}
	return t.propagator
}
