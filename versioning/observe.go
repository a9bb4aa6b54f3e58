package versioning

import (
	"context"
	"time"
)

// Observer is told about every request the Router decides, on a registered version or not, served or
// refused: the telemetry hook of this package (the otelconv module implements it with OpenTelemetry).
// It is set with Options.Observer.
//
// Observer and Options.OnRequest are independent and both are called when both are set: OnRequest is
// the simple usage hook (UsageCounter plugs into it) and keeps its contract — registered versions
// only, licensee included; Observer also sees unknown versions, and the outcome of each request as an
// enumeration a metrics system can count.
//
// Implementations must be safe for concurrent use, and must not block: Decided is called
// synchronously, on the request's goroutine, before the handler runs.
type Observer interface {
	// Decided reports the decision for one request. ctx is the request's context.
	Decided(ctx context.Context, o Observation)
}

// Observation is what an Observer learns about one request: a plain value. It never holds what the
// client put in the version segment unless that names a registered version: a request on an unknown
// or malformed version has Version "" and Lifecycle LifecycleUnknown, so a client cannot create new
// values by sending new paths. The zero value is a request served on a current version named "".
type Observation struct {
	// Version is the registered version the request was addressed to, "" when the path named none
	// (unknown, malformed, or not released yet).
	Version string
	// Lifecycle is Version's state at the decision's instant.
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

// NumLifecycles is the number of Lifecycle values, for tables indexed by them.
const NumLifecycles = int(LifecycleUnknown) + 1

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

// Outcome is what the router did with a request. The zero value is OutcomeServed.
type Outcome uint8

// The outcomes. Each refusal is one problem code of the router.
const (
	// OutcomeServed: served on its version.
	OutcomeServed Outcome = iota
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
	// OutcomeError: the opaque 500, the Licensee hook named a licensee no store accepts.
	OutcomeError
)

// NumOutcomes is the number of Outcome values, for tables indexed by them.
const NumOutcomes = int(OutcomeError) + 1

// String returns "served", "override", "unknown", "sunset", "not_enabled", "pin_unavailable" or
// "error".
func (o Outcome) String() string {
	switch o {
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
