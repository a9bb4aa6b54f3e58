package main

import (
	"context"
	"fmt"
	"io"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/svcplatform/conventions/otelconv"
)

// telemetry is the demo's OpenTelemetry: the order server and the consumer report to one in-memory
// reader, which the report reads at the end — the figures a Prometheus scrape of -metrics-addr
// would show.
type telemetry struct {
	tel    *otelconv.Telemetry
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newTelemetry(tp trace.TracerProvider) (*telemetry, error) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	tel, err := otelconv.New(&otelconv.Options{MeterProvider: mp, TracerProvider: tp})
	if err != nil {
		return nil, err
	}
	return &telemetry{tel: tel, reader: reader, mp: mp}, nil
}

// figures are what the metrics say about a run.
type figures struct {
	Executed, Replayed, InUse       int64 // svc.idempotency.requests by outcome
	EventsAppended                  int64 // svc.webhook.events.appended
	Delivered, Failed, Abandoned    int64 // svc.webhook.delivery.attempts by result
	SignaturesOK, SignaturesFailed  int64 // svc.webhook.verifications of deliveries
	Processed, Duplicates, Gaps     int64 // svc.webhook.sequence.decisions by outcome
	RangeFetches, RangeEvents       int64 // svc.webhook.range.fetches and .events
	Problems                        int64 // svc.apierror.problems
	Authentications, Authenticated  int64 // svc.apikey.authentications, all and ok
	VersionedRequests, VersionsGone int64 // svc.versioning.requests, all and sunset
}

// read collects the metrics at the end of a run and shuts the meter provider down.
func (t *telemetry) read(ctx context.Context) (figures, error) {
	f, err := t.collect(ctx)
	if err != nil {
		return f, err
	}
	return f, t.mp.Shutdown(ctx)
}

// collect collects the metrics as they stand.
func (t *telemetry) collect(ctx context.Context) (figures, error) {
	var rm metricdata.ResourceMetrics
	if err := t.reader.Collect(ctx, &rm); err != nil {
		return figures{}, err
	}
	// sum adds up the points of the counter name whose attributes hold every key, value pair of kv.
	sum := func(name string, kv ...string) int64 {
		var n int64
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				data, ok := m.Data.(metricdata.Sum[int64])
				if m.Name != name || !ok {
					continue
				}
			points:
				for _, p := range data.DataPoints {
					for i := 0; i+1 < len(kv); i += 2 {
						if v, ok := p.Attributes.Value(attribute.Key(kv[i])); !ok || v.AsString() != kv[i+1] {
							continue points
						}
					}
					n += p.Value
				}
			}
		}
		return n
	}
	const verifications = "svc.webhook.verifications"
	f := figures{
		Executed:          sum("svc.idempotency.requests", "svc.idempotency.outcome", "executed"),
		Replayed:          sum("svc.idempotency.requests", "svc.idempotency.outcome", "replayed"),
		InUse:             sum("svc.idempotency.requests", "svc.idempotency.outcome", "in_use"),
		EventsAppended:    sum("svc.webhook.events.appended"),
		Delivered:         sum("svc.webhook.delivery.attempts", "svc.webhook.delivery.result", "delivered"),
		Failed:            sum("svc.webhook.delivery.attempts", "svc.webhook.delivery.result", "failed"),
		Abandoned:         sum("svc.webhook.delivery.attempts", "svc.webhook.delivery.result", "abandoned"),
		SignaturesOK:      sum(verifications, "svc.webhook.verification.source", "delivery", "svc.webhook.verification.result", "ok"),
		Processed:         sum("svc.webhook.sequence.decisions", "svc.webhook.sequence.outcome", "processed"),
		Duplicates:        sum("svc.webhook.sequence.decisions", "svc.webhook.sequence.outcome", "duplicate"),
		Gaps:              sum("svc.webhook.sequence.decisions", "svc.webhook.sequence.outcome", "gap"),
		RangeFetches:      sum("svc.webhook.range.fetches"),
		RangeEvents:       sum("svc.webhook.range.events"),
		Problems:          sum("svc.apierror.problems"),
		Authentications:   sum("svc.apikey.authentications"),
		Authenticated:     sum("svc.apikey.authentications", "svc.apikey.auth.result", "ok"),
		VersionsGone:      sum("svc.versioning.requests", "svc.versioning.outcome", "sunset"),
		VersionedRequests: sum("svc.versioning.requests"),
	}
	// Deliveries' signatures only: range responses are verified too.
	f.SignaturesFailed = sum(verifications, "svc.webhook.verification.source", "delivery") - f.SignaturesOK
	return f, nil
}

// disagreements lists where the metrics and the report's own counters differ: each pair counts the
// same thing from two sides (the middleware's Stats and its Hooks, the consumer's counters and the
// Verifier's Observer), so any difference is a bug in one of them.
func (r report) disagreements() []string {
	m := r.Metrics
	var out []string
	check := func(what string, metric, counted int64) {
		if metric != counted {
			out = append(out, fmt.Sprintf("%s: metrics %d, report %d", what, metric, counted))
		}
	}
	check("replays", m.Replayed, int64(r.ReplaysServed))
	check("409s while the first ran", m.InUse, int64(r.Conflicts))
	// The orders' events, the test events of the health part, and the producer's own notices.
	check("events appended", m.EventsAppended, r.EventsEmitted+int64(r.Health.Triggered+len(r.Health.Notices)))
	check("deliveries rejected for their signature", m.SignaturesFailed, r.RejectedDeliveries)
	check("duplicate deliveries", m.Duplicates, r.DuplicateDeliveries)
	return out
}

func (r report) printMetrics(w io.Writer) {
	m := r.Metrics
	fmt.Fprintf(w, "  metrics (OpenTelemetry; what the server's -metrics-addr serves)\n")
	fmt.Fprintf(w, "    idempotency         executed %d, replayed %d, in use %d\n", m.Executed, m.Replayed, m.InUse)
	fmt.Fprintf(w, "    webhook deliveries  events appended %d; attempts delivered %d, failed and retried %d, abandoned %d\n",
		m.EventsAppended, m.Delivered, m.Failed, m.Abandoned)
	fmt.Fprintf(w, "    consumer            signatures ok %d, rejected %d; processed %d, duplicates %d, gaps %d (range fetches %d, %d events)\n",
		m.SignaturesOK, m.SignaturesFailed, m.Processed, m.Duplicates, m.Gaps, m.RangeFetches, m.RangeEvents)
	fmt.Fprintf(w, "    edges               authentications %d (%d ok), versioned requests %d (%d past sunset), problems written %d\n",
		m.Authentications, m.Authenticated, m.VersionedRequests, m.VersionsGone, m.Problems)
	if d := r.disagreements(); len(d) > 0 {
		for _, s := range d {
			fmt.Fprintf(w, "    DISAGREE            %s\n", s)
		}
	} else {
		fmt.Fprintf(w, "    agreement           replays, 409s, events, rejected signatures and duplicates match the report\n")
	}
}
