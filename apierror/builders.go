package apierror

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Codes of the problems this package builds. Other packages define their own (idempotency_key_missing,
// version_sunset, …); every code is stable once shipped.
const (
	CodeValidationFailed = "validation_failed" // several violations in one 400
	CodeFieldMissing     = "field_missing"
	CodeHeaderMissing    = "header_missing"
	CodeQueryMissing     = "query_missing"
	CodeMalformedJSON    = "malformed_json"
	CodeBodyMissing      = "body_missing"
	CodeTrailingData     = "trailing_data"
	CodeWrongType        = "wrong_type"
	CodeUnknownField     = "unknown_field"
	CodeBodyTooLarge     = "body_too_large"
	CodeRateLimited      = "rate_limited"
	CodeInternal         = "internal_error"
	CodeUnavailable      = "service_unavailable"
)

// New returns a problem with the given status, code and detail, and any located violations.
func New(status int, code, detail string, violations ...Violation) *Error {
	return &Error{Status: status, Code: code, Detail: detail, Errors: violations}
}

// Invalid returns a 400 problem for one or more located violations. With one violation the problem
// takes its code; with several the code is validation_failed. The detail names the first failing input
// and says why, so the body conforms even for a client that reads only detail.
func Invalid(violations ...Violation) *Error {
	if len(violations) == 0 {
		panic("apierror: Invalid needs at least one violation")
	}
	first := violations[0]
	code := first.Code
	var b strings.Builder
	b.Grow(len(first.Location) + len(first.Pointer) + len(first.Name) + len(first.Detail) + 24)
	first.writeWhere(&b)
	b.WriteString(": ")
	b.WriteString(first.Detail)
	if n := len(violations) - 1; n > 0 {
		code = CodeValidationFailed
		b.WriteString(" (and ")
		b.WriteString(strconv.Itoa(n))
		b.WriteString(" more)")
	}
	return &Error{Status: http.StatusBadRequest, Code: code, Detail: b.String(), Errors: violations}
}

// MissingField is a 400 for a required body member that is absent.
func MissingField(pointer string) *Error {
	return Invalid(Body(pointer, CodeFieldMissing, "is required"))
}

// MissingHeader is a 400 for a required request header that is absent.
func MissingHeader(name string) *Error {
	return Invalid(Header(name, CodeHeaderMissing, "header "+name+" is required"))
}

// MissingQuery is a 400 for a required query parameter that is absent.
func MissingQuery(name string) *Error {
	return Invalid(Query(name, CodeQueryMissing, "query parameter "+name+" is required"))
}

// MalformedJSON is a 400 for a body that is not valid JSON, located at the byte offset where parsing
// failed. The offset is also the extension member "offset".
func MalformedJSON(offset int64, reason string) *Error {
	e := Invalid(Body("", CodeMalformedJSON, fmt.Sprintf("invalid JSON at byte offset %d: %s", offset, reason)))
	return e.With("offset", offset)
}

// WrongType is a 400 for a body member of the wrong JSON type: want and got are JSON type names
// ("string", "number", "boolean", "object", "array", "null").
func WrongType(pointer, want, got string) *Error {
	return Invalid(Body(pointer, CodeWrongType, "must be a "+want+", got "+got))
}

// UnknownField is a 400 for a body member the endpoint does not accept.
func UnknownField(pointer string) *Error {
	return Invalid(Body(pointer, CodeUnknownField, "is not a known field"))
}

// BodyTooLarge is a 413 for a body over limit bytes.
func BodyTooLarge(limit int64) *Error {
	e := Invalid(Body("", CodeBodyTooLarge, "request body exceeds "+strconv.FormatInt(limit, 10)+" bytes"))
	e.Status = http.StatusRequestEntityTooLarge
	return e
}

// DefaultRealm is the realm of the Bearer challenges Unauthenticated writes (RFC 6750 §3).
const DefaultRealm = "svcplatform"

// Unauthenticated is a 401 with the bare challenge `WWW-Authenticate: Bearer realm="svcplatform"`, the
// answer to a request without credentials (RFC 6750 §3.1: no error code then). Missing or malformed
// credentials should carry a violation located at the Authorization header; unknown, expired or
// revoked ones should not say which. Replace the challenge with BearerChallenge to add an error code.
func Unauthenticated(code, detail string, violations ...Violation) *Error {
	return New(http.StatusUnauthorized, code, detail, violations...).
		WithHeader("WWW-Authenticate", BearerChallenge(DefaultRealm, ""))
}

// BearerChallenge formats an RFC 6750 §3 challenge: `Bearer realm="<realm>"`, with
// `, error="<code>"` when errorCode is not empty ("invalid_request", "invalid_token",
// "insufficient_scope"). realm is written as an RFC 9110 quoted-string: '"' and '\' are escaped and
// control characters dropped, so no input can break the header.
func BearerChallenge(realm, errorCode string) string {
	b := make([]byte, 0, len(`Bearer realm="", error=""`)+len(realm)+len(errorCode))
	b = append(b, `Bearer realm="`...)
	b = appendQuoted(b, realm)
	b = append(b, '"')
	if errorCode != "" {
		b = append(b, `, error="`...)
		b = appendQuoted(b, errorCode)
		b = append(b, '"')
	}
	return string(b)
}

// appendQuoted appends the inside of an RFC 9110 quoted-string.
func appendQuoted(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 && c != '\t' || c == 0x7f:
		default:
			b = append(b, c)
		}
	}
	return b
}

// Forbidden is a 403: the caller is known but may not do this.
func Forbidden(code, detail string, violations ...Violation) *Error {
	return New(http.StatusForbidden, code, detail, violations...)
}

// NotFound is a 404. For a resource that belongs to someone else it must read exactly as for one that
// does not exist.
func NotFound(code, detail string, violations ...Violation) *Error {
	return New(http.StatusNotFound, code, detail, violations...)
}

// Conflict is a 409.
func Conflict(code, detail string, violations ...Violation) *Error {
	return New(http.StatusConflict, code, detail, violations...)
}

// Gone is a 410.
func Gone(code, detail string, violations ...Violation) *Error {
	return New(http.StatusGone, code, detail, violations...)
}

// Unprocessable is a 422: the request is well-formed but cannot be carried out as it stands.
func Unprocessable(code, detail string, violations ...Violation) *Error {
	return New(http.StatusUnprocessableEntity, code, detail, violations...)
}

// RateLimited is a 429 with Retry-After in whole seconds (at least 1).
func RateLimited(retryAfter time.Duration, detail string) *Error {
	if detail == "" {
		detail = "too many requests; retry after the number of seconds in Retry-After"
	}
	return New(http.StatusTooManyRequests, CodeRateLimited, detail).WithHeader("Retry-After", RetryAfter(retryAfter))
}

// Unavailable is a 503 with Retry-After: a dependency is down and the request was not carried out,
// so retrying it is safe.
func Unavailable(retryAfter time.Duration, code, detail string) *Error {
	if code == "" {
		code = CodeUnavailable
	}
	return New(http.StatusServiceUnavailable, code, detail).WithHeader("Retry-After", RetryAfter(retryAfter))
}

// Internal is the opaque 500: it says nothing but the request ID, which the Writer fills in.
func Internal() *Error {
	return New(http.StatusInternalServerError, CodeInternal,
		"the server failed to handle this request; report the request_id if it persists")
}

// RetryAfter formats d as a Retry-After value in whole seconds, rounded up, at least 1.
func RetryAfter(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}
