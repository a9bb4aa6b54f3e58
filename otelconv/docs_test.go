package otelconv

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// namingMeterProvider hands out no-op instruments and writes down each instrument's name and unit; with
// fail set, it refuses the instrument of that name, as an SDK refuses an invalid one.
type namingMeterProvider struct {
	noop.MeterProvider
	created map[string]string // name → unit
	fail    string
}

func (p *namingMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter {
	return &namingMeter{Meter: noop.Meter{}, p: p}
}

type namingMeter struct {
	metric.Meter
	p *namingMeterProvider
}

var errRefused = errors.New("instrument refused")

func (m *namingMeter) note(name string, unit string) error {
	m.p.created[name] = unit
	if name == m.p.fail {
		return errRefused
	}
	return nil
}

func (m *namingMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	c, _ := m.Meter.Int64Counter(name)
	return c, m.note(name, metric.NewInt64CounterConfig(opts...).Unit())
}

func (m *namingMeter) Int64Histogram(name string, opts ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	c, _ := m.Meter.Int64Histogram(name)
	return c, m.note(name, metric.NewInt64HistogramConfig(opts...).Unit())
}

func (m *namingMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	c, _ := m.Meter.Float64Histogram(name)
	return c, m.note(name, metric.NewFloat64HistogramConfig(opts...).Unit())
}

func (m *namingMeter) Float64ObservableGauge(name string, opts ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	c, _ := m.Meter.Float64ObservableGauge(name)
	return c, m.note(name, metric.NewFloat64ObservableGaugeConfig(opts...).Unit())
}

func (m *namingMeter) Int64ObservableGauge(name string, opts ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	c, _ := m.Meter.Int64ObservableGauge(name)
	return c, m.note(name, metric.NewInt64ObservableGaugeConfig(opts...).Unit())
}

// semconvName is the shape of every instrument name: svc., then lowercase dot-separated words.
// The one exception is the semantic conventions' own http.server.request.duration (HTTPHandler).
var semconvName = regexp.MustCompile(`^(svc(\.[a-z][a-z0-9_]*)+|http\.server\.request\.duration)$`)

// TestEveryInstrumentIsDocumented: every instrument New creates is in the package doc's table and in
// README.md, with its unit, and is named in the semantic conventions' style.
func TestEveryInstrumentIsDocumented(t *testing.T) {
	p := &namingMeterProvider{created: map[string]string{}}
	if _, err := New(&Options{MeterProvider: p}); err != nil {
		t.Fatal(err)
	}
	if len(p.created) < 20 {
		t.Fatalf("only %d instruments created: %v", len(p.created), p.created)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, unit := range p.created {
		if !semconvName.MatchString(name) {
			t.Errorf("%s: not svc.<lowercase words>", name)
		}
		if unit == "" {
			t.Errorf("%s has no unit", name)
		}
		if timed := strings.HasSuffix(name, ".duration") || strings.HasSuffix(name, ".age"); timed != (unit == "s") {
			t.Errorf("%s: durations and ages, and only they, are in seconds (unit %q)", name, unit)
		}
		row := regexp.MustCompile(`(?m)^//\t` + regexp.QuoteMeta(name) + `\s+\S+\s+` + regexp.QuoteMeta(unit) + `(\s|$)`)
		if !row.Match(doc) {
			t.Errorf("%s (unit %s) has no row in doc.go's table", name, unit)
		}
		if !strings.Contains(string(readme), "`"+name+"`") {
			t.Errorf("%s is not in README.md", name)
		}
	}
	// And nothing is documented that is not created.
	for _, m := range regexp.MustCompile(`(?m)^//\t((?:svc|http)\.[a-z0-9_.]+)\s`).FindAllSubmatch(doc, -1) {
		if _, ok := p.created[string(m[1])]; !ok {
			t.Errorf("doc.go documents %s, which New does not create", m[1])
		}
	}
}

// A MeterProvider that refuses an instrument makes New fail with its error, whichever it is.
func TestNewReportsARefusedInstrument(t *testing.T) {
	p := &namingMeterProvider{created: map[string]string{}}
	if _, err := New(&Options{MeterProvider: p}); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(p.created))
	for n := range p.created {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		q := &namingMeterProvider{created: map[string]string{}, fail: name}
		tel, err := New(&Options{MeterProvider: q})
		if !errors.Is(err, errRefused) || tel != nil {
			t.Errorf("refusing %s: New = %v, %v", name, tel, err)
		}
	}
}
