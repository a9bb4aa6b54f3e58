package otelconv

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// harness is a Telemetry reporting to the SDK's in-memory reader and span recorder.
type harness struct {
	tel    *Telemetry
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
}

func newHarness(t testing.TB, opts *Options) *harness {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	var o Options
	if opts != nil {
		o = *opts
	}
	o.MeterProvider, o.TracerProvider = mp, tp
	tel, err := New(&o)
	if err != nil {
		t.Fatalf("otelconv.New: %v", err)
	}
	return &harness{tel: tel, reader: reader, spans: spans}
}

// collect reads every metric once.
func (h *harness) collect(t testing.TB) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// matches reports whether set holds every one of want (and perhaps more).
func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// sum adds up the points of the counter or up-down counter name whose attributes hold attrs; 0 when
// the metric has no such point.
func (h *harness) sum(t testing.TB, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := h.collect(t)[name]
	if !ok {
		return 0
	}
	var total int64
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, attrs) {
				total += p.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, attrs) {
				total += p.Value
			}
		}
	default:
		t.Fatalf("%s is a %T, not an int64 sum or gauge", name, m.Data)
	}
	return total
}

// gaugeFloat returns the points of the float64 gauge name whose attributes hold attrs.
func (h *harness) gaugeFloat(t testing.TB, name string, attrs ...attribute.KeyValue) []float64 {
	t.Helper()
	m, ok := h.collect(t)[name]
	if !ok {
		return nil
	}
	d, ok := m.Data.(metricdata.Gauge[float64])
	if !ok {
		t.Fatalf("%s is a %T, not a float64 gauge", name, m.Data)
	}
	var out []float64
	for _, p := range d.DataPoints {
		if matches(p.Attributes, attrs) {
			out = append(out, p.Value)
		}
	}
	return out
}

// histCount returns how many values the histogram name recorded with attributes holding attrs, and
// their sum.
func (h *harness) histCount(t testing.TB, name string, attrs ...attribute.KeyValue) (count uint64, sum float64) {
	t.Helper()
	m, ok := h.collect(t)[name]
	if !ok {
		return 0, 0
	}
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, attrs) {
				count += p.Count
				sum += p.Sum
			}
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, attrs) {
				count += p.Count
				sum += float64(p.Sum)
			}
		}
	default:
		t.Fatalf("%s is a %T, not a histogram", name, m.Data)
	}
	return count, sum
}

// ended returns the ended spans named name.
func (h *harness) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// pointSets returns the attribute sets of every point of a metric, whatever its kind.
func pointSets(data metricdata.Aggregation) []attribute.Set {
	var out []attribute.Set
	add := func(set attribute.Set) { out = append(out, set) }
	switch d := data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			add(p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			add(p.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			add(p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			add(p.Attributes)
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			add(p.Attributes)
		}
	}
	return out
}

// checkEnumTable fails unless the table of size entries that otelconv keeps for an enum of another
// package covers every value that package has: each value from first to size-1 has a name of its
// own (not unknown, the name String gives a value the package does not know), and the value at size
// is unknown. A package that grows a value makes this fail until the table grows with it.
func checkEnumTable(t *testing.T, enum string, first, size int, name func(v int) string, unknown string) {
	t.Helper()
	for v := first; v < size; v++ {
		if s := name(v); s == unknown {
			t.Errorf("%s(%d) is %q, inside otelconv's table of %d: the table is larger than the enum", enum, v, s, size)
		}
	}
	if s := name(size); s != unknown {
		t.Errorf("%s(%d) is %q: the package has a value otelconv's table of %d leaves out; grow the table and document the value", enum, size, s, size)
	}
}
