package versioning

import "context"

type decisionKey struct{}

// NewContext returns a copy of ctx carrying d, as the router does for every request it serves.
// Handlers' own tests use it to run a handler at a version without the router.
func NewContext(ctx context.Context, d Decision) context.Context {
	return context.WithValue(ctx, decisionKey{}, &d)
}

// FromContext returns the version the request is served at, and whether the router (or NewContext)
// put one in ctx.
func FromContext(ctx context.Context) (Version, bool) {
	d, ok := ctx.Value(decisionKey{}).(*Decision)
	if !ok {
		return Version{}, false
	}
	return d.Version, true
}

// DecisionFromContext returns the router's whole decision for the request: version, licensee, pin,
// override and deprecation.
func DecisionFromContext(ctx context.Context) (Decision, bool) {
	d, ok := ctx.Value(decisionKey{}).(*Decision)
	if !ok {
		return Decision{}, false
	}
	return *d, true
}
