package conventions

import "net/http"

// CallerFunc says who a request is made by: the licensee, credential scope or user that a package
// keys its state by. It is the one shape every package of the library asks for when it needs the
// caller — idempotency.Options.Scope (whose keys a key belongs to), versioning.Options.Licensee
// (whose version pin applies), ratelimit.New (whose budget a request spends) and the producer's
// range and deliveries handlers (whose webhook endpoints a request may read) — so that one function,
// apikey.RequestScope or a team's own, serves them all.
//
// It returns "" and a nil error for a request that has no caller the package should key by; each
// package says what it does then (a rate limit does not apply, a version is not pinned, …). An error
// means the caller could not be told, most often because the middleware that authenticates the
// request did not run before: an *apierror.Error is answered as it is, anything else as the opaque
// 500. A CallerFunc is called on every request, from many goroutines at once: it must be safe for
// concurrent use, fast, and must not write to the response.
//
// The zero value (nil) is not a caller: each option that takes one says what nil means.
type CallerFunc func(r *http.Request) (string, error)
