package versioning

import "context"

type decisionKey struct{}

// NewContext returns a copy of ctx carrying d, as the router does for every request it serves.
// Handlers' own tests use it to run a handler at a version without the router.
func NewContext(ctx context.Context, d Decision) context.Context {
	return context.WithValue(ctx, decisionKey{}, &d)
}

// FromContext returns the router's decision for the request — the version it is served at
// (Decision.Version), its licensee, pin, override and deprecation — and whether the router (or
// NewContext) put one in ctx.
func FromContext(ctx context.Context) (Decision, bool) {
	d, ok := ctx.Value(decisionKey{}).(*Decision)
	if !ok {
		return Decision{}, false
	}
	return *d, true
}
