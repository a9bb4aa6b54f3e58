package versioning

import (
	"context"
	"time"
)

// Hooks are told what the Router decides, for metrics, traces and usage reports (the otelconv module
// fills them with OpenTelemetry; UsageCounter.Observe is a Decided). Set them in Options.Hooks. Every
// field may be nil; the zero value observes nothing, and a nil *Hooks observes nothing at no cost.
// Fields will be added as the package grows: Hooks written for an earlier version keep compiling and
// keep working, since a new field is nil in them.
//
// The hooks are called synchronously, on the request's goroutine, from many goroutines at once: they
// must be safe for concurrent use and must not block. A Hooks value must not be modified once in use.
type Hooks struct {
	// Decided is called once for every request the Router decides, by its Handler or by Decide: on
	// a registered version or not, served or refused, before the handler runs. ctx is the request's
	// context. To give a decision to several hooks (a UsageCounter and otelconv's, say), call them
	// in turn from one func.
	Decided func(ctx context.Context, o Observation)
}

// Observation is what Hooks.Decided learns about one request: a plain value. It never holds what the
// client put in the version segment unless that names a registered version: a request on an unknown
// or malformed version has Version "" and Lifecycle LifecycleUnknown, so a client cannot create new
// values by sending new paths. The zero value is no observation: every one the Router reports has an
// Outcome and a time.
type Observation struct {
	// At is the instant the decision was made at, by Options.Now (Decision.At).
	At time.Time
	// Version is the registered version the request was addressed to, "" when the path named none
	// (unknown, malformed, or not released yet).
	Version string
	// Lifecycle is Version's state at At: LifecycleDeprecated from the deprecation instant,
	// LifecycleSunset from the sunset instant, LifecycleUnknown when the path named no version.
	Lifecycle Lifecycle
	// Outcome says whether the request was served, and if not, why.
	Outcome Outcome
	// Licensee is the request's licensee, "" when the Licensee hook named none (or the version was
	// unknown, which is refused before the hook runs). It can take many values: record it only where
	// that is affordable.
	Licensee string
	// Pinned is the licensee's pin after this request, "" when there is none or it was not read.
	Pinned string
	// PinChanged reports that this request created the licensee's pin (first use) or moved a lapsed
	// one.
	PinChanged bool
	// Duration is how long the decision took by Options.Now, pin store reads and writes included.
	Duration time.Duration
}

// Lifecycle is a version's state at an instant. The zero value is LifecycleCurrent.
type Lifecycle uint8

// The lifecycle states, in the order a version goes through them; LifecycleUnknown is a path that
// names no answering version.
const (
	// LifecycleCurrent: released, not deprecated (a deprecation may be scheduled for later).
	LifecycleCurrent Lifecycle = iota
	// LifecycleDeprecated: deprecated, not yet sunset.
	LifecycleDeprecated
	// LifecycleSunset: past its sunset; requests get 410.
	LifecycleSunset
	// LifecycleUnknown: not a registered, released version; requests get 404.
	LifecycleUnknown
)

// String returns "current", "deprecated", "sunset" or "unknown".
func (l Lifecycle) String() string {
	switch l {
	case LifecycleCurrent:
		return "current"
	case LifecycleDeprecated:
		return "deprecated"
	case LifecycleSunset:
		return "sunset"
	case LifecycleUnknown:
		return "unknown"
	}
	return "invalid"
}

// Outcome is what the router did with a request. The zero value is no outcome: every Observation
// the Router reports has one of the values below.
type Outcome uint8

// The outcomes. Each refusal is one problem code of the router.
const (
	// OutcomeServed: served on its version.
	OutcomeServed Outcome = iota + 1
	// OutcomeOverride: served on another version than the licensee's pin, because AllowOverride
	// allowed it.
	OutcomeOverride
	// OutcomeUnknown: 404 version_unknown.
	OutcomeUnknown
	// OutcomeSunset: 410 version_sunset.
	OutcomeSunset
	// OutcomeNotEnabled: 403 version_not_enabled, the licensee is pinned to another version.
	OutcomeNotEnabled
	// OutcomePinUnavailable: 503 version_pin_unavailable, the PinStore failed.
	OutcomePinUnavailable
	// OutcomeError: the Licensee function failed (its error is the answer), or named a licensee no
	// store accepts (the opaque 500).
	OutcomeError
)

// String returns "served", "override", "unknown", "sunset", "not_enabled", "pin_unavailable" or
// "error"; "none" for the zero value.
func (o Outcome) String() string {
	switch o {
	case 0:
		return "none"
	case OutcomeServed:
		return "served"
	case OutcomeOverride:
		return "override"
	case OutcomeUnknown:
		return "unknown"
	case OutcomeSunset:
		return "sunset"
	case OutcomeNotEnabled:
		return "not_enabled"
	case OutcomePinUnavailable:
		return "pin_unavailable"
	case OutcomeError:
		return "error"
	}
	return "invalid"
}

// refused reports whether o is a refusal: neither served nor overridden, nor the zero value.
func (o Outcome) refused() bool { return o > OutcomeOverride }

// outcomeOf maps a decision error to its Outcome.
func outcomeOf(err error) Outcome {
	de, ok := err.(*decisionError)
	if !ok {
		return OutcomeError
	}
	switch de.problem.Code {
	case CodeVersionUnknown:
		return OutcomeUnknown
	case CodeVersionSunset:
		return OutcomeSunset
	case CodeVersionNotEnabled:
		return OutcomeNotEnabled
	case CodePinUnavailable:
		return OutcomePinUnavailable
	}
	return OutcomeError
}
