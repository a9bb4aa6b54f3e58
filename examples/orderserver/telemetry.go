package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/otelconv"
)

// The OTLP environment variables that turn tracing on without -otlp; the exporter reads them (and
// the rest of OTEL_EXPORTER_OTLP_*: headers, timeout, …) itself.
var otlpEnv = []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}

// telemetry is the server's OpenTelemetry pipeline: Prometheus text on -metrics-addr, traces over
// OTLP/HTTP to -otlp or where OTEL_EXPORTER_OTLP_* say.
type telemetry struct {
	tel      *otelconv.Telemetry // nil when neither metrics nor traces are asked for
	metrics  *http.Server
	listener net.Listener
	serving  bool // metrics.Serve owns listener
	shutdown []func(context.Context) error
}

// openTelemetry builds the pipeline. metricsAddr "" serves no metrics; otlp "" (and no OTLP
// environment variable) sends no traces; with neither, it returns a telemetry whose tel is nil, and
// the server observes nothing.
func openTelemetry(ctx context.Context, metricsAddr, otlp string, logger *slog.Logger) (*telemetry, error) {
	tracing := otlp != ""
	for _, v := range otlpEnv {
		tracing = tracing || os.Getenv(v) != ""
	}
	t := &telemetry{}
	if metricsAddr == "" && !tracing {
		return t, nil
	}
	res := resource.NewSchemaless(semconv.ServiceName("orderserver"))
	var mp metric.MeterProvider = metricnoop.NewMeterProvider()
	var tp trace.TracerProvider = tracenoop.NewTracerProvider()
	if metricsAddr != "" {
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return nil, fmt.Errorf("-metrics-addr: %w", err)
		}
		sdk := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
		t.shutdown = append(t.shutdown, sdk.Shutdown)
		mp = sdk
		ln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return nil, fmt.Errorf("-metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		t.listener = ln
		t.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	}
	if tracing {
		var opts []otlptracehttp.Option
		if otlp != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(otlp))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			_ = t.close(ctx)
			return nil, fmt.Errorf("-otlp: %w", err)
		}
		sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.shutdown = append(t.shutdown, sdk.Shutdown)
		tp = sdk
	}
	tel, err := otelconv.New(&otelconv.Options{MeterProvider: mp, TracerProvider: tp, EventTypes: server.EventTypes})
	if err != nil {
		_ = t.close(ctx)
		return nil, err
	}
	t.tel = tel
	if t.metrics != nil {
		t.serving = true
		go func() {
			if err := t.metrics.Serve(t.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("metrics server stopped", "error", err)
			}
		}()
	}
	return t, nil
}

// MetricsURL is where Prometheus scrapes, "" without -metrics-addr.
func (t *telemetry) MetricsURL() string {
	if t.listener == nil {
		return ""
	}
	return "http://" + t.listener.Addr().String() + "/metrics"
}

// close stops the metrics server and flushes the spans still batched.
func (t *telemetry) close(ctx context.Context) error {
	var errs []error
	if t.serving {
		errs = append(errs, t.metrics.Shutdown(ctx))
	} else if t.listener != nil {
		errs = append(errs, t.listener.Close())
	}
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}
