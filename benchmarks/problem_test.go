package benchmarks

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/moogar0880/problems"

	"github.com/svcplatform/conventions/apierror"
)

// discardWriter is a ResponseWriter that keeps nothing but the status and the byte count, so the
// benchmarks measure the library rather than a recorder's buffer growth. Its header map is cleared
// between operations, the way a server hands every request a fresh one.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func newDiscardWriter() *discardWriter { return &discardWriter{h: make(http.Header, 8)} }

func (d *discardWriter) Header() http.Header { return d.h }
func (d *discardWriter) WriteHeader(s int) {
	if d.status == 0 {
		d.status = s
	}
}
func (d *discardWriter) Write(p []byte) (int, error) {
	if d.status == 0 {
		d.status = http.StatusOK
	}
	d.n += len(p)
	return len(p), nil
}
func (d *discardWriter) reset() { clear(d.h); d.status, d.n = 0, 0 }

// problemViolation is the located-violation member ours writes, reused for moogar0880/problems, which
// has no violation list of its own and documents embedding Problem to extend it.
type problemViolation struct {
	Location string `json:"location"`
	Pointer  string `json:"pointer,omitempty"`
	Code     string `json:"code"`
	Detail   string `json:"detail"`
}

type problemWithErrors struct {
	problems.Problem
	Errors []problemViolation `json:"errors"`
}

// problemCase writes the same 400 with two violations (/account missing, /side not an allowed value)
// the way a user of that library would, building the error in the operation as a handler does.
type problemCase struct {
	name  string
	setup func(tb testing.TB) func(w http.ResponseWriter, r *http.Request)
}

func problemCases() []problemCase {
	return []problemCase{
		{"ours", func(testing.TB) func(http.ResponseWriter, *http.Request) {
			return func(w http.ResponseWriter, r *http.Request) {
				apierror.Write(w, r, apierror.Invalid(
					apierror.Body("/account", "field_missing", "is required"),
					apierror.Body("/side", "invalid_enum", "must be one of buy, sell"),
				))
			}
		}},
		{"huma", func(testing.TB) func(http.ResponseWriter, *http.Request) {
			// huma's own path: its ErrorModel, content negotiation and transformers, written through
			// the net/http adapter, as a huma operation returning huma.Error400BadRequest would be.
			api := humago.New(http.NewServeMux(), huma.DefaultConfig("bench", "1.0.0"))
			op := &huma.Operation{OperationID: "create-order", Method: http.MethodPost, Path: "/v1/orders"}
			return func(w http.ResponseWriter, r *http.Request) {
				_ = huma.WriteErr(api, humago.NewContext(op, r, w), http.StatusBadRequest, "the request body is invalid",
					&huma.ErrorDetail{Location: "body.account", Message: "is required"},
					&huma.ErrorDetail{Location: "body.side", Message: "must be one of buy, sell"},
				)
			}
		}},
		{"problems", func(testing.TB) func(http.ResponseWriter, *http.Request) {
			// moogar0880/problems' ProblemHandler steps, on a Problem extended by embedding.
			return func(w http.ResponseWriter, r *http.Request) {
				p := &problemWithErrors{
					Problem: *problems.NewDetailedProblem(http.StatusBadRequest, "the request body is invalid"),
					Errors: []problemViolation{
						{Location: "body", Pointer: "/account", Code: "field_missing", Detail: "is required"},
						{Location: "body", Pointer: "/side", Code: "invalid_enum", Detail: "must be one of buy, sell"},
					},
				}
				w.Header().Set("Content-Type", problems.ProblemMediaType)
				w.WriteHeader(p.Status)
				_ = json.NewEncoder(w).Encode(p)
			}
		}},
	}
}

// problemRequest is the request every problem is written for; the request ID is already in its
// context, as the WithRequestID middleware leaves it.
func problemRequest() *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
	r.Header.Set("Accept", "application/json")
	return r.WithContext(apierror.NewRequestIDContext(r.Context(), "req_01jbenchbenchbenchbenchbenc"))
}

// BenchmarkProblemWrite writes one 400 problem with two violations per operation.
func BenchmarkProblemWrite(b *testing.B) {
	r := problemRequest()
	for _, c := range problemCases() {
		b.Run(c.name, func(b *testing.B) {
			write := c.setup(b)
			w := newDiscardWriter()
			b.ReportAllocs()
			for b.Loop() {
				w.reset()
				write(w, r)
				if w.status != http.StatusBadRequest {
					b.Fatalf("status %d", w.status)
				}
			}
		})
	}
}
