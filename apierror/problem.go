package apierror

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/svcplatform/conventions/internal/jsonstr"
	"github.com/svcplatform/conventions/internal/strictjson"
)

// MediaType is the media type of every problem body (RFC 9457 §3).
const MediaType = "application/problem+json"

// Location says where in the request a violation was found. The zero value, "", is no location:
// every Violation the builders make has one of the four below.
type Location string

// The four places a client can put input.
const (
	LocationBody   Location = "body"
	LocationQuery  Location = "query"
	LocationHeader Location = "header"
	LocationPath   Location = "path"
)

// Violation is one located failure: which input, where, and why. For LocationBody, Pointer is an
// RFC 6901 JSON Pointer into the request body ("" is the whole body); for the other locations Name is
// the header, query or path parameter name. It is a plain value; the zero Violation has no location
// and no code, so it locates nothing: build one with Body, Header, Query or Path.
type Violation struct {
	Location Location `json:"location"`
	Pointer  string   `json:"pointer,omitempty"`
	Name     string   `json:"name,omitempty"`
	Code     string   `json:"code"`
	Detail   string   `json:"detail"`
}

// Body returns a violation located at the JSON Pointer of a request body member.
func Body(pointer, code, detail string) Violation {
	return Violation{Location: LocationBody, Pointer: pointer, Code: code, Detail: detail}
}

// Header returns a violation located at a request header. The detail must not echo the header's
// value: it may be a secret.
func Header(name, code, detail string) Violation {
	return Violation{Location: LocationHeader, Name: name, Code: code, Detail: detail}
}

// Query returns a violation located at a query parameter.
func Query(name, code, detail string) Violation {
	return Violation{Location: LocationQuery, Name: name, Code: code, Detail: detail}
}

// Path returns a violation located at a path parameter.
func Path(name, code, detail string) Violation {
	return Violation{Location: LocationPath, Name: name, Code: code, Detail: detail}
}

// writeWhere names the violated input for a human: "body /side", "header Idempotency-Key".
func (v Violation) writeWhere(b *strings.Builder) {
	if v.Location == LocationBody {
		b.WriteString("body")
		if v.Pointer != "" {
			b.WriteByte(' ')
			b.WriteString(v.Pointer)
		}
		return
	}
	b.WriteString(string(v.Location))
	b.WriteByte(' ')
	b.WriteString(v.Name)
}

// Error is an RFC 9457 problem. Handlers return it (directly or wrapped) and Write renders it; the
// client side gets it back from Parse. The zero value is not useful: build one with New or a builder.
//
// Clients must ignore members they do not know: new extension members may be added at any time.
type Error struct {
	// Type is a URI that identifies the problem type. When empty, the Writer derives it from Code.
	Type string
	// Title is a short summary of the problem type; when empty, the HTTP status text.
	Title string
	// Status is the HTTP status code.
	Status int
	// Detail explains this occurrence. The Writer replaces any word in it shaped like a credential
	// (Redact), so a detail that quotes client input cannot reflect a key pasted in the wrong place.
	Detail string
	// Instance optionally identifies this occurrence.
	Instance string
	// Code is the stable snake_case machine identifier of the problem.
	Code string
	// RequestID is the X-Request-Id of the request that failed; the Writer fills it in.
	RequestID string
	// Errors lists the located violations.
	Errors []Violation
	// Extensions are further members of the body (for example "supported_versions").
	Extensions map[string]any
	// Headers are set on the response before it is written (Retry-After, WWW-Authenticate).
	Headers http.Header
}

// Error returns "apierror: <status> <code>: <detail>", the detail redacted as the Writer redacts it.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("apierror: ")
	b.WriteString(strconv.Itoa(e.Status))
	b.WriteByte(' ')
	b.WriteString(e.Code)
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(Redact(e.Detail))
	}
	return b.String()
}

// WithHeader sets a response header on the problem and returns it, for chaining.
func (e *Error) WithHeader(key, value string) *Error {
	if e.Headers == nil {
		e.Headers = make(http.Header, 1)
	}
	e.Headers.Set(key, value)
	return e
}

// With sets an extension member and returns the problem, for chaining. Reserved member names
// (type, title, status, detail, instance, code, request_id, errors) are refused with a panic, since
// using one is a programming error.
func (e *Error) With(member string, value any) *Error {
	if reserved(member) {
		panic(fmt.Sprintf("apierror: extension member %q is reserved", member))
	}
	if e.Extensions == nil {
		e.Extensions = make(map[string]any, 1)
	}
	e.Extensions[member] = value
	return e
}

func reserved(member string) bool {
	switch member {
	case "type", "title", "status", "detail", "instance", "code", "request_id", "errors":
		return true
	}
	return false
}

// MarshalJSON renders the problem body with the members in a fixed order.
func (e *Error) MarshalJSON() ([]byte, error) {
	return e.appendJSON(make([]byte, 0, 256), DefaultTypeBase, e.RequestID)
}

// UnmarshalJSON reads a problem body; unknown members land in Extensions.
func (e *Error) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*e = Error{}
	fields := []struct {
		name string
		dst  any
	}{
		{"type", &e.Type}, {"title", &e.Title}, {"status", &e.Status}, {"detail", &e.Detail},
		{"instance", &e.Instance}, {"code", &e.Code}, {"request_id", &e.RequestID}, {"errors", &e.Errors},
	}
	for _, f := range fields {
		if v, ok := raw[f.name]; ok {
			if err := json.Unmarshal(v, f.dst); err != nil {
				return fmt.Errorf("apierror: member %q: %w", f.name, err)
			}
			delete(raw, f.name)
		}
	}
	for k, v := range raw {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return err
		}
		if e.Extensions == nil {
			e.Extensions = make(map[string]any, len(raw))
		}
		e.Extensions[k] = x
	}
	return nil
}

// appendJSON appends the body; requestID overrides e.RequestID so that Write never copies or mutates e.
func (e *Error) appendJSON(b []byte, typeBase, requestID string) ([]byte, error) {
	title := e.Title
	if title == "" {
		title = http.StatusText(e.Status)
	}
	b = append(b, `{"type":`...)
	if e.Type != "" {
		b = jsonstr.Append(b, e.Type)
	} else {
		// typeBase + Code, escaped without building the joined string.
		b = append(b, '"')
		b = jsonstr.AppendContent(b, typeBase, false)
		b = jsonstr.AppendContent(b, e.Code, false)
		b = append(b, '"')
	}
	b = append(b, `,"title":`...)
	b = jsonstr.Append(b, redact(title))
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	if e.Detail != "" {
		b = append(b, `,"detail":`...)
		b = jsonstr.Append(b, redact(e.Detail))
	}
	if e.Instance != "" {
		b = append(b, `,"instance":`...)
		b = jsonstr.Append(b, redact(e.Instance))
	}
	b = append(b, `,"code":`...)
	b = jsonstr.Append(b, e.Code)
	if requestID != "" {
		b = append(b, `,"request_id":`...)
		b = jsonstr.Append(b, requestID)
	}
	if len(e.Errors) > 0 {
		b = append(b, `,"errors":[`...)
		for i, v := range e.Errors {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"location":`...)
			b = jsonstr.Append(b, string(v.Location))
			if v.Location == LocationBody {
				// The pointer is always present for body violations: "" means the whole body.
				// Pointer and name repeat client input (a member or parameter name): redacted like
				// the details, which stays a valid pointer.
				b = append(b, `,"pointer":`...)
				b = jsonstr.Append(b, redact(v.Pointer))
			} else {
				b = append(b, `,"name":`...)
				b = jsonstr.Append(b, redact(v.Name))
			}
			b = append(b, `,"code":`...)
			b = jsonstr.Append(b, v.Code)
			b = append(b, `,"detail":`...)
			b = jsonstr.Append(b, redact(v.Detail))
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(e.Extensions) > 0 {
		keys := make([]string, 0, len(e.Extensions))
		for k := range e.Extensions {
			if !reserved(k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			v, err := json.Marshal(e.Extensions[k])
			if err != nil {
				return nil, fmt.Errorf("apierror: extension %q: %w", k, err)
			}
			if LooksLikeCredential(string(v)) {
				if v, err = redactJSON(v); err != nil {
					return nil, fmt.Errorf("apierror: extension %q: %w", k, err)
				}
			}
			b = append(b, ',')
			b = jsonstr.Append(b, k)
			b = append(b, ':')
			b = append(b, v...)
		}
	}
	return append(b, '}'), nil
}

// redactJSON returns a JSON value with every string in it, member names included, redacted (Redact):
// an extension member may carry what the client sent, as the detail may.
func redactJSON(v []byte) ([]byte, error) {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return nil, err
	}
	return json.Marshal(redactValue(x))
}

func redactValue(x any) any {
	switch x := x.(type) {
	case string:
		return Redact(x)
	case []any:
		for i := range x {
			x[i] = redactValue(x[i])
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			out[Redact(k)] = redactValue(v)
		}
		return out
	}
	return x
}

// Pointer builds an RFC 6901 JSON Pointer from reference tokens, escaping "~" and "/":
// Pointer("items", "3", "qty") is "/items/3/qty".
func Pointer(tokens ...string) string { return strictjson.Pointer(tokens...) }

// Violations returns the problem's located violations.
func (e *Error) Violations() []Violation { return e.Errors }
