package apierror_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/svcplatform/conventions/apierror"
)

// A handler decodes strictly, validates, and answers every failure in one located 400.
func Example() {
	createOrder := func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Account string `json:"account"`
			Side    string `json:"side"`
		}
		if err := apierror.Decode(r, &in, nil); err != nil {
			apierror.Write(w, r, err)
			return
		}
		var c apierror.Collector
		c.Require("/account", in.Account != "")
		c.Check(in.Side == "buy" || in.Side == "sell", apierror.Body("/side", "invalid_enum", "must be one of buy, sell"))
		if err := c.Err(); err != nil {
			apierror.Write(w, r, err)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(`{"side":"hold"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "trace-42") // kept for the server's logs, never echoed
	rec := httptest.NewRecorder()
	apierror.WithRequestID(http.HandlerFunc(createOrder)).ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// The request ID is the server's own, fresh for every request: shown here as req_….
	fmt.Println(strings.Replace(rec.Body.String(), rec.Header().Get("X-Request-Id"), "req_…", 1))
	// Output:
	// 400 application/problem+json
	// {"type":"https://svcplatform.dev/problems/validation_failed","title":"Bad Request","status":400,"detail":"body /account: is required (and 1 more)","code":"validation_failed","request_id":"req_…","errors":[{"location":"body","pointer":"/account","code":"field_missing","detail":"is required"},{"location":"body","pointer":"/side","code":"invalid_enum","detail":"must be one of buy, sell"}]}
}

// Decode locates a wrong type by JSON Pointer, array indices included.
func ExampleDecode() {
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(`{"items":[{"qty":1},{"qty":"two"}]}`))
	req.Header.Set("Content-Type", "application/json")
	var in struct {
		Items []struct {
			Qty int `json:"qty"`
		} `json:"items"`
	}
	err := apierror.Decode(req, &in, nil)
	p := err.(*apierror.Error)
	fmt.Println(p.Status, p.Errors[0].Pointer, p.Errors[0].Code+":", p.Errors[0].Detail)
	// Output: 400 /items/1/qty wrong_type: must be an integer, got string
}

// Check tells a team's own tests that a generic error body does not conform.
func ExampleCheck() {
	h := http.Header{"Content-Type": {"application/json"}}
	fmt.Println(apierror.Check(400, h, []byte(`{"error":"invalid request"}`)) != nil)
	// Output: true
}

// Parse reads a problem back on the client side.
func ExampleParse() {
	rec := httptest.NewRecorder()
	apierror.Write(rec, httptest.NewRequest(http.MethodGet, "/", nil), apierror.MissingHeader("Idempotency-Key"))
	p, err := apierror.Parse(rec.Result())
	fmt.Println(err, p.Status, p.Code, p.Errors[0].Name)
	// Output: <nil> 400 header_missing Idempotency-Key
}

// A service documents its own codes beside the library's and serves the pages where its type URIs
// point.
func ExampleProblemDocs() {
	docs, err := apierror.NewProblemDocs(append(apierror.LibraryProblemDocs(), apierror.ProblemDoc{
		Code: "order_not_found", Statuses: []int{404}, Title: "Order not found",
		Description: "No order of this account has the ID in the path.",
		Fix:         "Use the ID returned when the order was created.",
	})...)
	if err != nil {
		fmt.Println(err)
		return
	}
	problems := apierror.Writer{TypeBase: "https://api.example.com/problems/"}
	mux := http.NewServeMux()
	mux.Handle("/problems/", docs.Handler(problems))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/problems/order_not_found", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	fmt.Print(rec.Body.String())
	// Output:
	// 200 application/json
	// {"object":"problem_type","code":"order_not_found","statuses":[404],"title":"Order not found","description":"No order of this account has the ID in the path.","fix":"Use the ID returned when the order was created.","type":"https://api.example.com/problems/order_not_found"}
}
