package otelconv_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/otelconv"
)

// A service reports its idempotency decisions to OpenTelemetry: here to an in-memory reader, in
// production to the Prometheus exporter or OTLP.
func Example() {
	reader := sdkmetric.NewManualReader()
	tel, err := otelconv.New(&otelconv.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		panic(err)
	}
	m, err := idempotency.New(&idempotency.Options{Hooks: tel.Idempotency()})
	if err != nil {
		panic(err)
	}
	orders := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	for range 3 { // one order, and two retries of it
		r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(`{"side":"buy"}`))
		r.Header.Set("Authorization", "Bearer sk_sandbox_example")
		r.Header.Set("Idempotency-Key", "a1b2c3")
		orders.ServeHTTP(httptest.NewRecorder(), r)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, metric := range sm.Metrics {
			if metric.Name != "svc.idempotency.requests" {
				continue
			}
			for _, p := range metric.Data.(metricdata.Sum[int64]).DataPoints {
				outcome, _ := p.Attributes.Value("svc.idempotency.outcome")
				lines = append(lines, fmt.Sprintf("%s{outcome=%s} %d", metric.Name, outcome.AsString(), p.Value))
			}
		}
	}
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// svc.idempotency.requests{outcome=executed} 1
	// svc.idempotency.requests{outcome=replayed} 2
}
