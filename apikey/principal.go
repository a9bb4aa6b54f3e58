package apikey

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// ErrNoPrincipal: the context carries no authenticated principal, so the request did not pass through
// an Authenticator (a wiring mistake: a middleware that needs the principal runs before it) or was
// not authenticated.
var ErrNoPrincipal = errors.New("apikey: no authenticated principal in the context")

// Principal is who a request acts for, as resolved from its API key: the licensee and the environment
// the key belongs to. It is a plain value, safe to copy and share. The zero Principal is not
// authenticated: its Environment is invalid and everything that scopes data refuses it.
type Principal struct {
	// Licensee identifies the customer (the evaluating team, later the licensee in production).
	Licensee string
	// Environment is the key's environment. It decides which data the request sees.
	Environment Environment
	// KeyID names the API key ("key_…") for logs and revocation; it is not secret.
	KeyID string
	// ExpiresAt is when the key stops working; zero means it does not expire.
	ExpiresAt time.Time
	// Permissions are the restricted key's permissions; nil means the full key (see Allows). The
	// slice is shared: read it, never change it.
	Permissions []string
}

// Valid reports whether p is an authenticated principal: a licensee and a valid environment.
func (p Principal) Valid() bool { return p.Licensee != "" && p.Environment.Valid() }

// Scope is the principal's data scope, "<environment>:<licensee>" (for example "sandbox:lic_42"): the
// value that keeps two credentials' idempotency records, version pins and data apart. Two principals
// share a scope exactly when they have the same licensee and environment, so a licensee's sandbox and
// production keys never share one. The environment comes first because it never contains ':', which
// keeps the mapping one-to-one whatever the licensee's spelling. The zero Principal's scope is "".
func (p Principal) Scope() string {
	if !p.Valid() {
		return ""
	}
	return string(p.Environment) + ":" + p.Licensee
}

type principalKey struct{}

// NewContext returns a copy of ctx carrying p. The Authenticator does this for every request it admits.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal NewContext stored in ctx, and whether there was a valid one.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok && p.Valid()
}

// RequestScope returns the scope of r's principal, or ErrNoPrincipal: the conventions.CallerFunc of
// the platform's API keys, for idempotency.Options.Scope, versioning.Options.Licensee and the
// producer's range and deliveries handlers. A request nobody authenticated is a wiring mistake (the
// middleware runs before the Authenticator), not a client error: they answer ErrNoPrincipal with the
// opaque 500.
func RequestScope(r *http.Request) (string, error) {
	p, ok := FromContext(r.Context())
	if !ok {
		return "", ErrNoPrincipal
	}
	return p.Scope(), nil
}
