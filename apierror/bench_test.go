package apierror_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svcplatform/conventions/apierror"
)

// discardWriter is a ResponseWriter that costs nothing, so the benchmark measures the problem writing.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// BenchmarkWrite400TwoViolations is the case the benchmarks module compares with peers.
func BenchmarkWrite400TwoViolations(b *testing.B) {
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
	req = req.WithContext(apierror.ContextWithRequestID(req.Context(), "req_bench"))
	w := &discardWriter{h: make(http.Header, 4)}
	b.ReportAllocs()
	for b.Loop() {
		err := apierror.Invalid(
			apierror.Body("/account", "field_missing", "is required"),
			apierror.Body("/side", "invalid_enum", "must be one of buy, sell"),
		)
		apierror.Write(w, req, err)
	}
}

func BenchmarkDecode(b *testing.B) {
	body := `{"account":"acc_123","side":"buy"}`
	var in struct {
		Account string `json:"account"`
		Side    string `json:"side"`
	}
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
		if err := apierror.Decode(req, &in, nil); err != nil {
			b.Fatal(err)
		}
	}
}
