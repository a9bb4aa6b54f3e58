// Package server is the reference order server, importable so that the orderserver command and the
// one-command demo run the same code. It is the library wired together the way a product team
// would: read routes.go top to bottom for the middleware order, handlers.go for the handlers, and
// store.go for the Store (package pgserver has it on PostgreSQL, with the transactional outbox).
//
// # Routes
//
// Every route is under /v1/ (versioning), every error is an RFC 9457 problem (apierror), every
// response carries X-Request-Id, and every POST requires an Idempotency-Key (idempotency):
//
//	POST /v1/orders                                  Bearer API key; {"account","side"} → 201 order
//	GET  /v1/orders/{id}                             Bearer API key → 200 order; 404 for unknown and foreign ids alike
//	POST /v1/webhook_endpoints                       Bearer API key; {"url"} → 201 {"id":"we_…","url","secret":"whsec_…","api_version"}
//	GET  /v1/webhook_endpoints                       Bearer API key → 200 {"object":"list","data":[the endpoints, oldest first, without secrets],"has_more":false}
//	GET  /v1/webhook_endpoints/{id}/events           Bearer API key; ?from=&to=&limit= → 200 signed event list (range retrieval)
//	GET  /v1/webhook_endpoints/{id}/deliveries       Bearer API key; ?sequence=&outcome=&limit=&starting_after= → 200 attempt list (delivery history)
//	GET  /v1/api_keys                                Bearer API key → 200 the licensee's working keys in the key's environment, never a secret
//	POST /v1/api_keys                                Bearer API key; {"permissions":[…]} → 201 a new key, its secret shown once
//	GET, DELETE /v1/api_keys/{id}                    Bearer API key → 200 the key; DELETE revokes it now
//	POST /v1/api_keys/{id}/roll                      Bearer API key; {"expires_in":seconds} → 201 a new key with the same permissions; the old one ends then
//	GET  /v1/requests                                Bearer API key; ?status=&code=&api_key=&route=&since=&until=&limit=&starting_after= → 200 the request log, newest first
//	GET  /v1/requests/{request_id}                   Bearer API key → 200 the request whose answer carried this X-Request-Id; 404 for another licensee's
//	GET  /v1/version_pin                             Bearer API key → 200 {"object":"version_pin","version","previous_version","rollback_until",…}
//	POST /v1/version_pin                             Bearer API key; {"version"} → 200 upgraded, or rolled back within the window; 409 version_upgrade_final after it
//	GET  /v1/changelog                               any Bearer API key → 200 every version, newest first, with the changes it introduced
//	POST /v1/sandbox/credentials                     Bearer admin token → 201 {"api_key":"sk_sandbox_…","environment":"sandbox","expires_at":…}
//	POST /v1/sandbox/webhook_endpoints/{id}/faults   sandbox key; {"drop","duplicate","reorder","bad_signature","delay","delay_ms"} → 200
//	PUT, DELETE  same path                           the sandbox package's own methods for the same control
//	POST /v1/sandbox/events                          sandbox key; trigger a test event → 201
//	POST /v1/sandbox/reset                           sandbox key; delete the evaluation's orders → 204
//	GET  /v1/openapi.json                            no credential → 200 this version's OpenAPI 3.1 document (OpenAPIDocument)
//
// An order is {"id":"ord_…","object":"order","account":…,"side":"buy"|"sell","status":"created",
// "created":<unix>}; account is 1–64 of [A-Za-z0-9_-]. Each new order emits an order.created event,
// with the order as data, to every webhook endpoint of the same licensee and environment. A
// production key gets, on every sandbox route, exactly the 404 of an unknown route.
//
// # API keys and permissions
//
// A key is the full key (what IssueCredentials and the admin route hand out: every permission) or
// restricted to some of the API's permissions: orders:read and orders:write, webhook_endpoints:read
// and :write (the endpoints, their secret roll, statistics and the event catalogue), events:read
// (range retrieval, the delivery history) and events:write (resend, recover), api_keys:read and
// :write, requests:read (the request log), version_pin:read and :write, and sandbox:write (the
// sandbox controls); write includes read. The changelog needs a key but no permission. routes.go
// declares each route's permission once, next to its registration, and one guard in front of the
// API mux (permit) enforces it: a key without the permission gets 403 permission_denied, located at the
// Authorization header and naming it; a route without a declaration admits the full key only. The
// OpenAPI documents show each operation's permission, generated from the same declarations. The
// keys API is apikey.KeysHandler: a restricted key hands out only what it holds, another licensee's
// key is 404, and a roll's old key keeps working for expires_in (a day by default). Serve writes
// each key's last use (last_used_at, to the minute) off the request path.
//
// # Request log, version pin and changelog
//
// Every request is recorded in the request log (package requestlog; Config.RequestLog, on
// PostgreSQL with pgserver) under the X-Request-Id of its answer: the API key's ID, the route that
// served it as documented under its version ("POST /v1/orders"), the status and problem code, the
// Idempotency-Key and whether the answer was a replay, the version and the latency; never a body or a
// credential. Entries are written in batches off the request's path (at least once a second, and by
// Serve at shutdown) and kept 7 days; each licensee reads its own, in its key's environment.
// Config.DisableRequestLog turns recording off, to measure its cost.
//
// A licensee upgrades its version pin with POST /v1/version_pin, and may go back once within
// Config.RollbackWindow (72 hours by default); the pin shows previous_version and rollback_until,
// and afterwards the upgrade is final (409 version_upgrade_final at /version). GET /v1/changelog is
// read from Changes, the definitions the router reshapes older versions with.
//
// # Webhook endpoints
//
// Registration checks the URL with ssrf.URLPolicy: https for production keys, http allowed for
// sandbox keys, no user information or fragment, at most 2048 bytes, and a host that is neither a
// non-public address (loopback, private, link-local such as 169.254.169.254, …), nor a local-use
// name (localhost, *.internal, …), nor a numeric IPv4 form (2130706433, 0x7f.1); a refusal is a 400
// located at body /url with the URLError's code. Deliveries go through ssrf.NewTransport,
// which checks every address at dial time, after DNS resolution, ignores proxies and follows no
// redirect. WebhookOptions.SandboxGuard opens both, for sandbox keys only, for the addresses, ports
// and names it lists (a sandbox whose consumers run on loopback); LiveGuard does the same for
// production keys, whose endpoints are never checked against the sandbox's list. A listed name still
// reaches only listed addresses, and a delivery that only an allow-list let through is recorded in
// the history by its status, never its answer. Each licensee may register WebhookOptions.MaxEndpoints endpoints per
// environment (16 by default; past it, 422 webhook_endpoint_limit_reached), and its deliveries have
// at most PerOwner requests in flight (8), one per endpoint. GET /v1/webhook_endpoints lists the
// caller's endpoints in the order they were registered, in one page (the limit keeps it short), and
// without their signing secrets, which only the answer to a registration shows. The delivery history
// of an endpoint is GET …/deliveries (producer.DeliveriesHandler), visible to its owner only.
//
// # Storage
//
// Config's zero value keeps everything in memory, and this package imports no database driver.
// Package pgserver builds a Config on PostgreSQL (pgserver.Config): every replica sharing the
// database serves the same data, and a mutating request's claim, its writes (the order and its
// events) and its stored response commit in one transaction. Package storetest is the conformance
// suite every Store runs.
//
// # Example
//
//	srv, err := server.New(server.Config{BaseURL: "http://127.0.0.1:8080"})
//	if err != nil { … }
//	creds, err := srv.IssueCredentials(ctx, apikey.Sandbox) // a sandbox key for a new licensee
//	ln, err := net.Listen("tcp", "127.0.0.1:8080")
//	err = srv.Serve(ctx, ln) // until ctx ends, then a graceful shutdown
package server
