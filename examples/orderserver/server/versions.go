package server

import (
	"time"

	"github.com/svcplatform/conventions/versioning"
)

// The reference server's API versions. v2 is the newest: handlers produce its shapes. v1 is served by
// reshaping v2's output, one named change at a time:
//
//	order_side_renamed_direction   v2 calls an order's side "direction" (responses and webhook events)
//
// Request bodies are decoded in their version's own shape (decodeCreateOrder), so violations name the
// member the client sent.
//
// v1 is scheduled for deprecation and sunset, and says so on every response (Deprecation, Sunset and
// Link rel="successor-version" to the same path on v2). A reference server runs for evaluations, not
// for years: its dates are relative to its start (V1DeprecatesIn and V1SunsetsIn after the start of
// the day it started), so that it always shows the announcement and never locks a v1 integration out.
// A service sets fixed dates instead; Config.V1Deprecated and Config.V1Sunset do that here.
const (
	V1DeprecatesIn = 90 * 24 * time.Hour
	V1SunsetsIn    = 270 * 24 * time.Hour
)

// orderSideRenamed is v2's breaking change: v2's "direction" is v1's "side".
var orderSideRenamed = versioning.Change{
	Name: "order_side_renamed_direction", Version: "v2", Object: "order",
	Description: `An order's side is called direction: {"side":"buy"} in v1 is {"direction":"buy"} in v2.`,
	Response: func(o map[string]any) error {
		if v, ok := o["direction"]; ok {
			o["side"] = v
			delete(o, "direction")
		}
		return nil
	},
}

// Changes returns the server's version changes in the order they are registered: what each version
// changed over the one before it. The router reshapes older versions' answers with them, and GET
// /{version}/changelog lists them (versioning.Router.ChangelogHandler), so the two cannot differ.
func Changes() []versioning.Change { return []versioning.Change{orderSideRenamed} }

// newRegistry builds the registry: v1 with its deprecation and sunset, and v2. A licensee is pinned
// to the version of its first request (versioning.PinRequested), so an integration written against
// v1 keeps working until its owner upgrades; once v1 is deprecated, new licensees are pinned to v2.
func newRegistry(now time.Time, deprecated, sunset time.Time) (*versioning.Registry, error) {
	day := now.UTC().Truncate(24 * time.Hour)
	if deprecated.IsZero() {
		deprecated = day.Add(V1DeprecatesIn)
	}
	if sunset.IsZero() {
		sunset = day.Add(V1SunsetsIn)
	}
	return versioning.NewRegistry([]versioning.Version{
		{Name: "v1", Deprecated: deprecated.Truncate(time.Second), Sunset: sunset.Truncate(time.Second)},
		{Name: "v2"},
	}, Changes())
}
