package ratelimit

import (
	"context"
	"time"
)

// Hooks are told what the Middleware decides, for metrics and traces (the otelconv module fills them
// with OpenTelemetry). Set them in Options.Hooks. Every field may be nil; the zero value observes
// nothing, and a nil *Hooks observes nothing at no cost. Fields will be added as the package grows:
// Hooks written for an earlier version keep compiling and keep working, since a new field is nil in
// them.
//
// No hook is given the key a request was counted by: keys can be user or account IDs, which a metrics
// system should not see. A hook that wants the caller reads it from ctx, where the authentication
// middleware put it (apikey.FromContext: the environment and licensee). The hooks are called
// synchronously, on the request's goroutine, before the next handler runs, from many goroutines at
// once: they must be safe for concurrent use and must not block. A Hooks value must not be modified
// once in use.
type Hooks struct {
	// Checked is called once for every Middleware.Check (its Handler included), whatever its
	// outcome, before Check returns. ctx is the request's context.
	Checked func(ctx context.Context, o Observation)
}

// Observation is what Hooks.Checked learns about one rate-limit check: a plain value, without the key
// the Limiter counted by. The zero value has no outcome, which the Middleware never reports.
type Observation struct {
	// Outcome is what the Middleware decided.
	Outcome Outcome
	// RetryAfter is the wait the Limiter asked for when Outcome is OutcomeRefused, else 0.
	RetryAfter time.Duration
}

// Outcome is what became of one rate-limit check. The zero value is no outcome.
type Outcome uint8

// The outcomes, one per check. Values will be added as the package grows, so a hook must accept one
// it does not know (its String is "invalid").
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

// copy returns the Hooks a Middleware keeps: *h, or the zero Hooks for a nil h.
func (h *Hooks) copy() Hooks {
	if h == nil {
		return Hooks{}
	}
	return *h
}
