// Package apierror is the one way every package and handler of the platform reports a failed request:
// RFC 9457 problem details that say which input failed and why.
//
// # Wire format
//
// Every problem is served as application/problem+json with the response's X-Request-Id:
//
//	HTTP/1.1 400 Bad Request
//	Content-Type: application/problem+json
//	X-Request-Id: req_3xk2…
//
//	{"type":"https://svcplatform.dev/problems/validation_failed","title":"Bad Request","status":400,
//	 "detail":"body /side: must be one of buy, sell (and 1 more)","code":"validation_failed",
//	 "request_id":"req_3xk2…","errors":[
//	   {"location":"body","pointer":"/side","code":"invalid_enum","detail":"must be one of buy, sell"},
//	   {"location":"header","name":"Idempotency-Key","code":"header_missing","detail":"header Idempotency-Key is required"}]}
//
// Members: type (a stable URI per code), title, status, detail, instance (optional), and the extensions
// code (a stable snake_case identifier), request_id, and errors — the located violations, each with a
// location (body, query, header or path), a pointer (RFC 6901 JSON Pointer into the body) or a name
// (the header, query or path parameter), a code and a detail. Clients must ignore members they do not
// know; new extension members may appear.
//
// Every 4xx this package builds either lists at least one located violation or names the failing input
// in its code and detail. 5xx bodies carry nothing but the request ID. No problem ever echoes a header
// value, key, signature or secret.
//
// # Using it in a handler
//
// Handlers build problems with the builders (Invalid, MissingField, MissingHeader, NotFound,
// Unauthenticated, RateLimited, …) or collect several violations with a Collector, and render them with
// Write, which turns any other error into an opaque 500:
//
//	func createOrder(w http.ResponseWriter, r *http.Request) {
//		var in struct {
//			Account string `json:"account"`
//			Side    string `json:"side"`
//		}
//		if err := apierror.Decode(r, &in, nil); err != nil { // size-capped, strict, located
//			apierror.Write(w, r, err)
//			return
//		}
//		var c apierror.Collector
//		c.Require("/account", in.Account != "")
//		c.Check(in.Side == "buy" || in.Side == "sell",
//			apierror.Body("/side", "invalid_enum", "must be one of buy, sell"))
//		if err := c.Err(); err != nil {
//			apierror.Write(w, r, err)
//			return
//		}
//		…
//	}
//
// Wrap the server in WithRequestID so that every response and problem carries the request's ID.
//
// # Clients and tests
//
// Parse reads a problem response back into an *Error. Check and CheckResponse tell a product team's own
// tests whether a 4xx conforms: problem+json, a specific code, a request_id, and the failing input named
// with its reason. A generic body such as {"error":"invalid request"} fails it.
package apierror
