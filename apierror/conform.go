package apierror

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// CheckResponse reports whether an error response (4xx or 5xx) conforms to the platform's error
// conventions, for product teams' own tests. It reads the body and puts it back, so the caller can
// read it again. Any other response conforms trivially. The returned error lists every rule broken.
func CheckResponse(resp *http.Response) error {
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("apierror: reading body: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return Check(resp.StatusCode, resp.Header, body)
}

// genericCodes are codes that name no input and no reason.
var genericCodes = map[string]bool{
	"": true, "error": true, "invalid": true, "invalid_request": true, "bad_request": true,
	"unknown": true, "unknown_error": true, "validation_error": true, "client_error": true,
}

// stockDetails are details that say nothing a status line does not, normalised by stockPhrase.
var stockDetails = map[string]bool{
	"": true, "invalid request": true, "bad request": true, "error": true, "invalid input": true,
	"validation failed": true, "invalid parameters": true, "unprocessable entity": true,
	"something went wrong": true, "oops something went wrong": true, "an error occurred": true,
	"an error has occurred": true, "error occurred": true, "unknown error": true, "an unknown error occurred": true,
	"request failed": true, "the request failed": true, "failed": true, "failure": true, "invalid": true,
	"the request is invalid": true, "the request was invalid": true, "your request is invalid": true,
	"bad input": true, "internal error": true, "unexpected error": true, "an unexpected error occurred": true,
	"please try again": true, "please try again later": true, "something went wrong please try again": true,
	"something went wrong please try again later": true, "not allowed": true, "denied": true,
	"access denied": true, "forbidden": true, "unauthorized": true,
}

// stockPhrase normalises a detail for the stockDetails lookup: lower case, letters and digits only,
// words separated by one space ("Oops! Something went wrong." is "oops something went wrong").
func stockPhrase(detail string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToLower(detail) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 0x7f {
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteRune(r)
			continue
		}
		space = true
	}
	return b.String()
}

// isStock reports whether a detail is only a stock phrase or the text of some HTTP status.
func isStock(detail string) bool {
	d := stockPhrase(detail)
	if stockDetails[d] {
		return true
	}
	for code := 400; code <= 599; code++ {
		if t := http.StatusText(code); t != "" && d == stockPhrase(t) {
			return true
		}
	}
	return false
}

// genericWords are the words any failure could use: they name no input. With the words of every
// status text (statusWords), a detail or code made of nothing else ("Invalid request body",
// "validation_failed", "The requested resource does not exist") does not say which input failed.
var genericWords = map[string]bool{
	// Function words.
	"a": true, "an": true, "the": true, "this": true, "that": true, "these": true, "those": true, "your": true,
	"you": true, "its": true, "it": true, "is": true, "are": true, "was": true, "were": true, "be": true,
	"been": true, "has": true, "have": true, "had": true, "do": true, "does": true, "did": true, "not": true,
	"no": true, "any": true, "some": true, "all": true, "one": true, "more": true, "of": true, "in": true,
	"on": true, "at": true, "to": true, "for": true, "from": true, "with": true, "by": true, "as": true,
	"or": true, "and": true, "but": true, "such": true, "there": true, "please": true, "again": true,
	"later": true, "try": true, "retry": true, "check": true, "could": true, "cannot": true, "can": true,
	// The request and its parts, named generically.
	"request": true, "requests": true, "body": true, "input": true, "inputs": true, "data": true,
	"payload": true, "parameter": true, "parameters": true, "param": true, "params": true, "field": true,
	"fields": true, "value": true, "values": true, "argument": true, "arguments": true, "entity": true,
	"content": true, "contents": true, "message": true, "resource": true, "object": true, "item": true,
	"query": true, "header": true, "headers": true, "path": true, "format": true, "client": true,
	// Failure in general.
	"invalid": true, "bad": true, "malformed": true, "wrong": true, "incorrect": true, "illegal": true,
	"improper": true, "unacceptable": true, "unprocessable": true, "unsupported": true, "failed": true,
	"fails": true, "failure": true, "fail": true, "error": true, "errors": true, "problem": true,
	"problems": true, "issue": true, "occurred": true, "validation": true, "valid": true, "unknown": true,
	"missing": true, "required": true, "exist": true, "exists": true, "found": true, "requested": true,
	"given": true, "provided": true, "supplied": true, "sent": true, "specified": true, "something": true,
	"went": true, "unexpected": true, "denied": true, "allowed": true, "permitted": true,
}

// statusWords are the words of every 4xx and 5xx status text ("not", "found", "too", "many", …), less
// those that name one part of a request precisely (inputWords): a request has one method and one
// version, so "method_not_allowed" and "version_unknown" do name their input.
var statusWords = func() map[string]bool {
	m := make(map[string]bool)
	for code := 400; code <= 599; code++ {
		for _, w := range strings.Fields(stockPhrase(http.StatusText(code))) {
			m[w] = !inputWords[w]
		}
	}
	return m
}()

// inputWords are the words of status texts that name a part of the request with no other like it.
var inputWords = map[string]bool{"method": true, "version": true, "length": true, "range": true, "media": true, "uri": true}

// namesSomething reports whether s — a detail, or a code — holds a word beyond genericWords and the
// words of status texts: a name ("order", "Authorization", "account"), an identifier ("ord_1",
// "/items/3", "Retry-After" counts by its parts) or a number. This is how Check judges that a problem
// without located violations names the failing input: it cannot know the service's inputs, so it
// refuses what could be said of any input, and takes anything more specific at its word.
func namesSomething(s string) bool {
	part := func(p string) bool {
		return p != "" && !genericWords[p] && !statusWords[p]
	}
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= '0' && r <= '9':
			return true // a number or an identifier with one: ord_1, 10, /items/3
		case r >= 'a' && r <= 'z' || r > 0x7f:
			b.WriteRune(r)
			continue
		case r == '\'':
			continue // "don't", "I'm"
		}
		if part(b.String()) {
			return true
		}
		b.Reset()
	}
	return part(b.String())
}

// Check is CheckResponse for a status, headers and body already read. An error response (4xx or 5xx)
// conforms when its Content-Type is application/problem+json and the body is a JSON object with a
// type that is an RFC 3986 URI reference, a title, a status equal to the response's, a specific
// snake_case code, a request_id matching X-Request-Id, and a detail that, when present, is more than a
// stock phrase ("Something went wrong", a status text). A 4xx must also name the failing input and
// why: either located violations that each have a location, a pointer or name, a snake_case code and
// a detail, or a specific code with a detail that names the failing input. A code or detail names it
// when it holds a word beyond those any failure could use ("request", "body", "invalid", "field",
// "value", the words of status texts, …) or a number: "Invalid request body" and
// "validation_failed" do not, "no order ord_1 in this account" and "order_not_found" do. Anything
// else conforms trivially.
func Check(status int, header http.Header, body []byte) error {
	if status < 400 || status > 599 {
		return nil
	}
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if mt, _, _ := mime.ParseMediaType(header.Get("Content-Type")); mt != MediaType {
		fail("Content-Type is %q, want %s", mt, MediaType)
	}
	var p struct {
		Type      *string          `json:"type"`
		Title     *string          `json:"title"`
		Status    *int             `json:"status"`
		Detail    string           `json:"detail"`
		Code      string           `json:"code"`
		RequestID string           `json:"request_id"`
		Errors    []map[string]any `json:"errors"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		fail("body is not a JSON problem object: %v", err)
		return joinProblems(problems)
	}
	if p.Type == nil || *p.Type == "" {
		fail("member type is missing")
	} else if !uriReference(*p.Type) {
		fail("member type %q is not an RFC 3986 URI reference", *p.Type)
	}
	if p.Title == nil || *p.Title == "" {
		fail("member title is missing")
	}
	if p.Status == nil || *p.Status != status {
		fail("member status does not equal the response status %d", status)
	}
	if !snakeCase(p.Code) {
		fail("member code %q is not a snake_case identifier", p.Code)
	}
	if p.RequestID == "" {
		fail("member request_id is missing")
	}
	if h := header.Get(HeaderRequestID); h == "" {
		fail("header X-Request-Id is missing")
	} else if p.RequestID != "" && h != p.RequestID {
		fail("member request_id does not match the X-Request-Id header")
	}
	for i, v := range p.Errors {
		loc, _ := v["location"].(string)
		code, _ := v["code"].(string)
		detail, _ := v["detail"].(string)
		switch Location(loc) {
		case LocationBody:
			ptr, ok := v["pointer"].(string)
			if !ok || !validPointer(ptr) {
				fail("errors[%d]: body violation without an RFC 6901 pointer", i)
			}
		case LocationQuery, LocationHeader, LocationPath:
			if name, _ := v["name"].(string); name == "" {
				fail("errors[%d]: %s violation without a name", i, loc)
			}
		default:
			fail("errors[%d]: location %q is not body, query, header or path", i, loc)
		}
		if !snakeCase(code) {
			fail("errors[%d]: code %q is not a snake_case identifier", i, code)
		}
		if strings.TrimSpace(detail) == "" {
			fail("errors[%d]: detail is empty", i)
		} else if isStock(detail) {
			fail("errors[%d]: detail %q is only a stock phrase", i, detail)
		}
	}
	switch {
	case status >= 500:
		if p.Detail != "" && isStock(p.Detail) {
			fail("detail %q is only a stock phrase", p.Detail)
		}
	case len(p.Errors) == 0:
		if genericCodes[p.Code] || !namesSomething(p.Code) {
			fail("no located violation, and code %q names no failing input", p.Code)
		}
		switch {
		case isStock(p.Detail):
			fail("no located violation, and detail %q does not say what failed and why", p.Detail)
		case !namesSomething(p.Detail):
			fail("no located violation, and detail %q does not name the failing input", p.Detail)
		}
	case p.Detail != "" && isStock(p.Detail):
		fail("detail %q is only a stock phrase", p.Detail)
	}
	return joinProblems(problems)
}

// validPointer reports whether ptr is an RFC 6901 JSON Pointer: empty, or "/"-separated tokens in which
// "~" is only ever followed by "0" or "1".
func validPointer(ptr string) bool {
	if ptr == "" {
		return true
	}
	if ptr[0] != '/' {
		return false
	}
	for i := 0; i < len(ptr); i++ {
		if ptr[i] == '~' && (i+1 == len(ptr) || ptr[i+1] != '0' && ptr[i+1] != '1') {
			return false
		}
	}
	return true
}

// snakeCase reports whether s is a snake_case identifier: lower-case words of letters and digits, the
// first starting with a letter, joined by single underscores ("order_not_found", not "Order",
// "order__id", "_x" or "x_").
func snakeCase(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
		case c == '_' && s[i-1] != '_':
		default:
			return false
		}
	}
	return true
}

// uriReference reports whether s is an RFC 3986 URI-reference: only unreserved, reserved and
// percent-encoded characters, a well-formed scheme when there is one, and a shape net/url accepts.
// "https://svcplatform.dev/problems/x", "/problems/x" and "about:blank" are; "order not found",
// "%zz" and "1http://x" are not.
func uriReference(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
		case strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0:
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
			i += 2
		default:
			return false
		}
	}
	// A colon before any '/', '?' or '#' ends a scheme, which must start with a letter.
	if end := strings.IndexAny(s, ":/?#"); end >= 0 && s[end] == ':' {
		scheme := s[:end]
		if scheme == "" || !(scheme[0] >= 'a' && scheme[0] <= 'z' || scheme[0] >= 'A' && scheme[0] <= 'Z') {
			return false
		}
		for i := 1; i < len(scheme); i++ {
			c := scheme[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
				return false
			}
		}
	}
	_, err := url.Parse(s)
	return err == nil
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func joinProblems(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return errors.New("apierror: non-conforming error response: " + strings.Join(problems, "; "))
}
