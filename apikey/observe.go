package apikey

import (
	"context"
	"time"
)

// Hooks are told what the Authenticator decides, for metrics and traces (the otelconv module fills
// them with OpenTelemetry). Set them in AuthenticatorOptions.Hooks. Every field may be nil; the zero
// value observes nothing, and a nil *Hooks observes nothing at no cost. Fields will be added as the
// package grows: Hooks written for an earlier version keep compiling and keep working, since a new
// field is nil in them.
//
// No hook is ever given a key or a part of one: only the environment a key names, the licensee it
// resolved to, and an enumeration. The hooks are called synchronously, on the request's goroutine,
// before the next handler runs, from many goroutines at once: they must be safe for concurrent use
// and must not block. A Hooks value must not be modified once in use.
type Hooks struct {
	// Authenticated is called once for every Authenticate (the Authenticator's Handler included),
	// whatever its outcome, before Authenticate returns. ctx is the request's context.
	Authenticated func(ctx context.Context, o Observation)
}

// Observation is what Hooks.Authenticated learns about one authentication: a plain value. The zero
// value has no outcome, which the Authenticator never reports.
type Observation struct {
	// Outcome is what the Authenticator decided.
	Outcome Outcome
	// Environment is the environment the presented key names, "" when there was no well-formed key
	// (OutcomeMissing, OutcomeSchemeUnsupported, OutcomeMalformed, OutcomeChecksumMismatch).
	Environment Environment
	// Licensee is the authenticated licensee when Outcome is OutcomeAuthenticated, else "". It can
	// take many values: record it only where that is affordable.
	Licensee string
	// Duration is how long Authenticate took, the Resolver's lookup included.
	Duration time.Duration
}

// Outcome is what became of one authentication. The zero value is no outcome.
type Outcome uint8

// The outcomes, one per authentication. The client sees one 401 for OutcomeUnknownKey,
// OutcomeExpired and OutcomeRevoked; the Hooks tell them apart, so that a team can see keys expiring
// under its users. Values will be added as the package grows, so a hook must accept one it does not
// know (its String is "invalid").
const (
	// OutcomeAuthenticated: the key resolved to a principal of its environment.
	OutcomeAuthenticated Outcome = iota + 1
	// OutcomeMissing: no Authorization header (401 api_key_missing).
	OutcomeMissing
	// OutcomeSchemeUnsupported: another scheme than Bearer (401 auth_scheme_unsupported).
	OutcomeSchemeUnsupported
	// OutcomeMalformed: not one "Bearer <token>", or a token not shaped like an API key (401
	// api_key_malformed).
	OutcomeMalformed
	// OutcomeChecksumMismatch: shaped like an API key, but its checksum does not match — mistyped,
	// truncated or altered, a sandbox key relabelled sk_live_ among them (401 api_key_malformed).
	OutcomeChecksumMismatch
	// OutcomeUnknownKey: a well-formed key no credential has, or one stored for the other environment
	// (401 api_key_invalid).
	OutcomeUnknownKey
	// OutcomeExpired: the key's credential has expired (401 api_key_invalid).
	OutcomeExpired
	// OutcomeRevoked: the key's credential was revoked (401 api_key_invalid).
	OutcomeRevoked
	// OutcomeUnavailable: the Resolver failed (503 authentication_unavailable).
	OutcomeUnavailable
	// OutcomeEnvironmentMismatch: the Resolver answered with a principal of another environment than
	// the key's, or an invalid one; refused with the opaque 500 so that data never mixes.
	OutcomeEnvironmentMismatch
)

var outcomeNames = [...]string{"", "ok", "missing", "scheme_unsupported", "malformed", "checksum_mismatch",
	"unknown", "expired", "revoked", "unavailable", "environment_mismatch"}

// String returns the outcome in snake_case, as metrics label it: "ok", "missing",
// "scheme_unsupported", "malformed", "checksum_mismatch", "unknown", "expired", "revoked",
// "unavailable" or "environment_mismatch"; "" for the zero Outcome and "invalid" for a value out of
// range.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "invalid"
}
