// Package apierror is the one way every package and handler of the platform reports a failed request:
// RFC 9457 problem details that say which input failed and why. A complete server:
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
//			apierror.Write(w, r, err) // 400, every failing member located
//			return
//		}
//		apierror.WriteJSON(w, r, http.StatusCreated, createOrderFor(in)) // the team's own work
//	}
//
//	mux := http.NewServeMux()
//	mux.HandleFunc("POST /v1/orders", createOrder)
//	problems := apierror.Writer{TypeBase: "https://payments.example/problems/", Logger: logger}
//	http.ListenAndServe(addr, apierror.WithRequestID(problems.Handler(problems.Recover(problems.ServeMux(mux)))))
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
// value, key, signature or secret, and the Writer replaces any word of a title, detail, instance,
// violation (pointer, name, detail) or extension member that is shaped like a credential (sk_…,
// rk_…, pk_…, whsec_…) with a placeholder (Redact), in the body and in the line it logs for an
// opaque 500, so a problem that quotes client input cannot reflect a key pasted in the wrong place.
//
// # Request IDs
//
// WithRequestID gives every request an ID of the server's own, "req_" and 26 random characters, on the
// X-Request-Id response header and in every problem. A client's X-Request-Id is never taken over or
// echoed — a client that sent its live key there would see it reflected into every log and proxy on
// the way; when it is well-formed and not shaped like a credential it is kept for the server's logs
// (ClientRequestIDFromContext).
//
// When a layer in front already names the request — chi's middleware.RequestID, a gateway — two IDs
// for one request would split its logs. RequestIDs.From adopts that ID instead of making one (after
// the same check of its shape: an upstream that copies the client's header as it came cannot reflect
// a key):
//
//	r.Use(middleware.RequestID, apierror.RequestIDs{From: func(r *http.Request) string {
//		return middleware.GetReqID(r.Context())
//	}}.Handler)
//
// # One Writer for the service
//
// A service makes one Writer with its problem type base and logger, and installs it once with
// Writer.Handler: every problem written below it — by this library's middlewares, whose Options all
// call it Problems, and by the package-level Write — takes the fields it left empty from it. Nothing is
// package-level state: the Writer travels in the request context.
//
//	problems := apierror.Writer{TypeBase: "https://payments.example/problems/", Logger: logger}
//	srv.Handler = apierror.WithRequestID(problems.Handler(problems.Recover(problems.ServeMux(mux))))
//
// # Documenting problem types
//
// A problem's type URI — TypeBase and the code — should lead to a page that says what the code means
// and what to do about it. ProblemDocs is that documentation for every code a service writes, each
// with its statuses, a title, what happened and how to fix it; ProblemDocs.Handler serves it at the
// address TypeBase names, as HTML to a browser and as JSON ({"object":"problem_type",…}) to anything
// else, with an index of every code. LibraryProblemDocs documents every code of the library's
// packages. A service appends its own entries and builds the registry once, at start-up, where an
// entry that repeats a code, has no valid status or leaves its title, description or fix empty is an
// error naming the entry:
//
//	docs, err := apierror.NewProblemDocs(append(apierror.LibraryProblemDocs(),
//		apierror.ProblemDoc{Code: "order_not_found", Statuses: []int{404}, Title: "Order not found",
//			Description: "No order of this account has the ID in the path.",
//			Fix:         "Use the ID returned when the order was created."},
//	)...)
//	if err != nil {
//		return err
//	}
//	problems := apierror.Writer{TypeBase: "https://api.example.com/problems/", Logger: logger}
//	mux.Handle("/problems/", docs.Handler(problems)) // GET /problems/, GET /problems/order_not_found
//
// The handler reads the path of TypeBase (here /problems/) from the request's path, so it is mounted
// at that path on the host TypeBase names, without http.StripPrefix. To keep the registry complete, a
// service's own test checks that docs.Lookup finds every code it defines; the library does the same
// for its codes with TestLibraryProblemDocsComplete, which reads the source of its packages and fails
// on a code written but not documented, and on one documented but no longer written.
//
// # Routing and successes
//
// Writer.ServeMux serves an http.ServeMux whose own answers become problems: 404 route_not_found for
// a path no pattern matches, and 405 method_not_allowed with the Allow header the mux computed and a
// violation located at the path. Routers with hooks take Writer.NotFoundHandler and
// Writer.MethodNotAllowedHandler (chi: r.NotFound, r.MethodNotAllowed). WriteJSON writes a success:
// the value is marshalled before anything is sent, with Content-Type, nosniff and Content-Length, so a
// value that cannot be marshalled is the opaque 500, never a 200 with half a body.
//
// # Strict request bodies
//
// Decode reads a body strictly (docs/decisions.md D7, D8):
//
//	415 unsupported_media_type  a non-empty body not declared application/json or application/<x>+json
//	                            (charset=utf-8 the only parameter), a missing Content-Type included;
//	                            with Accept-Post or Accept-Patch. RequireJSON is the check alone.
//	400 body_missing            an empty body
//	413 body_too_large          over DecodeOptions.MaxBytes (1 MiB)
//	400 malformed_json          a syntax error, at its byte offset
//	400 duplicate_member        a member given twice (encoding/json would keep the last)
//	400 unknown_field           a member the destination does not have, a name that differs from a
//	                            field's only in case included (encoding/json would take it)
//	400 invalid_utf8            a string that is not UTF-8 or holds an escaped lone surrogate
//	400 wrong_type              a value of the wrong type, at its JSON Pointer
//	400 trailing_data           anything after the value
//
// Requiring a JSON media type means a browser cannot send the request cross-site as a CORS simple
// request, and a body whose type is not declared is never guessed at. The checks are one pass over the
// bytes, guided by the destination's type, before encoding/json decodes: BenchmarkDecodeStrict
// measures them beside BenchmarkDecodeEncodingJSON. ParseQuery is the strict counterpart for query
// strings: a malformed escape is a located 400, never a parameter silently dropped.
//
// # Every error a problem
//
// Writer.Recover turns a handler's panic into the opaque 500 problem instead of a dropped connection.
// What Go's net/http answers before any handler runs — a request line it cannot parse, headers over
// MaxHeaderBytes (431) — cannot be a problem; docs/decisions.md D9 lists these exceptions.
//
// # Using it in a handler
//
// Handlers build problems with the builders (Invalid, MissingField, MissingHeader, NotFound,
// Unauthenticated, RateLimited, …) or collect several violations with a Collector, and render them with
// Write, which turns any other error into an opaque 500, as createOrder above does. Wrap the server
// in WithRequestID so that every response and problem carries the request's ID, and answer successes
// with WriteJSON.
//
// # Observing
//
// Writer.Hooks are told about every problem written — its status, code, explicit type and number of
// violations, never its detail — so that a team can count its 4xx and 5xx by cause. Set them on the
// service's Writer installed with Writer.Handler and they see the problems of every package below,
// since a Writer whose Hooks is nil takes the ones in the request context. Hooks is a struct of
// optional funcs, like net/http/httptrace.ClientTrace: a field left nil is skipped, and a field added
// later is nil in hooks written before it. With no Hooks nothing is called and writing a problem
// costs nothing more. The otelconv module fills them with OpenTelemetry:
//
//	tel, _ := otelconv.New(nil)
//	problems := apierror.Writer{TypeBase: "https://payments.example/problems/", Hooks: tel.APIError()}
//
// # Clients and tests
//
// Parse reads a problem response back into an *Error. Check and CheckResponse tell a product team's own
// tests whether an error response conforms: problem+json, a type that is a URI reference, a specific
// snake_case code, a request_id matching X-Request-Id, a detail that is more than a stock phrase, and,
// for a 4xx, the failing input named with its reason. A generic body such as
// {"error":"invalid request"} fails it.
package apierror
