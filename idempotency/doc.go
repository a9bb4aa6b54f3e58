// Package idempotency makes mutating requests safe to retry: a request repeated with the same
// Idempotency-Key gets the original response, and the action is not performed again — "a replay
// creates no second order". It follows draft-ietf-httpapi-idempotency-key-header and Stripe's
// behaviour, as fixed by DECISIONS.md D2.
//
// The package has four parts: the Middleware (net/http) and its decision API (Begin, for other
// routers and RPC frameworks); the Store contract with an in-memory implementation (MemoryStore) and
// a conformance suite (package storetest) that the PostgreSQL and Redis adapters also run; and the
// client side, NewKey and Transport.
//
// # Wire behaviour
//
// The middleware governs POST, PUT, PATCH and DELETE (Options.Methods); other methods pass through.
// For a governed request, checked in this order:
//
//	Request                                             Response
//	--------------------------------------------------  ------------------------------------------------
//	no credential (default Scope: Authorization)        401 credential_missing (header Authorization),
//	                                                        WWW-Authenticate: Bearer
//	no Idempotency-Key                                  400 idempotency_key_missing  (header Idempotency-Key)
//	key empty, over 255 bytes, not visible ASCII        400 idempotency_key_invalid  (header Idempotency-Key)
//	  (0x21-0x7E), or the header sent twice
//	body over MaxRequestBytes (1 MiB)                   413 body_too_large (body)
//	store unreachable                                   503 service_unavailable, Retry-After; the handler
//	                                                        does not run (unless FailOpen)
//	new key                                             the handler runs; its response is stored, 5xx
//	                                                        included (unless ReleaseServerErrors)
//	same key, same request, still running               409 idempotency_key_in_use, Retry-After
//	same key, same request, completed                   the original status, body and allow-listed
//	                                                        headers, plus Idempotent-Replayed: true
//	same key, different method/path/query/body          422 idempotency_key_reused (header Idempotency-Key),
//	  (in flight, completed, or lease expired)              checked on every path
//	same key, running, but its lease expired            taken over: the handler runs; the stale
//	  (the first process crashed or stalled)                owner's late completion is refused
//	same key after Retention (24 h)                     a new request
//	handler panics                                      the key is released, the panic goes on
//	response body over MaxResponseBytes (1 MiB)         sent in full; replays carry the status and
//	                                                        headers, an empty body, Idempotent-Body-Omitted: true
//
// Problems are RFC 9457 bodies written by package apierror, with the request's request_id; none
// echoes a key's or credential's value. Requests rejected before a claim (400, 401, 409, 413, 503)
// store nothing. The replayed headers are Content-Type, Location and Options.ReplayHeaders; others
// may be per-request (Date, X-Request-Id) or sensitive (Set-Cookie) and are not replayed.
//
// The fingerprint (NewFingerprint) is SHA-256 over the method, the escaped path, the canonical
// query (parameters sorted by name) and the SHA-256 of the body.
//
// # Scope
//
// Records are kept per scope: the same key sent with two credentials is two requests, and one client
// can never receive another's stored response, however guessable its keys. Options.Scope maps a
// request to its scope. The default is the hex SHA-256 of the Authorization header (the credential
// itself is never stored or logged) and answers 401 when there is none, so services that authenticate
// otherwise — or not at all — must set Scope, typically to the licensee and environment of the
// principal that the authentication middleware put in the request context.
//
// # Exactly once: claims, leases, fencing
//
// Each governed request makes one atomic Store.Claim (never check-then-lock): it either creates an
// in-flight record that this request owns under a fresh fencing token, or reports the record that
// exists — in flight, completed, or with another fingerprint. Only the owner runs the handler. The
// claim holds a lease (Options.Lease, 30 s), renewed every Lease/3 while the handler runs by one
// goroutine per Middleware that exits when no request is in flight; so only a crashed or stalled
// process lets a lease lapse, after which a retry takes the key over with a new token. The stale
// owner's Complete then fails with ErrLeaseLost (its client still gets its response, which is not
// stored, and the event is logged); with Options.CancelOnLeaseLoss its context is also cancelled. A
// handler that panics releases its key, so the retry runs at once. The lease is not the retention:
// a crashed request blocks its key for the lease only.
//
// # Capturing the response
//
// The handler's ResponseWriter records everything on its way to the client: Write, WriteString,
// ReadFrom (io.Copy, which would otherwise sendfile past the capture) and Flush, which streams what
// was written so far. It implements Unwrap for http.ResponseController. Hijacking is refused
// (ErrHijackRefused): bytes written to a hijacked connection cannot be replayed, so such endpoints
// must not be governed. A response over MaxResponseBytes still streams to its client in full; its
// record keeps the status and the allow-listed headers without the body, so a retry learns the
// outcome (Location, say) and never runs the handler a second time. If the store refuses the full
// response (a MemoryStore over its byte budget), the same body-less record is stored instead.
//
// # Stores
//
// The Store interface is small and its contract is the conformance suite in package storetest.
// MemoryStore (the default) is sharded, bounded and expires its records itself; it is right for a
// single replica. Replicas that share traffic must share a store: pgstore and redisstore (nested
// modules) implement it on PostgreSQL and Redis.
//
// With Options.Transactor the claim, the handler's own database writes and the stored response
// commit in one transaction (pgstore provides the Transactor): a crash before the commit leaves
// nothing behind, and the response is buffered until the commit so that a client never sees the
// result of work that then failed to commit. The transaction runs under the request's context, so a
// client that goes away before the commit rolls it back as well: nothing was done, and its retry with
// the same key runs the operation once, as a crash would.
//
// # Without net/http
//
// Middleware.Begin decides about a Request (scope, key, fingerprint) and returns an Attempt: Replay
// (with the stored Response), InProgress or Mismatch (with the problem to answer), or Execute — the
// caller owns the key, runs the operation under Attempt.Context, and calls Complete or Release.
//
// # Client side
//
// NewKey returns a UUID v4 key. Transport is an http.RoundTripper that adds a key to mutating
// requests that lack one and retries network errors, 409 and 5xx with the same key and body, with
// exponential backoff and jitter, honouring Retry-After and the request's context; a replayed
// response is final.
//
// # Observability
//
// Middleware.Stats counts executions, replays, conflicts, reused keys, rejections, store errors,
// lost leases, releases, panics and renewals. Options.Logger receives store errors, refused stale
// completions and panics, with the idempotency key (never the credential).
//
// # Example
//
//	m := idempotency.New(&idempotency.Options{
//		Store: redisstore.NewIdempotencyStore(rdb, nil), // shared by every replica
//		Scope: func(r *http.Request) (string, error) {
//			p, ok := auth.PrincipalFrom(r.Context())
//			if !ok {
//				return "", apierror.Unauthenticated("credential_missing", "header Authorization is required")
//			}
//			return p.Licensee + "/" + p.Environment, nil
//		},
//		Logger: logger,
//	})
//	mux.Handle("POST /v1/orders", m.Handler(http.HandlerFunc(createOrder)))
//
// and on the client:
//
//	client := &http.Client{Transport: &idempotency.Transport{}}
//	resp, err := client.Post(base+"/v1/orders", "application/json", strings.NewReader(body))
package idempotency
