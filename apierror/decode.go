package apierror

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
)

// DefaultMaxBodyBytes caps a request body when DecodeOptions.MaxBytes is zero: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// DecodeOptions tune Decode. A nil *DecodeOptions means the defaults.
type DecodeOptions struct {
	// MaxBytes caps the body; zero means DefaultMaxBodyBytes. A larger body is a 413.
	MaxBytes int64
	// AllowUnknownFields accepts members the destination type does not have. By default they are a
	// 400 unknown_field, so that a misspelt optional field never passes silently.
	AllowUnknownFields bool
}

// Decode reads r's body as one JSON value into dst, strictly: the body is capped, unknown fields and
// trailing data are refused, and every failure is an *Error whose violation says where the input went
// wrong (the JSON Pointer of a field of the wrong type, the byte offset of a syntax error). An error
// that is not an *Error means dst is not a valid destination: a programming error.
func Decode(r *http.Request, dst any, opts *DecodeOptions) error {
	limit := int64(DefaultMaxBodyBytes)
	if opts != nil && opts.MaxBytes > 0 {
		limit = opts.MaxBytes
	}
	if r.ContentLength > limit {
		return BodyTooLarge(limit)
	}
	if r.Body == nil {
		return Invalid(Body("", CodeBodyMissing, "a JSON body is required"))
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return BodyTooLarge(mbe.Limit)
		}
		return Invalid(Body("", "body_unreadable", "the request body could not be read completely"))
	}
	if int64(len(data)) > limit {
		return BodyTooLarge(limit)
	}
	return DecodeBytes(data, dst, opts)
}

// DecodeBytes is Decode for a body already in memory (its size is not checked).
func DecodeBytes(data []byte, dst any, opts *DecodeOptions) error {
	allowUnknown := opts != nil && opts.AllowUnknownFields
	if len(bytes.TrimSpace(data)) == 0 {
		return Invalid(Body("", CodeBodyMissing, "a JSON body is required"))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if !allowUnknown {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(dst); err != nil {
		return mapDecodeError(err, data, dst, allowUnknown)
	}
	if _, err := dec.Token(); err != io.EOF {
		start := skipSpace(data, int(dec.InputOffset()))
		if err == nil {
			// Token read past the extra value; report where the first one ended instead.
			start = skipSpace(data, int(firstValueEnd(data)))
		}
		return Invalid(Body("", CodeTrailingData, fmt.Sprintf("unexpected data after the JSON value at byte offset %d", start)))
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

// firstValueEnd returns the offset just past the first JSON value in data (which is known to be valid).
func firstValueEnd(data []byte) int64 {
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	_ = dec.Decode(&raw)
	return dec.InputOffset()
}

func mapDecodeError(err error, data []byte, dst any, allowUnknown bool) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var inv *json.InvalidUnmarshalError
	switch {
	case errors.As(err, &inv):
		return fmt.Errorf("apierror: decode destination: %w", err)
	case errors.As(err, &syn):
		// Offset counts the bytes read, the offending one included; report that byte's own 0-based offset.
		return MalformedJSON(max(syn.Offset-1, 0), syn.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return MalformedJSON(int64(len(data)), "unexpected end of JSON input")
	}
	// Type and unknown-field errors: walk the input against the destination type to find the exact
	// JSON Pointer, array indices included, which encoding/json does not report.
	if v := locate(data, reflect.TypeOf(dst), allowUnknown); v != nil {
		return Invalid(*v)
	}
	if errors.As(err, &typ) {
		return WrongType(fieldPointer(typ.Field), typ.Type.Kind().String(), typ.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if s, uerr := strconv.Unquote(name); uerr == nil {
			name = s
		}
		return UnknownField(Pointer(name))
	}
	// A custom UnmarshalJSON or UnmarshalText refused a value it found; its message is the reason.
	return Invalid(Body("", "invalid_value", err.Error()))
}

// fieldPointer turns encoding/json's dotted field path into a JSON Pointer.
func fieldPointer(field string) string {
	if field == "" {
		return ""
	}
	return Pointer(strings.Split(field, ".")...)
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	numberType          = reflect.TypeFor[json.Number]()
)

// locator walks JSON tokens alongside a Go type, keeping the JSON Pointer of the current value.
type locator struct {
	dec          *json.Decoder
	path         []string
	allowUnknown bool
}

// locate finds the first member of data that cannot go into t: unknown, or of the wrong JSON type.
func locate(data []byte, t reflect.Type, allowUnknown bool) *Violation {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	l := &locator{dec: dec, allowUnknown: allowUnknown}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	v, _ := l.value(t)
	return v
}

func (l *locator) pointer() string { return Pointer(l.path...) }

func (l *locator) wrong(t reflect.Type, got string) *Violation {
	v := Body(l.pointer(), CodeWrongType, "must be "+jsonKind(t)+", got "+got)
	return &v
}

// value consumes one JSON value and reports the first problem found in it.
func (l *locator) value(t reflect.Type) (*Violation, error) {
	tok, err := l.dec.Token()
	if err != nil {
		return nil, err
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	custom := reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType)
	if custom && t != numberType {
		return nil, l.skip(tok)
	}
	switch tok := tok.(type) {
	case nil:
		return nil, nil
	case bool:
		if t.Kind() == reflect.Bool || t.Kind() == reflect.Interface {
			return nil, nil
		}
		return l.wrong(t, "boolean"), nil
	case string:
		if t.Kind() == reflect.String || t.Kind() == reflect.Interface || t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return nil, nil
		}
		return l.wrong(t, "string"), nil
	case json.Number:
		return l.number(t, tok), nil
	case json.Delim:
		switch tok {
		case '{':
			return l.object(t)
		case '[':
			return l.array(t)
		}
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

func (l *locator) number(t reflect.Type, n json.Number) *Violation {
	s := string(n)
	switch t.Kind() {
	case reflect.Interface:
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if _, err := strconv.ParseInt(s, 10, t.Bits()); err != nil {
			v := Body(l.pointer(), CodeWrongType, "must be an integer that fits in "+strconv.Itoa(t.Bits())+" bits, got "+s)
			return &v
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if _, err := strconv.ParseUint(s, 10, t.Bits()); err != nil {
			v := Body(l.pointer(), CodeWrongType, "must be a non-negative integer that fits in "+strconv.Itoa(t.Bits())+" bits, got "+s)
			return &v
		}
	case reflect.Float32, reflect.Float64:
		if _, err := strconv.ParseFloat(s, t.Bits()); err != nil {
			v := Body(l.pointer(), CodeWrongType, "must be a number in range, got "+s)
			return &v
		}
	case reflect.String:
		if t == numberType {
			return nil
		}
		return l.wrong(t, "number")
	default:
		return l.wrong(t, "number")
	}
	return nil
}

func (l *locator) object(t reflect.Type) (*Violation, error) {
	var fields map[string]field
	switch t.Kind() {
	case reflect.Struct:
		fields = structFields(t)
	case reflect.Map, reflect.Interface:
	default:
		return l.wrong(t, "object"), l.skip(json.Delim('{'))
	}
	for l.dec.More() {
		keyTok, err := l.dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := keyTok.(string)
		var elem reflect.Type
		switch t.Kind() {
		case reflect.Struct:
			f, ok := lookupField(fields, key)
			if !ok {
				if !l.allowUnknown {
					v := Body(Pointer(append(l.path, key)...), CodeUnknownField, "is not a known field")
					return &v, nil
				}
				if err := l.skipValue(); err != nil {
					return nil, err
				}
				continue
			}
			if f.quoted {
				if err := l.skipValue(); err != nil {
					return nil, err
				}
				continue
			}
			elem = f.typ
		case reflect.Map:
			elem = t.Elem()
		default:
			if err := l.skipValue(); err != nil {
				return nil, err
			}
			continue
		}
		l.path = append(l.path, key)
		v, err := l.value(elem)
		if v != nil || err != nil {
			return v, err
		}
		l.path = l.path[:len(l.path)-1]
	}
	_, err := l.dec.Token() // '}'
	return nil, err
}

func (l *locator) array(t reflect.Type) (*Violation, error) {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
	case reflect.Interface:
		return nil, l.skip(json.Delim('['))
	default:
		return l.wrong(t, "array"), l.skip(json.Delim('['))
	}
	for i := 0; l.dec.More(); i++ {
		l.path = append(l.path, strconv.Itoa(i))
		v, err := l.value(t.Elem())
		if v != nil || err != nil {
			return v, err
		}
		l.path = l.path[:len(l.path)-1]
	}
	_, err := l.dec.Token() // ']'
	return nil, err
}

// skip consumes the rest of a value whose first token was tok.
func (l *locator) skip(tok json.Token) error {
	d, ok := tok.(json.Delim)
	if !ok || d == '}' || d == ']' {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := l.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

func (l *locator) skipValue() error {
	tok, err := l.dec.Token()
	if err != nil {
		return err
	}
	return l.skip(tok)
}

type field struct {
	typ    reflect.Type
	quoted bool // the ",string" option: the JSON value is a string that holds the Go value
}

// structFields lists a struct's JSON member names by the rules of encoding/json: tags, "-", and the
// fields of embedded structs promoted.
func structFields(t reflect.Type) map[string]field {
	out := map[string]field{}
	var walk func(t reflect.Type, depth int)
	walk = func(t reflect.Type, depth int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			ft := f.Type
			if f.Anonymous && name == "" {
				et := ft
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if et.Kind() == reflect.Struct && depth < 8 {
					walk(et, depth+1)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := out[name]; !dup || depth == 0 {
				out[name] = field{typ: ft, quoted: strings.Contains(opts, "string")}
			}
		}
	}
	walk(t, 0)
	return out
}

// lookupField matches a key as encoding/json does: exactly first, then case-insensitively.
func lookupField(fields map[string]field, key string) (field, bool) {
	if f, ok := fields[key]; ok {
		return f, true
	}
	for name, f := range fields {
		if strings.EqualFold(name, key) {
			return f, true
		}
	}
	return field{}, false
}

// jsonKind names the JSON type a Go type takes, with an article.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		if t == numberType {
			return "a number"
		}
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.Kind().String()
}
