package apierror

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// CheckResponse reports whether a 4xx response conforms to the platform's error conventions, for
// product teams' own tests. It reads the body and puts it back, so the caller can read it again. A
// response that is not a 4xx conforms trivially. The returned error lists every rule broken.
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

// genericDetails are details that say nothing a status line does not.
var genericDetails = map[string]bool{
	"": true, "invalid request": true, "bad request": true, "error": true, "invalid input": true,
	"validation failed": true, "invalid parameters": true, "unprocessable entity": true,
}

// Check is CheckResponse for a status, headers and body already read. A 4xx conforms when:
// its Content-Type is application/problem+json; the body is a JSON object with type, title, a status
// equal to the response's, a specific snake_case code and a request_id matching X-Request-Id; and it
// names the failing input and why: either located violations that each have a location, a pointer or
// name, a code and a detail, or a specific code with a detail that is more than a generic phrase.
func Check(status int, header http.Header, body []byte) error {
	if status < 400 || status > 499 {
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
		}
	}
	if len(p.Errors) == 0 {
		if genericCodes[p.Code] {
			fail("no located violation, and code %q names no failing input", p.Code)
		}
		d := strings.ToLower(strings.TrimRight(strings.TrimSpace(p.Detail), "."))
		if genericDetails[d] || d == strings.ToLower(http.StatusText(status)) {
			fail("no located violation, and detail %q does not say what failed and why", p.Detail)
		}
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

func snakeCase(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func joinProblems(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return errors.New("apierror: non-conforming 4xx: " + strings.Join(problems, "; "))
}
