package versioning

import (
	"net/http"
	"time"
)

// HeaderVersion is the response header that echoes the version a request was addressed to.
const HeaderVersion = "X-SVC-Version"

// maxNameDigits bounds a version number to nine digits, so that it always fits an int and a hostile
// path cannot make the parser work on a long run of digits.
const maxNameDigits = 9

// Version is one major version of the API and its lifecycle. The zero value is not a valid version:
// a Version needs at least a Name, and is only used through a Registry, which validates it.
//
// Times are whole seconds, because the Deprecation and Sunset headers carry whole seconds: a
// sub-second instant would make the header name a time that differs from the one the router acts on.
// Requests are served from Released (inclusive) until Sunset (exclusive).
type Version struct {
	// Name is the version's path segment: "v" and a decimal number without leading zeros ("v1",
	// "v12"). Versions are ordered by that number.
	Name string
	// Released is when the version starts answering; before it the version is unknown (404). Zero
	// means it has always been released.
	Released time.Time
	// Deprecated is when the version is deprecated. Zero means it is not (yet) scheduled for
	// deprecation. Once set, every response of the version announces it with the Deprecation header,
	// also before the instant itself (RFC 9745 allows a date in the future): see the package manual.
	Deprecated time.Time
	// Sunset is when the version stops answering (410 version_sunset from this instant on). Zero
	// means no sunset is scheduled. A version with a sunset must be deprecated no later than it.
	Sunset time.Time
	// Successor names the version clients should move to. Empty means the next newer registered
	// version; the newest version has none.
	Successor string
	// DeprecationLink, when set, is the URL of a human-readable deprecation notice or migration
	// guide, sent as Link: <…>; rel="deprecation" (RFC 9745 §3) while the version is deprecated.
	DeprecationLink string
	// Handler, when set, serves this version by itself, in its own shape: the router sends the
	// version's requests to it instead of to the shared handler, and applies no Change. Nil means the
	// shared handler serves it and the changes down from the newest version shape its responses.
	Handler http.Handler

	num int // parsed from Name by NewRegistry
}

// Number returns the version's number: 2 for "v2", or -1 when the name is not well-formed: "v"
// followed by a decimal number of at most nine digits with no leading zero ("v0", "v1", "v42"; not
// "V1", "v01", "v", "v1.2"). Version{Name: s}.Number() parses any string that way.
func (v Version) Number() int {
	n, ok := parseName(v.Name)
	if !ok {
		return -1
	}
	return n
}

// IsReleased reports whether the version answers requests at now with respect to its release: now is
// not before Released.
func (v Version) IsReleased(now time.Time) bool {
	return v.Released.IsZero() || !now.Before(v.Released)
}

// IsDeprecated reports whether the version is deprecated at now: a deprecation is scheduled and now
// is not before it.
func (v Version) IsDeprecated(now time.Time) bool {
	return !v.Deprecated.IsZero() && !now.Before(v.Deprecated)
}

// IsSunset reports whether the version no longer answers at now: a sunset is scheduled and now is
// not before it.
func (v Version) IsSunset(now time.Time) bool { return !v.Sunset.IsZero() && !now.Before(v.Sunset) }

// IsSupported reports whether the version answers requests at now: released and not sunset.
func (v Version) IsSupported(now time.Time) bool { return v.IsReleased(now) && !v.IsSunset(now) }

// parseName parses a version name (see Version.Number) and reports whether it is well-formed.
func parseName(name string) (int, bool) {
	if len(name) < 2 || len(name) > 1+maxNameDigits || name[0] != 'v' {
		return 0, false
	}
	if name[1] == '0' && len(name) > 2 {
		return 0, false
	}
	n := 0
	for i := 1; i < len(name); i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// ParsePath splits a request path into its first segment, when that segment is a well-formed
// version name, and the rest of the path: "/v2/orders/ord_1" is "v2" and "/orders/ord_1"; "/v2" is
// "v2" and "". It reports false for a path whose first segment is not a version name ("/orders",
// "/", "", "//v1", "/V1/orders", "/v01/x"). The path is the decoded URL path (url.URL.Path).
func ParsePath(path string) (name, rest string, ok bool) {
	if len(path) < 3 || path[0] != '/' {
		return "", "", false
	}
	end := len(path)
	// The segment is short, so the scan is bounded: a name is at most 10 bytes.
	for i := 1; i < len(path) && i <= 2+maxNameDigits; i++ {
		if path[i] == '/' {
			end = i
			break
		}
	}
	if end == len(path) && len(path) > 2+maxNameDigits {
		return "", "", false
	}
	name = path[1:end]
	if _, ok := parseName(name); !ok {
		return "", "", false
	}
	return name, path[end:], true
}
