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
//   - sandbox: API keys that reveal their environment, credentials issued per evaluation, Bearer
//     authentication, no rate ceiling in the sandbox, and sandbox-only controls.
//
// Each capability keeps its state behind a small storage interface with an in-memory default; the nested
// modules pgstore (PostgreSQL, pgx v5) and redisstore (Redis, go-redis v9) implement them for teams that
// run several replicas, so the core module never pulls a database driver into its users' builds.
//
// How they fit: sandbox authenticates the request and puts the licensee and environment in its context;
// idempotency scopes keys by that credential; versioning enforces the licensee's pinned version; handlers
// report failures as *apierror.Error; and webhook events are signed, sequenced and rendered at the
// licensee's version. The examples module wires all of it into a reference order server.
package conventions
