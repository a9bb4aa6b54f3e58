package apierror

import (
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// CodeQueryMalformed is the code of a query string that cannot be parsed.
const CodeQueryMalformed = "query_malformed"

// ParseQuery parses the request's query string strictly. net/http's r.URL.Query() drops a pair it
// cannot decode without a word, so "?from=1&to=%zz" would read as a request without "to" and be
// served with its default; here a malformed percent-escape, a ';' separator (which Go no longer
// splits on) or a name or value that is not UTF-8 is a 400 problem located at the query parameter
// ("query_malformed"), naming the parameter as far as it can be read.
func ParseQuery(r *http.Request) (url.Values, error) {
	raw := r.URL.RawQuery
	vals := make(url.Values)
	var bad []Violation
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		rawName, rawValue, _ := strings.Cut(pair, "=")
		name, nameErr := url.QueryUnescape(rawName)
		value, valueErr := url.QueryUnescape(rawValue)
		switch {
		case nameErr != nil || !utf8.ValidString(name):
			bad = append(bad, Query(printable(rawName), CodeQueryMalformed,
				"the parameter name is not valid percent-encoded UTF-8"))
		case strings.Contains(pair, ";"):
			bad = append(bad, Query(printable(name), CodeQueryMalformed,
				"contains ';': separate parameters with '&', and percent-encode a ';' in a value as %3B"))
		case valueErr != nil || !utf8.ValidString(value):
			bad = append(bad, Query(printable(name), CodeQueryMalformed,
				"the value is not valid percent-encoded UTF-8"))
		default:
			vals[name] = append(vals[name], value)
		}
	}
	if len(bad) > 0 {
		return nil, Invalid(bad...)
	}
	return vals, nil
}

// printable makes a parameter name fit for a problem: valid UTF-8, no control characters, at most
// 64 bytes.
func printable(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > 64 {
		cut := 64
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	if s == "" {
		s = "(unnamed)"
	}
	return s
}
