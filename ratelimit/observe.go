package ratelimit

import (
	"context"
	"time"
)

// Observer is told what the Middleware decides: the telemetry hook of this package (the otelconv
// module implements it with OpenTelemetry). It is set with Options.Observer.
//
// No observation holds the key a request was counted by: keys can be user or account IDs, which a
// metrics system should not see. An implementation that wants the caller reads it from ctx, where the
// authentication middleware put it (apikey.FromContext: the environment and licensee).
//
// Implementations must be safe for concurrent use, and must not block: Checked is called
// synchronously, on the request's goroutine, before the next handler runs.
type Observer interface {
	// Checked reports one Middleware.Check (its Handler included). ctx is the request's context.
	Checked(ctx context.Context, o Observation)
}

// Observation is what an Observer learns about one rate-limit check: a plain value, without the key
// the Limiter counted by. The zero value has no outcome, which the Middleware never reports.
type Observation struct {
	// Outcome is what the Middleware decided.
	Outcome Outcome
	// RetryAfter is the wait the Limiter asked for when Outcome is OutcomeRefused, else 0.
	RetryAfter time.Duration
}

// Outcome is what became of one rate-limit check. The zero value is no outcome.
type Outcome uint8

// The outcomes, one per check.
const (
	// OutcomeAllowed: the Limiter admitted the request.
	OutcomeAllowed Outcome = iota + 1
	// OutcomeExempt: no limit applies (the key function named no caller: a sandbox principal with
	// apikey.RateLimitKey); the Limiter was not consulted.
	OutcomeExempt
	// OutcomeRefused: over the limit, answered 429 rate_limited with Retry-After.
	OutcomeRefused
	// OutcomeNoKey: the key function failed (no principal, with apikey.RateLimitKey), answered with its
	// problem or the opaque 500.
	OutcomeNoKey
	// OutcomeFailedOpen: the Limiter failed and the request went through (the default).
	OutcomeFailedOpen
	// OutcomeFailedClosed: the Limiter failed and the request was answered 503 (FailClosed).
	OutcomeFailedClosed

	// NumOutcomes is one more than the largest Outcome, for tables indexed by it.
	NumOutcomes = iota + 1
)

var outcomeNames = [...]string{"", "allowed", "exempt", "refused", "no_key", "failed_open", "failed_closed"}

// String returns the outcome as metrics label it: "allowed", "exempt", "refused", "no_key",
// "failed_open" or "failed_closed"; "" for the zero Outcome and "invalid" for a value out of range.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "invalid"
}
