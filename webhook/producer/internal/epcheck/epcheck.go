// Package epcheck holds the rules of a webhook endpoint's optional settings — description, metadata,
// delivery headers and event subscriptions — once, for driver.Endpoint.Validate (a flat error) and
// for the HTTP handlers that must locate each violation in the request body.
package epcheck

import (
	"fmt"
	"net/textproto"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Bounds of an endpoint's settings (driver.MaxDescriptionBytes and the rest repeat them).
const (
	MaxDescriptionBytes = 256
	MaxMetadataPairs    = 20
	MaxMetadataKeyBytes = 40
	MaxMetadataValBytes = 500
	MaxHeaders          = 10
	MaxHeadersBytes     = 1024
	MaxEnabledEvents    = 100
	MaxEventTypeBytes   = 100
	MaxReasonBytes      = 64
	MaxRateLimit        = 10_000
)

// Wildcard subscribes an endpoint to every event type.
const Wildcard = "*"

// Codes of the violations.
const (
	CodeTooLong           = "too_long"
	CodeTooMany           = "too_many"
	CodeNotUTF8           = "invalid_utf8"
	CodeEmpty             = "empty"
	CodeDuplicate         = "duplicate"
	CodeHeaderName        = "invalid_header_name"
	CodeHeaderValue       = "invalid_header_value"
	CodeHeaderNotAllowed  = "header_not_allowed"
	CodeWildcardNotAlone  = "wildcard_not_alone"
	CodeInvalidEventType  = "invalid_event_type"
	CodeUnknownEventType  = "unknown_event_type"
	CodeDisabledIncorrect = "invalid_disabled_state"
	CodeOutOfRange        = "out_of_range"
)

// Problem is one violation: where it is (a JSON pointer into the endpoint's wire object, such as
// "/headers/X-Tenant" or "/enabled_events/2"), its code and what is wrong, never quoting a value.
type Problem struct {
	Pointer, Code, Detail string
}

func (p Problem) String() string { return p.Pointer + ": " + p.Detail }

// pointerToken escapes s as one JSON pointer reference token (RFC 6901).
func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Description checks an endpoint's description.
func Description(d string) []Problem {
	switch {
	case !utf8.ValidString(d) || strings.ContainsRune(d, 0):
		return []Problem{{"/description", CodeNotUTF8, "must be UTF-8 text without NUL"}}
	case len(d) > MaxDescriptionBytes:
		return []Problem{{"/description", CodeTooLong, fmt.Sprintf("is %d bytes, more than the %d allowed", len(d), MaxDescriptionBytes)}}
	}
	return nil
}

// Metadata checks an endpoint's metadata: at most MaxMetadataPairs pairs, keys of 1 to
// MaxMetadataKeyBytes bytes, values of at most MaxMetadataValBytes, all UTF-8 without NUL.
func Metadata(m map[string]string) []Problem {
	var out []Problem
	if len(m) > MaxMetadataPairs {
		out = append(out, Problem{"/metadata", CodeTooMany, fmt.Sprintf("has %d pairs, more than the %d allowed", len(m), MaxMetadataPairs)})
	}
	for _, k := range sortedKeys(m) {
		v, at := m[k], "/metadata/"+pointerToken(k)
		switch {
		case k == "":
			out = append(out, Problem{at, CodeEmpty, "a key must not be empty"})
		case !text(k) || !text(v):
			out = append(out, Problem{at, CodeNotUTF8, "keys and values must be UTF-8 text without NUL"})
		case len(k) > MaxMetadataKeyBytes:
			out = append(out, Problem{at, CodeTooLong, fmt.Sprintf("the key is %d bytes, more than the %d allowed", len(k), MaxMetadataKeyBytes)})
		case len(v) > MaxMetadataValBytes:
			out = append(out, Problem{at, CodeTooLong, fmt.Sprintf("the value is %d bytes, more than the %d allowed", len(v), MaxMetadataValBytes)})
		}
	}
	return out
}

// reserved are the header names a delivery's extra headers may not set: what the producer sets itself
// (its signature, sequence, trace and user agent), what describes the body or the connection (which
// the HTTP client writes), and credentials. Names starting with X-SVC- or Content- are refused too.
//
// Why no Authorization: an endpoint's settings are shown in full to whoever reads the endpoint, stored
// in plain text and copied into support tools; a bearer token there would be a credential kept as
// carelessly as a description. The signature is how a consumer authenticates a delivery.
var reserved = []string{
	"Authorization", "Connection", "Cookie", "Expect", "Host", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Proxy-Connection", "Te", "Traceparent", "Tracestate", "Trailer",
	"Transfer-Encoding", "Upgrade", "User-Agent",
}

// HeaderAllowed reports whether name (any case) may be one of a delivery's extra headers.
func HeaderAllowed(name string) bool {
	c := textproto.CanonicalMIMEHeaderKey(name)
	return !slices.Contains(reserved, c) && !strings.HasPrefix(c, "X-Svc-") && !strings.HasPrefix(c, "Content-")
}

// Headers checks the extra headers of a delivery: at most MaxHeaders, MaxHeadersBytes of names and
// values together, names that are HTTP tokens, allowed (HeaderAllowed) and distinct in any case, values
// of visible ASCII, spaces and tabs.
func Headers(h map[string]string) []Problem {
	var out []Problem
	if len(h) > MaxHeaders {
		out = append(out, Problem{"/headers", CodeTooMany, fmt.Sprintf("has %d headers, more than the %d allowed", len(h), MaxHeaders)})
	}
	total := 0
	seen := make(map[string]bool, len(h))
	for _, k := range sortedKeys(h) {
		v, at := h[k], "/headers/"+pointerToken(k)
		total += len(k) + len(v)
		c := textproto.CanonicalMIMEHeaderKey(k)
		switch {
		case !token(k):
			out = append(out, Problem{at, CodeHeaderName, "a header name must be an HTTP token (letters, digits and !#$%&'*+-.^_`|~)"})
		case !HeaderAllowed(k):
			out = append(out, Problem{at, CodeHeaderNotAllowed,
				"the producer sets this header itself, or it is a credential, a hop-by-hop or a Content- header; X-SVC- headers are the producer's"})
		case seen[c]:
			out = append(out, Problem{at, CodeDuplicate, "the same header name appears twice, in another case"})
		case !headerValue(v):
			out = append(out, Problem{at, CodeHeaderValue, "a header value must be visible ASCII, spaces and tabs, without leading or trailing space"})
		}
		seen[c] = true
	}
	if total > MaxHeadersBytes {
		out = append(out, Problem{"/headers", CodeTooLong, fmt.Sprintf("names and values take %d bytes, more than the %d allowed", total, MaxHeadersBytes)})
	}
	return out
}

// EnabledEvents checks the shape of a subscription: at most MaxEnabledEvents distinct, non-empty
// types of at most MaxEventTypeBytes visible ASCII bytes each, or the wildcard alone. known, when not
// nil, is the catalogue a type must be in (the wildcard aside).
func EnabledEvents(types []string, known func(string) bool) []Problem {
	var out []Problem
	if len(types) > MaxEnabledEvents {
		return []Problem{{"/enabled_events", CodeTooMany, fmt.Sprintf("lists %d types, more than the %d allowed", len(types), MaxEnabledEvents)}}
	}
	for i, t := range types {
		at := fmt.Sprintf("/enabled_events/%d", i)
		switch {
		case t == Wildcard:
			if len(types) > 1 {
				out = append(out, Problem{at, CodeWildcardNotAlone, `"*" subscribes to every type and stands alone`})
			}
		case t == "":
			out = append(out, Problem{at, CodeEmpty, "an event type must not be empty"})
		case len(t) > MaxEventTypeBytes || !visibleASCII(t):
			out = append(out, Problem{at, CodeInvalidEventType, fmt.Sprintf("an event type is visible ASCII of at most %d bytes", MaxEventTypeBytes)})
		case slices.Contains(types[:i], t):
			out = append(out, Problem{at, CodeDuplicate, "this type is listed twice"})
		case known != nil && !known(t):
			out = append(out, Problem{at, CodeUnknownEventType, "no event type of this name exists (GET /v1/event_types lists them)"})
		}
	}
	return out
}

// Disabled checks that a disabled endpoint says why and since when, and an enabled one neither.
func Disabled(reason string, disabledAtZero bool) []Problem {
	switch {
	case reason == "" && !disabledAtZero:
		return []Problem{{"/disabled_reason", CodeDisabledIncorrect, "a disabled endpoint needs a reason"}}
	case reason != "" && disabledAtZero:
		return []Problem{{"/disabled_at", CodeDisabledIncorrect, "a disabled endpoint needs the time it was disabled"}}
	case len(reason) > MaxReasonBytes || (reason != "" && !visibleASCII(reason)):
		return []Problem{{"/disabled_reason", CodeTooLong, fmt.Sprintf("a reason is visible ASCII of at most %d bytes", MaxReasonBytes)}}
	}
	return nil
}

// RateLimit checks an endpoint's rate limit: 0 (unthrottled) or 1 to MaxRateLimit deliveries a second.
func RateLimit(n int) []Problem {
	if n != 0 && (n < 1 || n > MaxRateLimit) {
		return []Problem{{"/rate_limit", CodeOutOfRange, fmt.Sprintf("a rate limit is 1 to %d deliveries a second, or null for none", MaxRateLimit)}}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func text(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// token reports whether s is an HTTP token (RFC 9110, section 5.6.2).
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x7f || c <= ' ' || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// headerValue reports whether s is a header value the producer sends as it is: visible ASCII,
// spaces and tabs, without leading or trailing whitespace (which a receiver would trim).
func headerValue(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < ' ' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return strings.TrimSpace(s) == s
}
