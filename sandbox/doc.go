// Package sandbox is the platform's credentials and environments: API keys that say which
// environment they belong to, the issuer that hands them out when a technical evaluation starts, the
// authentication middleware, environment-scoped storage, the production rate-limit hook (and the
// sandbox's absence of one), the sandbox-only controls, and a transport that injects webhook faults so
// consumer developers can prove their gap recovery. One build serves both environments: the
// environment comes from the API key alone, and sandbox and production data never mix.
//
// # Keys and credentials
//
// An API key is "sk_sandbox_" or "sk_live_" followed by 40 characters of lowercase base32: 160 random
// bits from crypto/rand and a 40-bit checksum (truncated SHA-256 over the prefix and the random part):
//
//	sk_sandbox_q3vbx2kfm7hd4w6yqzj5nrt2aoclp8…   (illustrative)
//
// A scanner finds leaked keys by the prefix; ParseKey rejects a typo, a truncation or a sandbox key
// relabelled sk_live_ by its checksum before any lookup (ErrKeyMalformed, ErrKeyChecksum). Keys are
// stored only as their SHA-256 (KeyHash) in a CredentialStore: MemoryCredentialStore here,
// pgstore.CredentialStore on PostgreSQL, both checked by sandbox/credentialtest. A plain hash is
// enough because the key is 160 random bits, not a password; the hash the store returns is compared
// again in constant time. Key, Credentials and Redact keep keys and secrets out of logs.
//
// Issuer.Issue(ctx, Evaluation{Licensee: …}) returns Credentials: the API key, a webhook signing
// secret ("whsec_…", webhook.NewSecret), the environment's base URL and the expiry (30 days by
// default in the sandbox; production keys issued with Environment: Live do not expire unless told).
// Issuer.Revoke revokes one key by its ID, EndEvaluation all of a licensee's sandbox keys.
//
// # Authentication
//
// Requests carry "Authorization: Bearer <API_KEY>". The Authenticator puts the resolved Principal
// (licensee, environment, key ID) in the request context, where FromContext reads it; Principal.Scope
// ("sandbox:lic_42") is what keeps idempotency records and version pins per credential. Failures are
// RFC 9457 problems (package apierror), all 401 with an RFC 6750 §3 challenge that names the realm
// (AuthOptions.Realm, by default svcplatform):
//
//	missing header           api_key_missing          Bearer realm="svcplatform"
//	another scheme (Basic …) auth_scheme_unsupported  Bearer realm="svcplatform"
//	not one "Bearer <key>"   api_key_malformed        Bearer realm="svcplatform", error="invalid_request"
//	bad shape or checksum    api_key_malformed        Bearer realm="svcplatform", error="invalid_token"
//	unknown/expired/revoked  api_key_invalid          Bearer realm="svcplatform", error="invalid_token"
//
// Each but the last is located at header Authorization; the last is one identical body for all three.
//
// No response or log line contains the key. A failing CredentialStore is a 503 with Retry-After,
// never a 401 that would make a client throw a good key away.
//
// # Environments
//
// Everything a product stores must be scoped by the principal: Principal.Scope ("sandbox:lic_42") is
// the licensee and the environment, so data written with a sandbox key is invisible to a production
// key of the same licensee, and the reverse, when the application keeps its records under it.
//
// # Limits
//
// The sandbox has no rate ceiling: RateLimit never consults its Limiter for a sandbox principal, so a
// load test against the sandbox measures the build, not a throttle. In production the Limiter hook
// decides — TokenBucket is one token bucket per key, bounded by an LRU — and a refused request gets
// 429 rate_limited with Retry-After in seconds.
//
// The limiter knows nothing of principals: RateLimitOptions.Key names the caller each request counts
// as. Its default, PrincipalKey, is the principal's licensee and environment, and no key at all for a
// sandbox principal. A team with its own authentication passes its own KeyFunc (the user or account its
// middleware put in the context) and uses the same RateLimit and TokenBucket:
//
//	bucket, err := sandbox.NewTokenBucket(100, 200, nil)
//	limit, err := sandbox.NewRateLimit(bucket, &sandbox.RateLimitOptions{
//		Key: func(r *http.Request) (string, error) { return "user:" + myauth.User(r.Context()), nil },
//	})
//
// # Observing
//
// AuthOptions.Observer and RateLimitOptions.Observer take one Observer, told the result of every
// authentication (ok, missing, scheme_unsupported, malformed, checksum_mismatch, unknown, expired,
// revoked, unavailable, environment_mismatch — the client sees one 401 for unknown, expired and
// revoked; the observer tells them apart) and of every rate-limit check (allowed, exempt, refused,
// no_key, failed_open, failed_closed), with the environment and licensee but never a key. It runs on
// the request's goroutine and must not block; with no Observer nothing is called, at no cost. The
// otelconv module implements it with OpenTelemetry (Telemetry.Sandbox).
//
// # Sandbox controls
//
// Controls serve, for sandbox keys only:
//
//	POST   /v1/sandbox/events                          {"type":"order.created","endpoint":"we_…","data":{…}} (all optional)
//	PUT    /v1/sandbox/webhook_endpoints/{id}/faults   {"drop":0.2,"duplicate":0.1,"reorder":0.1,"bad_signature":0.05,"delay":0.1,"delay_ms":2000}
//	DELETE /v1/sandbox/webhook_endpoints/{id}/faults
//	POST   /v1/sandbox/reset
//
// A production key gets exactly the 404 of an unknown route on every one of them. Fault rates are in
// [0, 1] and delay_ms at most 30000; violations are 400 problems located at the member (/drop, …).
// The application wires the controls through Hooks; a hook refuses with a 4xx *apierror.Error (a
// quota reached, an event too large) and must then have done nothing. Behind the idempotency
// middleware, every refusal — invalid input, an endpoint that is not the caller's, a hook's 4xx — is
// released rather than stored as the Idempotency-Key's response (idempotency.NotPerformed), so the
// same key runs the request once its cause is gone; a 5xx is stored like any completed answer. FaultTransport, the webhook producer's transport,
// applies the faults per endpoint: drop (answer 200, send nothing), duplicate, reorder (hold until
// the endpoint's next delivery, HoldFor, Flush or Close), delay and bad signature (every v1
// corrupted). Its randomness can be seeded for reproducible runs. Package sandbox/sandboxtest wraps
// all of this in an in-process producer for consumers' own Go tests.
//
// # Example
//
// A server that issues an evaluation's credentials, authenticates, limits production only, scopes
// its data and serves the controls:
//
//	issuer, err := sandbox.NewIssuer(nil, &sandbox.IssuerOptions{SandboxBaseURL: "https://sandbox.example.com"})
//	creds, err := issuer.Issue(ctx, sandbox.Evaluation{Licensee: "lic_42"})
//	// hand creds.APIKey, creds.WebhookSecret, creds.BaseURL and creds.ExpiresAt to the evaluator
//
//	faults := &sandbox.FaultTable{} // read by the webhook producer's FaultTransport
//	problems := apierror.Writer{TypeBase: "https://api.example.com/problems/"}
//
//	mux := http.NewServeMux()
//	mux.HandleFunc("POST /v1/orders", func(w http.ResponseWriter, r *http.Request) {
//		p, _ := sandbox.FromContext(r.Context())
//		// … store the order under p.Scope(): the caller's licensee and environment
//	})
//	controls, err := sandbox.NewControls(sandbox.Hooks{
//		SetFaults: func(ctx context.Context, p sandbox.Principal, id string, f sandbox.Faults) error {
//			if !ownsEndpoint(ctx, p, id) {
//				return sandbox.ErrUnknownEndpoint
//			}
//			return faults.Set(id, f)
//		},
//		Reset: func(ctx context.Context, p sandbox.Principal) error {
//			return orders.DeleteScope(ctx, p.Scope()) // the application's own store
//		},
//	}, &sandbox.ControlsOptions{NotFound: problems.NotFoundHandler()})
//	mux.Handle("/v1/sandbox/", controls) // a production key gets the same 404 as an unknown route
//
//	bucket, err := sandbox.NewTokenBucket(100, 200, nil)
//	limit, err := sandbox.NewRateLimit(bucket, nil) // by principal; never in the sandbox
//	auth, err := sandbox.NewAuthenticator(issuer, nil)
//	// (each err checked: a constructor refuses what it cannot honour, never panics)
//	api := auth.Handler(limit.Handler(problems.ServeMux(mux)))
//	http.ListenAndServe(addr, apierror.WithRequestID(problems.Handler(api)))
//
// The idempotency and versioning middlewares, which do not import this package, take the principal
// from the context through their hooks:
//
//	idempotency.Options{Scope: sandbox.RequestScope, …}
//	versioning.Options{
//		Licensee: func(r *http.Request) (string, bool) {
//			p, ok := sandbox.FromContext(r.Context())
//			return p.Scope(), ok // one pin per licensee and environment
//		},
//		AllowOverride: func(r *http.Request, _, _, _ string) bool { return sandbox.InSandbox(r) },
//	}
package sandbox
