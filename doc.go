// Package conventions is the root of the platform conventions library: the importable packages that let
// every product team of the platform speak one set of API conventions.
//
//   - apierror: RFC 9457 problem bodies that say which input failed and why, a strict JSON decoder,
//     request IDs, and a conformance check for a team's own tests.
//   - idempotency: net/http middleware that requires an Idempotency-Key on every mutating request and
//     replays the original response for a repeated key — exactly once, even with concurrent duplicates
//     and several replicas sharing a store.
//   - webhook: the X-SVC-Signature signer and constant-time verifier, a consumer that tracks
//     X-SVC-Sequence and fetches missed ranges so nothing is lost silently, and the producer side: a
//     per-endpoint event log with gap-free sequences, delivery with retries, and range retrieval.
//   - versioning: /v1/ path routing, a version pinned per licensee, deprecation and sunset headers, and
//     version-change transforms.
//   - apikey: API keys that reveal their environment (sk_sandbox_…, sk_live_…), credentials issued
//     per evaluation, Bearer authentication, and the credential store with its conformance suite.
//   - ratelimit: a rate limit keyed by any caller identity, with a token-bucket Limiter; keyed by
//     apikey.RateLimitKey it limits production per licensee and never applies in the sandbox.
//   - sandbox: the sandbox-only controls (trigger events, inject webhook faults, reset an
//     evaluation), the fault-injecting transport for the webhook producer, and sandboxtest, an
//     in-process producer for consumers' own tests.
//   - openapi: the conventions as OpenAPI 3.1 components (problems, the Idempotency-Key, the webhook
//     envelope and delivery, range retrieval, Bearer security, deprecation headers) that a team merges
//     into the reference it publishes.
//   - ids: the prefixed random IDs of resources ("ord_…", "evt_…", "we_…").
//
// Each capability keeps its state behind a small storage interface with an in-memory default; the nested
// modules pgstore (PostgreSQL, pgx v5) and redisstore (Redis, go-redis v9) implement them for teams that
// run several replicas, so the core module never pulls a database driver into its users' builds.
//
// How they fit: apikey authenticates the request and puts the licensee and environment in its context;
// ratelimit limits production callers by it; idempotency scopes keys by that credential; versioning
// enforces the licensee's pinned version; handlers report failures as *apierror.Error; and webhook
// events are signed, sequenced and rendered at the licensee's version. The examples module wires all of it into a reference order server; Example_service
// wires a small service with its own authentication on a plain ServeMux.
//
// # Names
//
// One vocabulary holds in every package; a name read in one means the same in the others:
//
//	What                          Name                             For example
//	the package's own type        New(…) (*T, error)               idempotency.New, versioning.New
//	any other type T              NewT(…) (*T, error)              webhook.NewVerifier, producer.NewDispatcher
//	what configures T             TOptions; Options for New's T    webhook.VerifierOptions, pgstore.CursorStoreOptions
//	the package's context value   NewContext, FromContext          apikey.NewContext, versioning.FromContext
//	another context value         NewXContext, XFromContext        apierror.RequestIDFromContext
//	who the caller is             CallerFunc                       apikey.RequestScope, for every package
//	what a package decided        Hooks, a struct of funcs         idempotency.Options.Hooks
//	what a decision came to       Outcome; zero value: none        ratelimit.OutcomeAllowed
//	a value not built by New      ErrNotBuilt                      producer.ErrNotBuilt
//	a problem's code              CodeX, a snake_case constant     idempotency.CodeKeyMissing
//	a default                     DefaultX                         producer.DefaultTimeout
//	a route to mount              XPattern(version)                producer.RangePattern
//	a storage contract            XStore; package driver when it   versioning.PinStore; webhook/producer/driver
//	                              needs types of its own
//	its in-memory implementation  MemoryXStore; package memstore   versioning.MemoryPinStore; …/producer/memstore
//	its conformance suite         package …test                    versioning/pintest; …/driver/drivertest
//
// # One library
//
// The packages keep the same rules, so that what a team learns in one holds in the others:
//
//   - Problems. Every Options of a package that writes problem responses has a field Problems, an
//     apierror.Writer. A service sets its type base and logger once, with apierror.Writer.Handler, and
//     every Writer left empty below it takes them.
//   - Constructors. A New… whose arguments or options can be invalid — a nil store, a negative
//     duration, a retention within a lease — returns (value, error), and the error names what is
//     wrong; none panics. One that cannot fail returns its value alone. Must… exists only where the
//     standard library has one: ids.MustPrefix, for a constant at package level, like
//     regexp.MustCompile. The exception is a test helper: webhook/webhooktest's constructors
//     (NewSource, NewRequest, …) panic on misuse, as net/http/httptest's NewServer and NewRequest
//     do, so that the panic points at the broken test line.
//   - Zero values. Every exported type says what its zero value does. Where it is not usable, using it
//     is an error that matches its package's ErrNotBuilt (webhook.ErrNoSecret for a zero Signer) and
//     names the type, and a handler built on it answers the opaque 500: never a panic from a nil
//     field, never a silent no-op.
//   - Concurrency. Every exported type says whether it is safe for concurrent use.
//   - Storage. Each store interface has a conformance suite that needs only the standard library,
//     run by the memory stores, pgstore and redisstore: idempotency's driver.Store, in its
//     transactional mode too (idempotency/storetest), webhook.CursorStore (webhook/cursortest), the
//     producer's driver.Log with its optional BatchAppender, ByteRanger, Sequencing and Backlogger,
//     and its endpoint registry (webhook/producer/driver/drivertest), versioning.PinStore
//     (versioning/pintest) and apikey.CredentialStore (apikey/credentialtest). Two interfaces have
//     none yet: driver.Settler, tested only through the Dispatcher's own tests, and
//     ratelimit.Limiter, the rate-limit hook whose one implementation is the in-memory TokenBucket.
//   - Hooks. Every package that decides something takes Hooks in its options, a struct of optional
//     funcs that can grow without breaking anyone (net/http/httptrace.ClientTrace): idempotency.Options,
//     webhook's Verifier, Receiver, Tracker and RangeClient options, producer's Publisher, Dispatcher
//     and RangeHandler options, versioning.Options, apierror.Writer, apikey.AuthenticatorOptions and
//     ratelimit.Options. They are called at each decision, with plain values and never a secret, and
//     cost nothing when nil. The otelconv module implements them all with OpenTelemetry; a team can
//     write its own for anything else.
package conventions
