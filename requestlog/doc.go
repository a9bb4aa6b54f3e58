// Package requestlog records every request a service serves through the library's middleware, so
// that support can answer "what happened to request req_…?": who sent it (the API key's ID and its
// owner), what it was (method, route pattern, API version, Idempotency-Key), and what became of it
// (status, problem code, replayed or not, latency). It never records a body, a query string, a header
// value other than those, or a credential.
//
// # Wiring
//
// The Log's middleware goes near the outside of the chain: inside apierror.WithRequestID, whose ID
// names each entry, and outside authentication, so that refused requests are recorded too. The
// library's own middlewares tell it what they learn, at no cost when no Log is mounted: the
// apikey.Authenticator the key and its owner, the versioning.Router the version, the idempotency
// Middleware the key and whether it replayed, apierror's Writer the problem's code, and
// apierror.Writer.ServeMux the pattern that routed the request. With another router, Options.Route
// names the pattern.
//
//	store, err := pgstore.NewRequestLogStore(pool, nil) // or nil Options.Store: in memory
//	reqlog, err := requestlog.New(&requestlog.Options{Store: store})
//	reads, err := requestlog.NewRequestsHandler(store, apikey.RequestScope, nil)
//	// (each err checked: none panics)
//
//	mux := http.NewServeMux()
//	mux.HandleFunc("POST /v1/orders", createOrder)
//	reads.Register(mux, "v1") // GET /v1/requests, GET /v1/requests/{request_id}
//
//	problems := apierror.Writer{TypeBase: "https://payments.example/problems/"}
//	var h http.Handler = problems.ServeMux(mux) // notes "POST /v1/orders" as the route
//	h = router.Handler(h)                       // versioning: the version
//	h = idem.Handler(h)                         // idempotency: the key, a replay
//	h = auth.Handler(h)                         // apikey: the key's ID and owner
//	h = problems.Recover(h)                     // a panic is recorded as the 500 it becomes
//	h = reqlog.Handler(h)
//	srv := &http.Server{Handler: apierror.WithRequestID(problems.Handler(h))}
//
//	// At shutdown: stop serving, then write what the log holds.
//	_ = srv.Shutdown(ctx)
//	_ = reqlog.Close(ctx)
//
// The owner of an entry is the scope of the principal the Authenticator admitted
// (apikey.Principal.Scope, "live:lic_42"), and the read API's caller function must name owners the
// same way (apikey.RequestScope does). A request the Authenticator refused has no owner: it is
// recorded, for operators, and no caller of the API sees it.
//
// # Cost
//
// The middleware allocates one small value per request and appends the entry to a bounded buffer
// (Options.BufferSize) under a lock; a background flusher, woken once per batch rather than once per
// request, writes batches to the Store when one is full (Options.BatchSize) or at every
// Options.FlushInterval, and removes entries older than
// Options.Retention (7 days by default) in bounded steps. A request never waits for the Store: when
// the buffer is full its entry is dropped and counted (Log.Stats, Stats.Dropped). A batch the Store
// refuses is kept and tried again at the next tick (Insert skips an entry already stored, so a write
// that failed late stores nothing twice); meanwhile the buffer fills, and drops what comes past it.
// Close writes what is buffered; what the Store still refuses then is lost, counted (Stats.Failed)
// and logged.
//
// # Read API
//
// RequestsHandler serves one owner's entries, newest first:
//
//	GET /v1/requests?status=4xx&limit=2
//
//	HTTP/1.1 200 OK
//	Content-Type: application/json
//	Cache-Control: no-store
//
//	{"object":"list","has_more":true,"data":[
//	  {"object":"request","id":"req_2vq4mxd1k8c0f6hz7t3w9bn5ya","api_key":"key_…","method":"POST",
//	   "route":"POST /v1/orders","status":409,"code":"idempotency_key_in_use","idempotency_key":"order-7",
//	   "replayed":false,"version":"v2","latency_ms":3,"created":1767225661},
//	  {"object":"request","id":"req_…","api_key":"key_…","method":"GET","route":"GET /v1/orders/{id}",
//	   "status":404,"code":"order_not_found","idempotency_key":null,"replayed":false,"version":"v2",
//	   "latency_ms":1,"created":1767225659}]}
//
//	GET /v1/requests/req_2vq4mxd1k8c0f6hz7t3w9bn5ya    one entry, the same object
//
// api_key, route, code, idempotency_key and version are null when the request had none; created is
// when the request arrived, in Unix seconds, and latency_ms how long it took. The list's parameters,
// each optional:
//
//	status          a status (404) or a class of them (4xx)
//	code            a problem code
//	api_key         an API key's ID (key_…)
//	route           a route pattern ("POST /v1/orders")
//	since, until    Unix seconds: entries at or after since, before until
//	limit           1–100, default 20
//	starting_after  the id of the last entry of the previous page, as the library's other lists take
//
// A bad parameter is a 400 problem located at it (query_repeated, not_an_integer, out_of_range,
// range_inverted, invalid_cursor, invalid_value); parameters the list does not know are ignored. An
// ID another owner's request has, or none has, is the same 404 request_not_found. Clients must ignore
// members they do not know: new ones may appear.
package requestlog
