package sandbox

import (
	"context"
	"time"
)

// Observer is told what the Authenticator and the RateLimit decide: the telemetry hook of this package
// (the otelconv module implements it with OpenTelemetry). It is set with AuthOptions.Observer and
// RateLimitOptions.Observer; one value may serve both.
//
// No observation ever holds a key, a part of one, or a rate-limit key: only the environment a key
// names, the licensee it resolved to, and enumerations.
//
// Implementations must be safe for concurrent use, and must not block: both methods are called
// synchronously, on the request's goroutine, before the next handler runs.
type Observer interface {
	// Authenticated reports one Authenticate (the Authenticator's Handler included). ctx is the
	// request's context.
	Authenticated(ctx context.Context, a AuthObservation)
	// LimitChecked reports one RateLimit.Check (its Handler included). ctx is the request's context.
	LimitChecked(ctx context.Context, l LimitObservation)
}

// AuthObservation is what an Observer learns about one authentication: a plain value. The zero value
// is a success with no environment, which the Authenticator never reports.
type AuthObservation struct {
	// Result is what the Authenticator decided.
	Result AuthResult
	// Environment is the environment the presented key names, "" when there was no well-formed key
	// (AuthMissing, AuthScheme, AuthMalformed, AuthChecksum).
	Environment Environment
	// Licensee is the authenticated licensee when Result is AuthOK, else "". It can take many
	// values: record it only where that is affordable.
	Licensee string
	// Duration is how long Authenticate took, the Resolver's lookup included.
	Duration time.Duration
}

// AuthResult is the outcome of one authentication. The zero value is AuthOK.
type AuthResult uint8

// The authentication results. The client sees one 401 for AuthUnknown, AuthExpired and AuthRevoked;
// the observer tells them apart, so that a team can see keys expiring under its users.
const (
	// AuthOK: the key resolved to a principal of its environment.
	AuthOK AuthResult = iota
	// AuthMissing: no Authorization header (401 api_key_missing).
	AuthMissing
	// AuthScheme: another scheme than Bearer (401 auth_scheme_unsupported).
	AuthScheme
	// AuthMalformed: not one "Bearer <token>", or a token not shaped like an API key (401
	// api_key_malformed).
	AuthMalformed
	// AuthChecksum: shaped like an API key, but its checksum does not match — mistyped, truncated or
	// altered, a sandbox key relabelled sk_live_ among them (401 api_key_malformed).
	AuthChecksum
	// AuthUnknown: a well-formed key no credential has, or one stored for the other environment (401
	// api_key_invalid).
	AuthUnknown
	// AuthExpired: the key's credential has expired (401 api_key_invalid).
	AuthExpired
	// AuthRevoked: the key's credential was revoked (401 api_key_invalid).
	AuthRevoked
	// AuthUnavailable: the Resolver failed (503 authentication_unavailable).
	AuthUnavailable
	// AuthEnvironmentMismatch: the Resolver answered with a principal of another environment than
	// the key's, or an invalid one; refused with the opaque 500 so that data never mixes.
	AuthEnvironmentMismatch
)

// NumAuthResults is the number of AuthResult values, for tables indexed by them.
const NumAuthResults = int(AuthEnvironmentMismatch) + 1

// String returns the result in snake_case: "ok", "missing", "scheme_unsupported", "malformed",
// "checksum_mismatch", "unknown", "expired", "revoked", "unavailable" or "environment_mismatch".
func (r AuthResult) String() string {
	switch r {
	case AuthOK:
		return "ok"
	case AuthMissing:
		return "missing"
	case AuthScheme:
		return "scheme_unsupported"
	case AuthMalformed:
		return "malformed"
	case AuthChecksum:
		return "checksum_mismatch"
	case AuthUnknown:
		return "unknown"
	case AuthExpired:
		return "expired"
	case AuthRevoked:
		return "revoked"
	case AuthUnavailable:
		return "unavailable"
	case AuthEnvironmentMismatch:
		return "environment_mismatch"
	}
	return "invalid"
}

// LimitObservation is what an Observer learns about one rate-limit check: a plain value, without the
// key the Limiter counted by. The zero value is an admitted request without a principal.
type LimitObservation struct {
	// Result is what the RateLimit decided.
	Result LimitResult
	// Environment is the environment of the request's principal, "" when it has none.
	Environment Environment
	// Licensee is the licensee of the request's principal, "" when it has none. It can take many
	// values: record it only where that is affordable.
	Licensee string
	// RetryAfter is the wait the Limiter asked for when Result is LimitRefused, else 0.
	RetryAfter time.Duration
}

// LimitResult is the outcome of one rate-limit check. The zero value is LimitAllowed.
type LimitResult uint8

// The rate-limit results.
const (
	// LimitAllowed: the Limiter admitted the request.
	LimitAllowed LimitResult = iota
	// LimitExempt: no limit applies (the Key was "": a sandbox principal with the default Key); the
	// Limiter was not consulted.
	LimitExempt
	// LimitRefused: over the limit, answered 429 rate_limited with Retry-After.
	LimitRefused
	// LimitNoKey: the Key hook failed (no principal, with the default Key), answered with its problem
	// or the opaque 500.
	LimitNoKey
	// LimitFailedOpen: the Limiter failed and the request went through (the default).
	LimitFailedOpen
	// LimitFailedClosed: the Limiter failed and the request was answered 503 (FailClosed).
	LimitFailedClosed
)

// NumLimitResults is the number of LimitResult values, for tables indexed by them.
const NumLimitResults = int(LimitFailedClosed) + 1

// String returns "allowed", "exempt", "refused", "no_key", "failed_open" or "failed_closed".
func (r LimitResult) String() string {
	switch r {
	case LimitAllowed:
		return "allowed"
	case LimitExempt:
		return "exempt"
	case LimitRefused:
		return "refused"
	case LimitNoKey:
		return "no_key"
	case LimitFailedOpen:
		return "failed_open"
	case LimitFailedClosed:
		return "failed_closed"
	}
	return "invalid"
}
