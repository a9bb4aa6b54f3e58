// Package strictjson decodes JSON strictly and says where the input went wrong: apierror.Decode's
// parser, kept out of apierror's API.
//
// Decode is encoding/json's Unmarshal with what encoding/json lets through silently refused — a
// member given twice (it keeps the last), a member name that matches a field only when case is
// ignored (it takes it), a string that is not UTF-8 or holds an escaped lone surrogate (it replaces
// it with U+FFFD), data after the value — and every failure located: a JSON Pointer, array indices
// included, or a byte offset for a syntax error. It is one scan over the bytes guided by the
// destination's type, then encoding/json itself; the type's shape is built once and cached.
//
// The package knows nothing of HTTP or problems: apierror turns an *Error into a 400 whose violation
// carries the Kind's code.
package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// Options tune Decode. The zero value refuses unknown members.
type Options struct {
	// AllowUnknownFields accepts members the destination type does not have; a member whose name
	// matches a field only when case is ignored is then dropped, never decoded into the field.
	AllowUnknownFields bool
}

// Kind says what is wrong with the input.
type Kind int

const (
	// Syntax: the input is not JSON. Error.Offset is where parsing failed.
	Syntax Kind = iota + 1
	// TrailingData: something other than white space follows the value, at Error.Offset.
	TrailingData
	// DuplicateMember: an object names the same member twice.
	DuplicateMember
	// InvalidUTF8: a string holds bytes that are not UTF-8, or an escaped lone surrogate.
	InvalidUTF8
	// UnknownField: a member the destination type does not have, or has only in another case.
	UnknownField
	// WrongType: a value of a JSON type the destination cannot hold, or out of its range.
	WrongType
	// InvalidValue: a custom UnmarshalJSON or UnmarshalText refused a value; Detail is its message.
	InvalidValue
)

// Error is input Decode refuses. Pointer is the RFC 6901 JSON Pointer of the value at fault ("" for
// the whole body, and for Syntax and TrailingData, which are located by Offset instead).
type Error struct {
	Kind    Kind
	Pointer string
	Offset  int64
	// Detail says what is wrong, for a human: "is not a known field", "must be a string, got
	// number"; for Syntax, encoding/json's reason.
	Detail string
}

func (e *Error) Error() string {
	if e.Kind == Syntax {
		return "strictjson: invalid JSON at byte offset " + strconv.FormatInt(e.Offset, 10) + ": " + e.Detail
	}
	return "strictjson: " + e.Pointer + ": " + e.Detail
}

// at returns the refusal of the value at pointer.
func at(pointer string, kind Kind, detail string) Error {
	return Error{Kind: kind, Pointer: pointer, Detail: detail}
}

// Decode decodes the first JSON value of data into dst, a non-nil pointer, strictly. Input it refuses
// is an *Error; any other error means dst is not a valid destination (a *json.InvalidUnmarshalError):
// a programming error.
func Decode(data []byte, dst any, opts Options) error {
	t := reflect.TypeOf(dst)
	if t == nil || t.Kind() != reflect.Pointer || reflect.ValueOf(dst).IsNil() {
		return &json.InvalidUnmarshalError{Type: t}
	}
	// One pass over the bytes for what encoding/json lets through silently; then encoding/json
	// itself, which no longer needs DisallowUnknownFields: every member name left is an exact match
	// or, with AllowUnknownFields, one it has no field for.
	sc := scanPool.Get().(*strictScan)
	defer sc.release()
	sc.reset(data, opts.AllowUnknownFields)
	v, end, ok := sc.scan(shapeOf(t.Elem()))
	if v != nil {
		return v
	}
	if ok {
		if start := skipSpace(data, end); start < len(data) {
			return &Error{Kind: TrailingData, Offset: int64(start),
				Detail: fmt.Sprintf("unexpected data after the JSON value at byte offset %d", start)}
		}
		if len(sc.strip) > 0 {
			data = sc.stripped()
		}
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return mapDecodeError(err, data, dst, opts.AllowUnknownFields)
	}
	return nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// syntaxError is a Syntax refusal at offset.
func syntaxError(offset int64, reason string) *Error {
	return &Error{Kind: Syntax, Offset: offset, Detail: reason}
}

func mapDecodeError(err error, data []byte, dst any, allowUnknown bool) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var inv *json.InvalidUnmarshalError
	switch {
	case errors.As(err, &inv):
		return err
	case errors.As(err, &syn):
		if syn.Offset >= int64(len(data)) && (syn.Error() == "unexpected end of JSON input" ||
			strings.HasPrefix(syn.Error(), "invalid character ' '") && len(data) > 0 && data[len(data)-1] != ' ') {
			// The input ended inside a value; encoding/json blames the end, or a space it imagines
			// there: the offset is where the input stopped.
			return syntaxError(int64(len(data)), "unexpected end of JSON input")
		}
		// Offset counts the bytes read, the offending one included; report that byte's own 0-based offset.
		return syntaxError(max(syn.Offset-1, 0), syn.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return syntaxError(int64(len(data)), "unexpected end of JSON input")
	}
	// Type and unknown-field errors: walk the input against the destination type to find the exact
	// JSON Pointer, array indices included, which encoding/json does not report.
	if v := locate(data, reflect.TypeOf(dst), allowUnknown); v != nil {
		return v
	}
	if errors.As(err, &typ) {
		return &Error{Kind: WrongType, Pointer: fieldPointer(typ.Field),
			Detail: "must be a " + typ.Type.Kind().String() + ", got " + typ.Value}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if s, uerr := strconv.Unquote(name); uerr == nil {
			name = s
		}
		return &Error{Kind: UnknownField, Pointer: Pointer(name), Detail: "is not a known field"}
	}
	// A custom UnmarshalJSON or UnmarshalText refused a value it found; its message is the reason.
	return &Error{Kind: InvalidValue, Detail: err.Error()}
}

// fieldPointer turns encoding/json's dotted field path into a JSON Pointer.
func fieldPointer(field string) string {
	if field == "" {
		return ""
	}
	return Pointer(strings.Split(field, ".")...)
}

// Pointer builds an RFC 6901 JSON Pointer from reference tokens, escaping "~" and "/":
// Pointer("items", "3", "qty") is "/items/3/qty".
func Pointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

var tokenEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapeToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return tokenEscaper.Replace(t)
}
