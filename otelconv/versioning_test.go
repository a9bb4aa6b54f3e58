package otelconv

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/versioning"
)

// At edgesNow, v1 is sunset, v2 deprecated and v3 the newest.
var edgesNow = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

func edgesRegistry(t testing.TB) *versioning.Registry {
	t.Helper()
	reg, err := versioning.NewRegistry([]versioning.Version{
		{Name: "v1", Deprecated: edgesNow.AddDate(-1, 0, 0), Sunset: edgesNow.AddDate(0, -1, 0)},
		{Name: "v2", Deprecated: edgesNow.AddDate(0, -1, 0), Sunset: edgesNow.AddDate(1, 0, 0)},
		{Name: "v3"},
	}, []versioning.Change{{Name: "v2_change", Version: "v2"}, {Name: "v3_change", Version: "v3"}})
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	return reg
}

const licenseeHeader = "X-Test-Licensee"

func headerLicensee(r *http.Request) (string, error) {
	return r.Header.Get(licenseeHeader), nil
}

var noContent = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })

// versioningService is the real router behind the service's Writer, both observed by h.
func versioningService(t testing.TB, h *harness) http.Handler {
	t.Helper()
	rt, err := versioning.New(edgesRegistry(t), &versioning.Options{
		Now: func() time.Time { return edgesNow }, Licensee: headerLicensee, Hooks: h.tel.Versioning(),
	})
	if err != nil {
		t.Fatalf("versioning.New: %v", err)
	}
	problems := apierror.Writer{Hooks: h.tel.APIError()}
	return apierror.WithRequestID(problems.Handler(rt.Handler(noContent)))
}

func serve(t testing.TB, h http.Handler, path, licensee string) int {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.URL.Path = path // hostile paths arrive as they are
	if licensee != "" {
		r.Header.Set(licenseeHeader, licensee)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// TestVersioningMetrics drives the real router and counts every request by version, lifecycle state
// and outcome; unknown and hostile version segments are all one "unknown" value.
func TestVersioningMetrics(t *testing.T) {
	h := newHarness(t, nil)
	svc := versioningService(t, h)
	for _, rq := range []struct {
		path, licensee string
		status         int
	}{
		{"/v3/orders", "", 204},
		{"/v3/orders", "", 204},
		{"/v3/orders", "lic_a", 204}, // first use: pinned to v3
		{"/v2/orders", "", 204},
		{"/v2/orders", "", 204},
		{"/v2/orders", "lic_a", 403}, // pinned to v3
		{"/v1/orders", "", 410},
		{"/v9/orders", "", 404},
		{"/V1/orders", "", 404},
		{"/v01/orders", "lic_a", 404},
		{"/sk_live_" + strings.Repeat("a", 40) + "/orders", "", 404},
	} {
		if got := serve(t, svc, rq.path, rq.licensee); got != rq.status {
			t.Fatalf("%s: status %d, want %d", rq.path, got, rq.status)
		}
	}
	const name = "svc.versioning.requests"
	for _, c := range []struct {
		want  int64
		attrs []attribute.KeyValue
	}{
		{3, []attribute.KeyValue{attrVersion.String("v3"), attrLifecycle.String("current"), attrVersioningOutcome.String("served")}},
		{2, []attribute.KeyValue{attrVersion.String("v2"), attrLifecycle.String("deprecated"), attrVersioningOutcome.String("served")}},
		{1, []attribute.KeyValue{attrVersion.String("v2"), attrLifecycle.String("deprecated"), attrVersioningOutcome.String("not_enabled")}},
		{1, []attribute.KeyValue{attrVersion.String("v1"), attrLifecycle.String("sunset"), attrVersioningOutcome.String("sunset")}},
		{4, []attribute.KeyValue{attrVersion.String("unknown"), attrLifecycle.String("unknown"), attrVersioningOutcome.String("unknown")}},
		{11, nil},
	} {
		if got := h.sum(t, name, c.attrs...); got != c.want {
			t.Errorf("%s%v = %d, want %d", name, c.attrs, got, c.want)
		}
	}
	if got := h.sum(t, "svc.versioning.pin.changes", attrVersion.String("v3")); got != 1 {
		t.Errorf("pin changes = %d, want 1", got)
	}
	if n, sum := h.histCount(t, "svc.versioning.decision.duration"); n != 11 || sum != 0 {
		t.Errorf("decision durations: %d values summing to %v, want 11 (of 0 s on a fixed clock)", n, sum)
	}
	if n, _ := h.histCount(t, "svc.versioning.decision.duration", attrVersioningOutcome.String("unknown")); n != 4 {
		t.Errorf("unknown decisions timed: %d, want 4", n)
	}
	// The problems the router wrote, counted by the service's Writer.
	for _, c := range []struct {
		status int
		code   string
		want   int64
	}{{404, versioning.CodeVersionUnknown, 4}, {410, versioning.CodeVersionSunset, 1}, {403, versioning.CodeVersionNotEnabled, 1}} {
		if got := h.sum(t, "svc.apierror.problems", attrStatus.Int(c.status), attrCode.String(c.code)); got != c.want {
			t.Errorf("problems{%d,%s} = %d, want %d", c.status, c.code, got, c.want)
		}
	}
	// Only registered names and "unknown", and no licensee without the opt-in.
	for _, set := range h.attributeSets(t, name) {
		if v, _ := set.Value(attrVersion); !map[string]bool{"v1": true, "v2": true, "v3": true, "unknown": true}[v.AsString()] {
			t.Errorf("version attribute %q", v.AsString())
		}
		if set.HasValue(attrLicensee) {
			t.Errorf("licensee recorded without the opt-in: %v", set)
		}
	}
}

// TestVersioningLicenseeOptIn: with Options.LicenseeAttribute, requests carry svc.licensee.
func TestVersioningLicenseeOptIn(t *testing.T) {
	h := newHarness(t, &Options{LicenseeAttribute: true})
	svc := versioningService(t, h)
	serve(t, svc, "/v3/orders", "lic_a")
	serve(t, svc, "/v3/orders", "lic_a")
	serve(t, svc, "/v3/orders", "")
	if got := h.sum(t, "svc.versioning.requests", attrVersion.String("v3"), attrLicensee.String("lic_a")); got != 2 {
		t.Errorf("requests of lic_a = %d, want 2", got)
	}
	if got := h.sum(t, "svc.versioning.requests", attrVersion.String("v3")); got != 3 {
		t.Errorf("requests on v3 = %d, want 3", got)
	}
}

// TestVersioningSpan: the request's span gets the version and outcome, and a problem event.
func TestVersioningSpan(t *testing.T) {
	h := newHarness(t, nil)
	svc := versioningService(t, h)
	for _, path := range []string{"/v3/orders", "/v7/orders"} {
		ctx, span := h.tel.tracer.Start(context.Background(), "GET")
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
		svc.ServeHTTP(httptest.NewRecorder(), r)
		span.End()
	}
	spans := h.ended("GET")
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	want := []struct {
		version, outcome string
		events           int
	}{{"v3", "served", 0}, {"unknown", "unknown", 1}}
	for i, s := range spans {
		set := attribute.NewSet(s.Attributes()...)
		if v, _ := set.Value(attrVersion); v.AsString() != want[i].version {
			t.Errorf("span %d version %q", i, v.AsString())
		}
		if v, _ := set.Value(attrVersioningOutcome); v.AsString() != want[i].outcome {
			t.Errorf("span %d outcome %q", i, v.AsString())
		}
		if len(s.Events()) != want[i].events {
			t.Errorf("span %d events %v", i, s.Events())
		}
	}
	ev := spans[1].Events()[0]
	evSet := attribute.NewSet(ev.Attributes...)
	if ev.Name != "svc.apierror.problem" || !matches(evSet, []attribute.KeyValue{attrStatus.Int(404), attrCode.String("version_unknown")}) {
		t.Errorf("event %s %v", ev.Name, ev.Attributes)
	}
}

// TestVersioningEnumTables: the tables of precomputed attribute sets cover every value of
// versioning's enums, and fail here when versioning grows one. versioning names a value it does not
// know "invalid" ("unknown" is a value of both enums).
func TestVersioningEnumTables(t *testing.T) {
	checkEnumTable(t, "versioning.Lifecycle", 0, numLifecycles, func(v int) string { return versioning.Lifecycle(v).String() }, "invalid")
	checkEnumTable(t, "versioning.Outcome", 1, numVersioningOutcomes, func(v int) string { return versioning.Outcome(v).String() }, "invalid")
}

// TestVersioningUnknownValues: a lifecycle or an outcome past otelconv's tables (versioning grew one
// this version does not know) is counted as _OTHER, with or without the licensee, and nothing
// panics; the zero Outcome, which the router never reports, is not counted.
func TestVersioningUnknownValues(t *testing.T) {
	for _, opts := range []*Options{nil, {LicenseeAttribute: true}} {
		h := newHarness(t, opts)
		hooks := h.tel.Versioning()
		ctx := context.Background()
		for _, ob := range []versioning.Observation{
			{Version: "v2", Lifecycle: versioning.Lifecycle(numLifecycles), Outcome: versioning.OutcomeServed, Licensee: "lic_a"},
			{Version: "v2", Lifecycle: 255, Outcome: versioning.OutcomeServed, Licensee: "lic_a"},
			{Version: "v2", Lifecycle: versioning.LifecycleCurrent, Outcome: versioning.Outcome(numVersioningOutcomes), Licensee: "lic_a"},
			{Version: "v2", Lifecycle: versioning.LifecycleCurrent, Outcome: 255, Licensee: "lic_a"},
			{Version: "v2", Lifecycle: 255, Outcome: 255},
			{Version: "v2", Lifecycle: versioning.LifecycleCurrent},
		} {
			hooks.Decided(ctx, ob)
		}
		if got := h.sum(t, "svc.versioning.requests"); got != 5 {
			t.Errorf("requests = %d, want 5: the zero Outcome is not counted", got)
		}
		requireCount(t, "requests{lifecycle _OTHER}", h.sum(t, "svc.versioning.requests", attrLifecycle.String(otherValue)), 3)
		requireCount(t, "requests{outcome _OTHER}", h.sum(t, "svc.versioning.requests", attrVersioningOutcome.String(otherValue)), 3)
		requireCount(t, "requests{lifecycle _OTHER, served}", h.sum(t, "svc.versioning.requests", attrLifecycle.String(otherValue),
			attrVersioningOutcome.String("served")), 2)
		if n, _ := h.histCount(t, "svc.versioning.decision.duration", attrVersioningOutcome.String(otherValue)); n != 3 {
			t.Errorf("decision.duration{_OTHER} count = %d, want 3", n)
		}
	}
}

// attributeSets returns the attribute sets of every point of the metric name.
func (h *harness) attributeSets(t testing.TB, name string) []attribute.Set {
	t.Helper()
	m, ok := h.collect(t)[name]
	if !ok {
		return nil
	}
	return pointSets(m.Data)
}

// BenchmarkVersioningObserved is the router's hot path (newest version, pinned licensee) with no
// hooks and with the otelconv hooks on the SDK.
func BenchmarkVersioningObserved(b *testing.B) {
	reg := edgesRegistry(b)
	for _, observed := range []bool{false, true} {
		name := "nil"
		if observed {
			name = "otel"
		}
		b.Run(name, func(b *testing.B) {
			opts := &versioning.Options{Now: func() time.Time { return edgesNow }, Licensee: headerLicensee}
			if observed {
				opts.Hooks = newHarness(b, nil).tel.Versioning()
			}
			rt, err := versioning.New(reg, opts)
			if err != nil {
				b.Fatal(err)
			}
			hd := rt.Handler(noContent)
			r := httptest.NewRequest(http.MethodGet, "/v3/orders", nil)
			r.Header.Set(licenseeHeader, "lic_bench")
			w := &discard{h: make(http.Header, 8)}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				hd.ServeHTTP(w, r)
			}
		})
	}
}

// BenchmarkVersioningDecided is the hook's own cost per request.
func BenchmarkVersioningDecided(b *testing.B) {
	o := newHarness(b, nil).tel.Versioning()
	ctx := context.Background()
	ob := versioning.Observation{At: edgesNow, Version: "v2", Lifecycle: versioning.LifecycleDeprecated, Outcome: versioning.OutcomeServed,
		Licensee: "lic_a", Pinned: "v2"}
	b.ReportAllocs()
	for b.Loop() {
		o.Decided(ctx, ob)
	}
}

// discard is a ResponseWriter that costs nothing.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}
