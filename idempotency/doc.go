// Package idempotency makes mutating requests safe to retry: a request repeated with the same
// Idempotency-Key gets the original response, and the action is not performed again — "a replay
// creates no second order". It follows draft-ietf-httpapi-idempotency-key-header and Stripe's
// behaviour, as fixed by docs/decisions.md D2.
//
// A service that runs several replicas:
//
//	store, err := redisstore.NewIdempotencyStore(ctx, rdb, &redisstore.IdempotencyStoreOptions{
//		MaxRecordsPerScope: 100_000, // one tenant cannot fill the Redis every tenant shares
//	}) // fails unless the Redis runs with maxmemory-policy noeviction
//	if err != nil {
//		return err
//	}
//	m, err := idempotency.New(&idempotency.Options{
//		Store:  store, // shared by every replica
//		Sealer: ring, // seal.NewRing(keys...): nothing readable, nothing changeable at rest
//		Scope: func(r *http.Request) (string, error) {
//			p, ok := auth.PrincipalFrom(r.Context())
//			if !ok {
//				return "", apierror.Unauthenticated("credential_missing", "header Authorization is required")
//			}
//			return p.Licensee + "/" + p.Environment, nil
//		},
//		Logger: logger,
//	})
//	if err != nil {
//		return err // an option it cannot honour, named: a Retention within the Lease, GET in Methods, …
//	}
//	mux.Handle("POST /v1/orders", m.Handler(http.HandlerFunc(createOrder)))
//	…
//	_ = srv.Shutdown(ctx)
//	_ = m.Close(ctx) // lets completions the store refused land before the process exits
//
// and on the client:
//
//	client := &http.Client{Transport: &idempotency.Transport{}}
//	resp, err := client.Post(base+"/v1/orders", "application/json", strings.NewReader(body))
//
// The package has four parts: the Middleware (net/http) and its decision API (Begin, for other
// routers and RPC frameworks); the storage contract (package driver) with an in-memory store
// (package memstore, the default) and a conformance suite (package storetest) that the PostgreSQL
// and Redis adapters also run; and the client side, NewKey and Transport.
//
// # Wire behaviour
//
// The middleware governs POST, PUT, PATCH and DELETE (Options.Methods); other methods pass through.
// For a governed request, checked in this order:
//
//	Request                                             Response
//	--------------------------------------------------  ------------------------------------------------
//	no credential (default Scope: Authorization)        401 credential_missing (header Authorization),
//	                                                        WWW-Authenticate: Bearer realm="svcplatform"
//	no Idempotency-Key                                  400 idempotency_key_missing  (header Idempotency-Key)
//	key empty, over 255 bytes, not visible ASCII        400 idempotency_key_invalid  (header Idempotency-Key)
//	  (0x21-0x7E), or the header sent twice
//	body over MaxRequestBytes (1 MiB)                   413 body_too_large (body)
//	store unreachable, or no answer within              503 service_unavailable, Retry-After; the handler
//	  StoreTimeout (5 s)                                    does not run (unless FailOpen)
//	new key, the credential's scope at its quota        429 idempotency_quota_exceeded (header
//	  (memstore.Options.MaxRecordsPerScope)                 Idempotency-Key), Retry-After (60 s)
//	new key                                             the handler runs; its response is stored, 5xx
//	                                                        included (unless ReleaseServerErrors)
//	  the handler marked its 4xx NotPerformed           the key is released: nothing stored
//	  the handler marked its response Secret            Cache-Control: no-store; stored sealed
//	                                                        (Options.Sealer) or without its body
//	  the store fails to store the response             the client gets the response; the claim is kept
//	                                                        (renewed) and the completion retried until it
//	                                                        lands; duplicates meanwhile get 409 (or 503)
//	same key, same request, still running               409 idempotency_key_in_use, Retry-After
//	same key, same request, completed                   the original status, body and allow-listed
//	                                                        headers, plus Idempotent-Replayed: true and
//	                                                        Cache-Control: no-store (unless stored)
//	  with Options.Sealer, the record is not sealed     the opaque 500 problem; not replayed, the
//	    or does not open (ErrRecordRefused)                 handler not run again, the record kept
//	same key, different method/path/query/body          422 idempotency_key_reused (header Idempotency-Key),
//	  (in flight, completed, or lease expired)              checked on every path
//	same key, running, but its lease expired            409; the key is marked and the owner gets one
//	  (the owner crashed, stalled, or lost the store)       more lease to renew or complete it
//	same key, lease and the extra lease expired         taken over: the handler runs; the stale
//	                                                        owner's late completion is refused
//	same key after Retention (24 h)                     a new request
//	handler panics                                      the key is released, the panic goes on
//	handler's own SQL fails (Transactor)                500 internal_error, nothing committed, the key free
//	response body over MaxResponseBytes (1 MiB)         sent in full; replays carry the status and
//	                                                        headers, an empty body, Idempotent-Body-Omitted: true
//
// Problems are RFC 9457 bodies written by package apierror, with the request's request_id; none
// echoes a key's or credential's value. Requests rejected before a claim (400, 401, 409, 413, 429,
// 503) store nothing. The replayed headers are Content-Type, Location, Cache-Control and
// Options.ReplayHeaders; others may be per-request (Date, X-Request-Id) or sensitive (Set-Cookie)
// and are not replayed.
//
// The fingerprint (NewFingerprint) is SHA-256 over the method, the escaped path, the canonical
// query (parameters sorted by name) and the SHA-256 of the body: by default a retry must send the
// body's bytes again, exactly. Options.Fingerprint replaces it: CanonicalJSONFingerprint takes the
// body's JSON value instead of its bytes (member order, whitespace, string escapes and number forms
// do not count, RFC 8785's rules with numbers compared by exact value; a body that is not strict JSON
// counts by its bytes), and a team's own function may decide what makes two requests the same.
// Whatever decides, it decides on every path: the claim, the in-flight 409, the replay.
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
// Each governed request makes one atomic claim (driver.Store.Claim, never check-then-lock): it
// either creates an in-flight record that this request owns under a fresh fencing token, or reports
// the record that exists — in flight, completed, or with another fingerprint. Only the owner runs
// the handler. The claim holds a lease (Options.Lease, 30 s), renewed every Lease/3 while the
// handler runs, and at every Lease/6 after a renewal failed. Renewals of different keys never wait
// on each other: each runs on its own goroutine with its own deadline, so a renewal stuck on a dead
// connection delays no other key's. Every store call is bounded by Options.StoreTimeout.
//
// When the store fails after the handler ran (PostgreSQL or Redis unreachable, Redis out of memory),
// the client still gets its response, and the process keeps the claim: it goes on renewing the lease
// and retries the completion with backoff (50 ms doubling to 1 s, jittered) until it lands, the claim
// is lost, or Close gives up. Duplicates meanwhile find the key in flight (409) or the store down
// (503); none runs the handler.
//
// A lapsed lease is not taken over at once: the first claim that finds it only marks the record and
// grants the owner one more lease (driver.Store.Claim). An owner that was merely cut off from the
// store (an outage longer than the lease) renews or completes within it as soon as the store is
// back, and the mark is forgotten; only an owner that let both leases pass — it crashed or stalled
// — is taken over with a new token. The stale owner's Complete then fails with ErrLeaseLost (its
// client still gets its response, which is not stored, and the event is logged); with
// Options.CancelOnLeaseLoss its context is also cancelled. A handler that panics releases its key,
// so the retry runs at once. The lease is not the retention: a crashed request blocks its key for
// two leases (60 s by default) only.
//
// # What each guarantee rests on
//
//	Guarantee                                     Rests on
//	--------------------------------------------  ---------------------------------------------------
//	concurrent duplicates run once                the store's atomic Claim (every store; storetest)
//	duplicates across replicas run once           one store shared by the replicas (pgstore,
//	                                                  redisstore); a memstore.Store is per process
//	a completed request is never run again        the record outliving Retention: PostgreSQL, Redis
//	  within Retention                                with maxmemory-policy noeviction (redisstore
//	                                                  refuses others) and persistence (AOF) across
//	                                                  restarts; a memstore.Store dies with its process
//	a store outage after the handler ran does     the owning process staying alive until the store is
//	  not run it again                                back (it renews and retries; see Close)
//	a slow handler does not run twice             renewal every Lease/3 and the two-step take-over
//	a crash never leaves work done but            transactional mode (Options.Transactor): the
//	  unrecorded                                      handler's writes and the record commit together
//	one tenant cannot fill shared capacity        per-scope quotas (memstore, redisstore)
//	no stored secret in plain text                Options.Sealer, or Secret marks (stored without body)
//	a writer of the store cannot choose a replay  Options.Sealer: status, headers and body sealed
//	                                                  together, bound to scope and key; fails closed
//	an outside system's effect happens once       the handler passing DownstreamKey to that system's
//	  when the handler runs again                     own idempotency key (a payment provider's, say)
//
// The one window left in the ordinary mode: the process that ran the handler dies (or is cut off
// from the store while the retries are not) after the handler's side effects and before its response
// is stored, and stays away for the lease and the extra lease. A retry then runs the handler again.
// No lease can close that window, since nothing but the handler's own storage knows the work was
// done; the transactional mode closes it for the handler's own database writes, because the work
// and the record commit together or not at all. Calls to outside systems — in either mode — are
// made once by passing them DownstreamKey(r.Context(), "charge"): a key derived from the request's
// scope, its Idempotency-Key and the call's name alone, so the run that takes over, on any replica,
// sends the same key, and the outside system, deduplicating by it, does the work once. The key is
// an opaque UUID that reveals neither the client's key nor its scope (Options.DownstreamSecret).
//
// # Refused requests and secrets
//
// A handler that refuses a request before doing anything (its input failed validation) calls
// NotPerformed on its 4xx: the key is released instead of stored (Stripe's rule), so junk does not
// fill the store and a corrected retry may reuse the key. A handler whose response carries a secret
// shown once (an API key, a signing secret) calls Secret: the response is not cached, and its record
// is stored sealed (Options.Sealer) or without its body. Options.Sealer seals every stored record —
// status, headers and body as one — with AES-256-GCM under a key ring (seal.NewRing): keys rotate,
// records sealed with older keys still open, and a sealed record is bound to its scope and key.
// With a Sealer the middleware trusts nothing else: a record that is not sealed, or does not open, is
// refused (ErrRecordRefused) with the opaque 500 — neither replayed nor run again — and left in
// place. Records stored before a Sealer was set, or by versions that sealed the body alone, are
// refused the same way until their retention ends.
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
// response (a memstore.Store over its byte budget), the same body-less record is stored instead.
//
// # Stores
//
// The storage contract, package driver, is small — a Store, and a Transactor for the transactional
// mode — and package storetest is its conformance suite; a team that only makes its requests
// idempotent never imports either. memstore.Store (the default) is sharded, bounded (MaxRecords in
// all, MaxRecordsPerScope per credential) and expires its records itself; it is right for a single
// replica. Replicas that share traffic must share a store: pgstore and redisstore (nested modules)
// implement it on PostgreSQL and Redis. pgstore's IdempotencyStore.RunCleanup removes expired rows
// in bounded batches; redisstore refuses a Redis that may evict records.
//
// With Options.Transactor the claim, the handler's own database writes and the stored response
// commit in one transaction (pgstore provides the Transactor): a crash before the commit leaves
// nothing behind, and the response is buffered until the commit so that a client never sees the
// result of work that then failed to commit. A client that disconnects does not stop its request
// (Stripe's rule): the transaction runs under the request's context without its cancellation, so the
// handler finishes, its writes and response commit together, and the client's retry with the same
// key replays that response without running the handler again. A handler that needs a bound sets its
// own deadline. When the handler's own SQL fails (a statement it sent failed and left the
// transaction aborted, or its writes break a constraint checked at the commit), nothing is committed,
// the key included, and the client gets the opaque 500 (apierror.Internal) rather than a 503 "retry":
// the same request would fail the same way, and a corrected one may use the same key. A failure of
// the claim, the completion or the commit themselves (the database unreachable) is the store's: 503
// with Retry-After, nothing committed.
//
// # Without net/http
//
// Middleware.Begin decides about a Request (scope, key, fingerprint) and returns an Attempt: Replay
// (with the stored Response), InUse or Reused (with the problem to answer), or Execute — the
// caller owns the key, runs the operation under Attempt.Context, and calls Complete or Release.
//
// Three enums name three views of one request, each for its own reader. driver.Status is the stored
// record's state as a store reports it (claimed, in flight, completed): the vocabulary of store
// implementations. Decision is what Begin tells its caller to do (execute, replay, in_use, reused),
// derived from the Status after the fingerprint and the seal are checked: a closed set to switch
// on. Outcome is what became of the request (executed, replayed, in_use, reused, rejected, quota,
// store_error, failed_open, lease_lost, released), which the Hooks are told and metrics count: an
// open set that grows with the middleware. Where two of them name one fact, they use one word.
// # Client side
//
// NewKey returns a UUID v4 key. Transport is an http.RoundTripper that adds a key to mutating
// requests that lack one and retries network errors, 409, 429 and 5xx with the same key and body:
// after exactly Retry-After (seconds or an HTTP-date; a 429 quota answer carries one) up to
// MaxRetryAfter, or else with exponential backoff and jitter, within MaxAttempts and the request's
// context (a wait that would outlast its deadline returns the response at once); a replayed response
// is final.
//
// # Observability
//
// Middleware.Stats counts executions, replays, conflicts, reused keys, rejections, store errors,
// lost leases, releases, panics, renewals, quota refusals and completion retries, and shows the
// completions pending now. Options.Logger receives store errors, refused stale
// completions and panics, with the idempotency key (never the credential).
//
// Options.Hooks, a struct of optional funcs in the manner of net/http/httptrace.ClientTrace, are
// told each governed request's Outcome once (executed, replayed, in_use, reused, rejected, quota,
// store_error, failed_open, lease_lost, released), every store call with its operation, backend,
// duration and error, and every handler run with its status and duration. The Start hooks return
// the context the work goes on in, so a tracer can put spans there. Any field may be nil, and hooks
// added in later versions are nil in Hooks written before them. The otelconv module fills them with
// OpenTelemetry; without Hooks nothing is measured and nothing allocated
// (TestHooksCostNothingWhenUnset). The hooks never see a key or a scope.
package idempotency
