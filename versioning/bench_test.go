package versioning_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/svcplatform/conventions/versioning"
)

// benchWriter is the cheapest ResponseWriter: the numbers show the router, not a recorder.
type benchWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }
func (w *benchWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

func serveBench(b *testing.B, h http.Handler, r *http.Request) {
	b.Helper()
	w := &benchWriter{h: make(http.Header, 8)}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		w.code = 0
		h.ServeHTTP(w, r)
	}
	if w.code >= 400 {
		b.Fatalf("status %d", w.code)
	}
}

// BenchmarkRouting is the router's overhead per request against the bare handler.
func BenchmarkRouting(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	now := newClock(testNow).Now
	reg := fixtureRegistry(b)
	pinned := func(opts *versioning.Options) *versioning.Router {
		opts.Now, opts.Licensee = now, headerLicensee
		rt := must(versioning.New(reg, opts))
		r := httptest.NewRequest("GET", "/v3/orders", nil)
		r.Header.Set(licenseeHeader, "lic_bench")
		if _, err := rt.Decide(r); err != nil { // pins lic_bench to v3
			b.Fatal(err)
		}
		return rt
	}
	req := func(path string, lic bool) *http.Request {
		r := httptest.NewRequest("GET", path, nil)
		if lic {
			r.Header.Set(licenseeHeader, "lic_bench")
		}
		return r
	}
	b.Run("bare", func(b *testing.B) { serveBench(b, ok, req("/v3/orders", false)) })
	b.Run("newest", func(b *testing.B) {
		serveBench(b, must(versioning.New(reg, &versioning.Options{Now: now})).Handler(ok), req("/v3/orders", false))
	})
	b.Run("deprecated_headers", func(b *testing.B) {
		serveBench(b, must(versioning.New(reg, &versioning.Options{Now: now})).Handler(ok), req("/v1/orders/ord_1", false))
	})
	b.Run("pinned_memory", func(b *testing.B) {
		serveBench(b, pinned(&versioning.Options{}).Handler(ok), req("/v3/orders", true))
	})
	b.Run("pinned_cached", func(b *testing.B) {
		serveBench(b, pinned(&versioning.Options{PinCacheTTL: 1 << 62}).Handler(ok), req("/v3/orders", true))
	})
	b.Run("strip_version", func(b *testing.B) {
		serveBench(b, must(versioning.New(reg, &versioning.Options{Now: now, StripVersion: true})).Handler(ok), req("/v3/orders", false))
	})
}

// twoChangeRegistry has exactly two response changes between v3 and v1.
func twoChangeRegistry(b testing.TB) *versioning.Registry {
	all := fixtureChanges()
	reg, err := versioning.NewRegistry(
		[]versioning.Version{{Name: "v1"}, {Name: "v2"}, {Name: "v3"}},
		[]versioning.Change{all[0], all[2]}) // order_side_renamed (v2), order_amount_structured (v3)
	if err != nil {
		b.Fatal(err)
	}
	return reg
}

// body2KiB is a list of orders of about 2 KiB in the newest shape.
func body2KiB(b testing.TB) []byte {
	var orders []string
	for i := 0; ; i++ {
		o := strings.Replace(orderJSON, `"ord_1"`, `"ord_`+strconv.Itoa(i)+`"`, 1)
		orders = append(orders, o)
		body := `{"object":"list","has_more":false,"data":[` + strings.Join(orders, ",") + `]}`
		if len(body) >= 2048 {
			if !json.Valid([]byte(body)) {
				b.Fatal("invalid body")
			}
			return []byte(body)
		}
	}
}

// BenchmarkTransform2KiB is the cost of shaping a 2 KiB body across two changes.
func BenchmarkTransform2KiB(b *testing.B) {
	reg := twoChangeRegistry(b)
	body := body2KiB(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.TransformResponse(body, "v1"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkShapedRequest is a whole request on v1 through the router: buffer, shape, write.
func BenchmarkShapedRequest(b *testing.B) {
	body := body2KiB(b)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	b.SetBytes(int64(len(body)))
	serveBench(b, must(versioning.New(twoChangeRegistry(b), nil)).Handler(h), httptest.NewRequest("GET", "/v1/orders", nil))
}

func BenchmarkRenderEvent(b *testing.B) {
	reg := fixtureRegistry(b)
	ev := versioning.EventShape{Version: "v3", Type: "order.created", Data: json.RawMessage(`{"object":` + orderJSON + `}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.RenderEvent(ev, "v1"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParsePath(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := versioning.ParsePath("/v12/orders/ord_1"); !ok {
			b.Fatal("not parsed")
		}
	}
}
