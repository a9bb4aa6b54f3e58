package apikey

import "net/http"

// RateLimitKey names the caller a request is rate-limited as, a conventions.CallerFunc for ratelimit.New: the
// principal's licensee and environment (Principal.Scope), and no limit at all for a sandbox principal
// — the sandbox has no rate ceiling, so a load test against it measures the build, not a throttle. A
// request without a principal is a wiring mistake (the rate limit runs before the Authenticator):
// ErrNoPrincipal, which the rate limit answers with the opaque 500.
func RateLimitKey(r *http.Request) (string, error) {
	p, ok := FromContext(r.Context())
	if !ok {
		return "", ErrNoPrincipal
	}
	if p.Environment == Sandbox {
		return "", nil
	}
	return p.Scope(), nil
}
