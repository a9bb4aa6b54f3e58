package apierror_test

import (
	"bytes"
	"encoding/json"
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
	req = req.WithContext(apierror.NewRequestIDContext(req.Context(), "req_bench"))
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
		req.Header.Set("Content-Type", "application/json")
		if err := apierror.Decode(req, &in, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// benchOrder is a realistic order body: eight members, a nested object and an array of objects.
type benchOrder struct {
	Account  string            `json:"account"`
	Side     string            `json:"side"`
	Symbol   string            `json:"symbol"`
	Quantity int64             `json:"quantity"`
	Price    float64           `json:"price"`
	Note     string            `json:"note"`
	Metadata map[string]string `json:"metadata"`
	Legs     []struct {
		Venue string `json:"venue"`
		Qty   int64  `json:"qty"`
	} `json:"legs"`
}

const benchOrderBody = `{"account":"acc_7Hq2","side":"buy","symbol":"ACME","quantity":1200,"price":101.25,` +
	`"note":"rebalance – quarterly (café order)","metadata":{"desk":"emea","trader":"t_42"},` +
	`"legs":[{"venue":"XLON","qty":700},{"venue":"XPAR","qty":500}]}`

// BenchmarkDecodeStrict and BenchmarkDecodeEncodingJSON decode the same bytes into the same struct:
// the strict decoder (duplicates, exact names, UTF-8, then encoding/json) against encoding/json's
// Decoder with DisallowUnknownFields, which lets all three through.
func BenchmarkDecodeStrict(b *testing.B) {
	data := []byte(benchOrderBody)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var o benchOrder
		if err := apierror.DecodeBytes(data, &o, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeEncodingJSON(b *testing.B) {
	data := []byte(benchOrderBody)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var o benchOrder
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServeMux is what Writer.ServeMux adds to a matched route (Matched, beside Plain, the
// ServeMux alone) and what a 405 costs (its own problem body, Allow computed by the mux).
func BenchmarkServeMux(b *testing.B) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("DELETE /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) {})
	wrapped := apierror.Writer{}.ServeMux(mux)
	for _, c := range []struct {
		name, method string
		h            http.Handler
	}{
		{"Plain", http.MethodGet, mux},
		{"Matched", http.MethodGet, wrapped},
		{"MethodNotAllowed", http.MethodPost, wrapped},
		{"PlainMethodNotAllowed", http.MethodPost, mux},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest(c.method, "/v1/orders/ord_1", nil)
			req = req.WithContext(apierror.NewRequestIDContext(req.Context(), "req_bench"))
			w := &discardWriter{h: make(http.Header, 4)}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				c.h.ServeHTTP(w, req)
			}
		})
	}
}

// BenchmarkWriteJSON writes a small order, beside the hand-rolled Header().Set + json.NewEncoder it
// replaces in handlers.
func BenchmarkWriteJSON(b *testing.B) {
	order := struct {
		ID      string `json:"id"`
		Account string `json:"account"`
		Side    string `json:"side"`
		Created int64  `json:"created"`
	}{"ord_3xk2q7", "acc_1", "buy", 1767225600}
	req := httptest.NewRequest(http.MethodGet, "/v1/orders/ord_3xk2q7", nil)
	w := &discardWriter{h: make(http.Header, 4)}
	b.Run("WriteJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			apierror.WriteJSON(w, req, http.StatusOK, order)
		}
	})
	b.Run("HandRolled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_ = json.NewEncoder(w).Encode(order)
		}
	})
}
