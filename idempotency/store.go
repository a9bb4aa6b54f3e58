package idempotency

import "github.com/svcplatform/conventions/idempotency/driver"

// The storage contract is package driver. These are the few of its names that Begin's callers meet,
// so that everyday code does not import it.

// Response is what a completed request replays: its status, the allow-listed headers and the body
// (driver.Response, where the stores that keep it are specified). Begin's callers pass one to
// Attempt.Complete, and find the stored one in Attempt.Response (shared with the store: read it, do
// not modify it). The zero value is a Response with Status 0, which no completed request has.
type Response = driver.Response

// Fingerprint identifies a request: SHA-256 over its method, path, canonical query and body hash
// (driver.Fingerprint). NewFingerprint and CanonicalJSONFingerprint compute one, and so does a team's
// own Options.Fingerprint. A repeated key whose fingerprint differs is a different request reusing
// the key (422).
type Fingerprint = driver.Fingerprint

var (
	// ErrLeaseLost: the attempt no longer owns its key — a newer claim took it over, or it was
	// released or completed — so its result is not stored. Attempt.Complete and Release return it, and
	// it is the cause of a cancelled Attempt.Context. It is driver.ErrLeaseLost, for errors.Is.
	ErrLeaseLost = driver.ErrLeaseLost
	// ErrQuotaExceeded: Begin refused a new key because the scope holds as many records as the store
	// allows one scope, so that one tenant cannot fill capacity that others share; answer 429
	// idempotency_quota_exceeded with Retry-After, as the middleware does. Other scopes are not
	// affected. It is driver.ErrQuotaExceeded, for errors.Is.
	ErrQuotaExceeded = driver.ErrQuotaExceeded
)
