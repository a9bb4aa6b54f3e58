// Package apikey is the platform's API keys: keys that say which environment they belong to
// ("sk_sandbox_…", "sk_live_…"), the Issuer that hands them out when a technical evaluation starts,
// the Authenticator middleware that turns "Authorization: Bearer <key>" into a Principal, and the
// CredentialStore that keeps them, as hashes only. A complete server:
//
//	issuer, err := apikey.NewIssuer(nil, &apikey.IssuerOptions{SandboxBaseURL: "https://sandbox.example.com"})
//	creds, err := issuer.Issue(ctx, apikey.Evaluation{Licensee: "lic_42"})
//	// hand creds.APIKey, creds.WebhookSecret, creds.BaseURL and creds.ExpiresAt to the evaluator, once
//
//	mux := http.NewServeMux()
//	mux.HandleFunc("POST /v1/orders", func(w http.ResponseWriter, r *http.Request) {
//		p, _ := apikey.FromContext(r.Context()) // the licensee and environment the key resolved to
//		// … keep the order under p.Scope() ("sandbox:lic_42"), so the environments never mix
//	})
//	auth, err := apikey.NewAuthenticator(issuer, nil) // (each err checked: none panics)
//	problems := apierror.Writer{TypeBase: "https://api.example.com/problems/"}
//	http.ListenAndServe(addr, apierror.WithRequestID(problems.Handler(auth.Handler(mux))))
//
// The idempotency, versioning and rate-limit middlewares and the producer's handlers, which do not
// import this package, take the caller as a conventions.CallerFunc, behind the Authenticator:
//
//	idempotency.Options{Scope: apikey.RequestScope, …}       // records per licensee and environment
//	versioning.Options{Licensee: apikey.RequestScope, …}     // one pin per licensee and environment
//	ratelimit.New(bucket, apikey.RateLimitKey, nil)          // per licensee; never in the sandbox
//
// # Keys and credentials
//
// An API key is "sk_sandbox_" or "sk_live_" followed by 40 characters of lowercase base32: 160 random
// bits from crypto/rand and a 40-bit checksum (truncated SHA-256 over the prefix and the random part):
//
//	sk_sandbox_q3vbx2kfm7hd4w6yqzj5nrt2aoclp8…   (illustrative)
//
// A scanner finds leaked keys by the prefix; Parse rejects a typo, a truncation or a sandbox key
// relabelled sk_live_ by its checksum before any lookup (ErrMalformed, ErrChecksum). Keys are stored
// only as their SHA-256 (KeyHash) in a CredentialStore: MemoryCredentialStore here,
// pgstore.CredentialStore on PostgreSQL, both checked by apikey/credentialtest. A plain hash is
// enough because the key is 160 random bits, not a password; the hash the store returns is compared
// again in constant time. Key and Credentials print and log redacted ("sk_live_…wxyz"), so keys and
// secrets stay out of logs.
//
// Issuer.Issue(ctx, Evaluation{Licensee: …}) returns Credentials: the API key, a webhook signing
// secret ("whsec_…", webhook.NewSecret), the environment's base URL and the expiry (30 days by
// default in the sandbox; production keys issued with Environment: Live do not expire unless told).
// Issuer.Revoke revokes one key by its ID, EndEvaluation all of a licensee's sandbox keys.
//
// # Authentication
//
// Requests carry "Authorization: Bearer <API_KEY>". The Authenticator puts the resolved Principal
// (licensee, environment, key ID) in the request context with NewContext, where FromContext reads
// it; Principal.Scope ("sandbox:lic_42") is what keeps idempotency records, version pins and data per
// credential. Failures are RFC 9457 problems (package apierror), all 401 with an RFC 6750 §3
// challenge that names the realm (AuthenticatorOptions.Realm, by default svcplatform):
//
//	missing header           api_key_missing          Bearer realm="svcplatform"
//	another scheme (Basic …) auth_scheme_unsupported  Bearer realm="svcplatform"
//	not one "Bearer <key>"   api_key_malformed        Bearer realm="svcplatform", error="invalid_request"
//	bad shape or checksum    api_key_malformed        Bearer realm="svcplatform", error="invalid_token"
//	unknown/expired/revoked  api_key_invalid          Bearer realm="svcplatform", error="invalid_token"
//
// Each but the last is located at header Authorization; the last is one identical body for all three.
//
// No response or log line contains the key. A failing CredentialStore is a 503
// authentication_unavailable with Retry-After, never a 401 that would make a client throw a good key
// away.
//
// # Restricted keys, rolls and the keys API
//
// A key may be restricted to permissions, each "<resource>:read" or "<resource>:write" (write
// includes read), from the set the service declares in IssuerOptions.Permissions; the full key,
// Evaluation.Permissions nil, has them all. Each route names the permission it requires, once, next
// to the route:
//
//	mux.Handle("POST /v1/orders", auth.Require("orders:write", createOrder))
//
// A key without it gets 403 permission_denied, located at header Authorization, whose detail and
// required_permission member name the permission; Principal.Allows answers the same question in code.
//
// NewKeysHandler is the licensee's own API for its keys (Register mounts it): list them (never a
// secret), create one with permissions (its secret shown once), revoke one, and roll one — POST
// /api_keys/{id}/roll {"expires_in": seconds} issues a new key with the same permissions and ends the
// old one that much later (24 hours by default, at once for 0), so both work while a deployment
// switches, and nothing is down. A request sees only its own licensee's keys in its own
// environment; a restricted key hands out only permissions it holds. Issuer.Roll does the same in
// code; the store rolls in one step (CredentialStore.Roll), so a key is never ended without its
// replacement.
//
// Each key's last use (Credential.LastUsedAt, shown as last_used_at) is noted in memory when a
// request authenticates, at most once a minute per key, and written by Issuer.Run, in one call a
// minute: never on a request's path.
//
// # Environments and rate limits
//
// The environment comes from the key alone: a request is in the sandbox exactly when its key is a
// sandbox key (package sandbox's InSandbox), and sandbox and production data never mix when the
// application keeps its records under Principal.Scope. The sandbox has no rate ceiling:
// RateLimitKey, the key function of this package for ratelimit.New, names a production principal by its scope and
// a sandbox principal not at all, so the rate limit never even consults its Limiter for one.
//
// # Observing
//
// AuthenticatorOptions.Hooks are told the Outcome of every authentication (ok, missing,
// scheme_unsupported, malformed, checksum_mismatch, unknown, expired, revoked, unavailable,
// environment_mismatch — the client sees one 401 for unknown, expired and revoked; the hooks tell
// them apart), with the environment and licensee but never a key. Hooks is a struct of optional
// funcs, in the manner of net/http/httptrace.ClientTrace: a field added later is nil in hooks written
// before it. They run on the request's goroutine and must not block; with no Hooks nothing is called,
// at no cost. The otelconv module fills them with OpenTelemetry (Telemetry.APIKey).
package apikey
