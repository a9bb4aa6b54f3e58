// Package ratelimit is production rate limiting keyed by any caller identity: a Middleware that
// answers 429 rate_limited with Retry-After, the Limiter hook it asks, and TokenBucket, an in-memory
// Limiter with one bucket per key. A complete server:
//
//	bucket, err := ratelimit.NewTokenBucket(100, 200, nil) // 100 requests a second per key, 200 at once
//	limit, err := ratelimit.New(bucket, func(r *http.Request) (string, error) {
//		return "user:" + myauth.User(r.Context()), nil // the caller the team's own middleware found
//	}, nil) // (each err checked: none panics)
//	http.ListenAndServe(addr, apierror.WithRequestID(myauth.Handler(limit.Handler(mux))))
//
// With the platform's API keys, the key function is apikey.RateLimitKey, behind the Authenticator:
// production principals are limited per licensee and environment, and sandbox principals not at all
// — the sandbox has no rate ceiling, so a load test against it measures the build, not a throttle:
//
//	limit, err := ratelimit.New(bucket, apikey.RateLimitKey, nil)
//	api := auth.Handler(limit.Handler(mux))
//
// # Keys and limits
//
// The key function, a conventions.CallerFunc, names the caller each request counts as; an empty key means the request is not limited
// and the Limiter is not consulted (OutcomeExempt), and an error is written as the response — an
// *apierror.Error (a 401, say) as it is, anything else as the opaque 500. The Limiter knows nothing of
// how callers are authenticated: it decides whether the caller a key names may make one request at an
// instant passed in, and says how long until it may. TokenBucket keeps one token bucket per key in a
// bounded LRU (TokenBucketOptions.MaxKeys), with the rate and burst per key from
// TokenBucketOptions.Limits (a licensee's plan, say); a distributed Limiter (a shared counter in
// Redis) plugs in the same way.
//
// A refused request gets
//
//	HTTP/1.1 429 Too Many Requests
//	Retry-After: 4
//	Content-Type: application/problem+json
//
//	{"type":"…/rate_limited","title":"Too Many Requests","status":429,"code":"rate_limited",…}
//
// with Retry-After in whole seconds, rounded up. A Limiter that fails lets the request through and
// logs it (a rate limit protects capacity; its outage should not become the API's), or answers 503
// rate_limiter_unavailable with Options.FailClosed.
//
// # Observing
//
// Options.Hooks are told the Outcome of every check (allowed, exempt, refused, no_key, failed_open,
// failed_closed), never the key counted by; a hook reads the caller from the request's context if it
// wants one (apikey.FromContext). Hooks is a struct of optional funcs, in the manner of
// net/http/httptrace.ClientTrace: a field added later is nil in hooks written before it. They run on
// the request's goroutine and must not block; with no Hooks nothing is called, at no cost. The
// otelconv module fills them with OpenTelemetry (Telemetry.RateLimit).
package ratelimit
