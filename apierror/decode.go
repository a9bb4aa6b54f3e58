package apierror

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// DefaultMaxBodyBytes caps a request body when DecodeOptions.MaxBytes is zero: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// DecodeOptions tune Decode. A nil *DecodeOptions and the zero value mean the defaults.
type DecodeOptions struct {
	// MaxBytes caps the body; zero means DefaultMaxBodyBytes. A larger body is a 413.
	MaxBytes int64
	// AllowUnknownFields accepts members the destination type does not have. By default they are a
	// 400 unknown_field, so that a misspelt optional field never passes silently.
	AllowUnknownFields bool
}

// Decode reads r's body as one JSON value into dst, strictly, and every failure is an *Error whose
// violation says where the input went wrong:
//
//   - the body must be sent as JSON: Content-Type application/json or application/<x>+json, with no
//     parameter but charset=utf-8 (RequireJSON); anything else, a non-empty body without a
//     Content-Type included, is 415 unsupported_media_type at header Content-Type, with Accept-Post
//     or Accept-Patch. An empty body is 400 body_missing whatever the headers say;
//   - the body is capped (413 beyond DecodeOptions.MaxBytes);
//   - a member the destination does not have is 400 unknown_field, and member names match exactly:
//     "ACCOUNT" is not "account" (encoding/json would take it);
//   - a member given twice is 400 duplicate_member (encoding/json would keep the last);
//   - a string that is not UTF-8, or holds an escaped lone surrogate, is 400 invalid_utf8
//     (encoding/json would replace it with U+FFFD);
//   - a value of the wrong type is located by JSON Pointer, array indices included; a syntax error by
//     byte offset; data after the value is 400 trailing_data.
//
// An error that is not an *Error means dst is not a valid destination: a programming error.
func Decode(r *http.Request, dst any, opts *DecodeOptions) error {
	limit := int64(DefaultMaxBodyBytes)
	if opts != nil && opts.MaxBytes > 0 {
		limit = opts.MaxBytes
	}
	if r.ContentLength > limit {
		return BodyTooLarge(limit)
	}
	if r.Body == nil || r.ContentLength == 0 {
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
	if len(bytes.TrimSpace(data)) == 0 {
		return Invalid(Body("", CodeBodyMissing, "a JSON body is required"))
	}
	if err := RequireJSON(r); err != nil {
		return err
	}
	return DecodeBytes(data, dst, opts)
}

// CodeUnsupportedMediaType is the code of a request body that is not sent as JSON.
const CodeUnsupportedMediaType = "unsupported_media_type"

// RequireJSON checks that r declares a JSON body: exactly one Content-Type, application/json or
// application/<x>+json (case-insensitive), whose only parameter, if any, is charset=utf-8. It returns
// nil or the 415 problem, located at header Content-Type, with Accept-Post: application/json for a
// POST and Accept-Patch: application/json for a PATCH (RFC 9110 §15.5.16). Decode calls it for a
// non-empty body; a handler that reads the body itself calls it before DecodeBytes.
//
// A missing Content-Type is refused too: a JSON media type means a browser cannot send the request
// cross-site as a CORS "simple request" (text/plain and form types are), and a body whose type is not
// declared is never guessed at.
func RequireJSON(r *http.Request) error {
	vals := r.Header.Values("Content-Type")
	var detail string
	switch {
	case len(vals) == 0 || strings.TrimSpace(vals[0]) == "":
		detail = "is required with a body: send Content-Type: application/json"
	case len(vals) > 1:
		detail = "send exactly one Content-Type header: application/json"
	default:
		mt, params, err := mime.ParseMediaType(vals[0])
		switch {
		case err != nil:
			detail = "is not a media type: send Content-Type: application/json"
		case mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")):
			detail = "must be application/json, not " + mt
		default:
			for k, v := range params {
				if k != "charset" {
					detail = "takes no parameter " + strconv.Quote(k) + ": send Content-Type: application/json"
				} else if !strings.EqualFold(v, "utf-8") {
					detail = "must be UTF-8: JSON is exchanged in UTF-8 only (RFC 8259 §8.1)"
				}
			}
		}
	}
	if detail == "" {
		return nil
	}
	p := New(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "header Content-Type: "+detail,
		Header("Content-Type", CodeUnsupportedMediaType, detail))
	switch r.Method {
	case http.MethodPost:
		p.WithHeader("Accept-Post", "application/json")
	case http.MethodPatch:
		p.WithHeader("Accept-Patch", "application/json")
	}
	return p
}

// DecodeBytes is Decode for a body already in memory (its size and media type are not checked): the
// strict checks of Decode, then encoding/json.
func DecodeBytes(data []byte, dst any, opts *DecodeOptions) error {
	allowUnknown := opts != nil && opts.AllowUnknownFields
	if len(bytes.TrimSpace(data)) == 0 {
		return Invalid(Body("", CodeBodyMissing, "a JSON body is required"))
	}
	t := reflect.TypeOf(dst)
	if t == nil || t.Kind() != reflect.Pointer || reflect.ValueOf(dst).IsNil() {
		return fmt.Errorf("apierror: decode destination: %w", &json.InvalidUnmarshalError{Type: t})
	}
	// One pass over the bytes for what encoding/json lets through silently; then encoding/json
	// itself, which no longer needs DisallowUnknownFields: every member name left is an exact match
	// or, with AllowUnknownFields, one it has no field for.
	sc := scanPool.Get().(*strictScan)
	defer sc.release()
	sc.reset(data, allowUnknown)
	v, end, ok := sc.scan(shapeOf(t.Elem()))
	if v != nil {
		return Invalid(*v)
	}
	if ok {
		if start := skipSpace(data, end); start < len(data) {
			return Invalid(Body("", CodeTrailingData, fmt.Sprintf("unexpected data after the JSON value at byte offset %d", start)))
		}
		if len(sc.strip) > 0 {
			data = sc.stripped()
		}
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return mapDecodeError(err, data, dst, allowUnknown)
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

func mapDecodeError(err error, data []byte, dst any, allowUnknown bool) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var inv *json.InvalidUnmarshalError
	switch {
	case errors.As(err, &inv):
		return fmt.Errorf("apierror: decode destination: %w", err)
	case errors.As(err, &syn):
		if syn.Offset >= int64(len(data)) && (syn.Error() == "unexpected end of JSON input" ||
			strings.HasPrefix(syn.Error(), "invalid character ' '") && len(data) > 0 && data[len(data)-1] != ' ') {
			// The input ended inside a value; encoding/json blames the end, or a space it imagines
			// there: the offset is where the input stopped.
			return MalformedJSON(int64(len(data)), "unexpected end of JSON input")
		}
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
	return Invalid(Body("", codeInvalidValue, err.Error()))
}

// codeInvalidValue is the code of a value a custom UnmarshalJSON or UnmarshalText refused.
const codeInvalidValue = "invalid_value"

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
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != numberType && (reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType)) {
		return l.custom(t)
	}
	tok, err := l.dec.Token()
	if err != nil {
		return nil, err
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
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			// encoding/json decodes a string into []byte as standard base64.
			if _, err := base64.StdEncoding.DecodeString(tok); err != nil {
				v := Body(l.pointer(), CodeWrongType, "must be a base64 string, got a string that is not valid base64")
				return &v, nil
			}
			return nil, nil
		}
		if t.Kind() == reflect.String || t.Kind() == reflect.Interface {
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

// custom consumes one value for a type with its own UnmarshalJSON or UnmarshalText, and reports it
// when the type refuses it: encoding/json returns such errors without saying where they happened.
func (l *locator) custom(t reflect.Type) (*Violation, error) {
	var raw json.RawMessage
	if err := l.dec.Decode(&raw); err != nil {
		return nil, err
	}
	if string(raw) == "null" {
		return nil, nil // encoding/json leaves the value as it is
	}
	err := json.Unmarshal(raw, reflect.New(t).Interface())
	if err == nil {
		return nil, nil
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		v := Body(l.pointer(), CodeWrongType, "must be a string, got "+typ.Value)
		return &v, nil
	}
	v := Body(l.pointer(), codeInvalidValue, err.Error())
	return &v, nil
}

// quoted consumes one value for a field with the ",string" option, which encoding/json expects as a
// JSON string holding the field's own JSON encoding ("42", "true").
func (l *locator) quoted(t reflect.Type) (*Violation, error) {
	tok, err := l.dec.Token()
	if err != nil {
		return nil, err
	}
	s, isString := tok.(string)
	if tok == nil || isString && (s == "null" || s != "" && !isSpace(s[0]) && !isSpace(s[len(s)-1]) &&
		json.Unmarshal([]byte(s), reflect.New(t).Interface()) == nil) {
		return nil, nil
	}
	got := "a string that does not hold one"
	if !isString {
		got = jsonTokenKind(tok)
	}
	v := Body(l.pointer(), CodeWrongType, "must be a string holding "+jsonKind(t)+", got "+got)
	return &v, l.skip(tok)
}

// jsonTokenKind names the JSON type of the value that tok starts.
func jsonTokenKind(tok json.Token) string {
	switch tok := tok.(type) {
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case json.Delim:
		if tok == '[' {
			return "array"
		}
		return "object"
	}
	return "null"
}

func (l *locator) number(t reflect.Type, n json.Number) *Violation {
	s := string(n)
	switch t.Kind() {
	case reflect.Interface:
		// encoding/json stores a number in an interface as a float64.
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			v := Body(l.pointer(), CodeWrongType, "must be a number in range, got "+s)
			return &v
		}
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
	var fields *structInfo
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
			f, ok := fields.lookup(key)
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
				l.path = append(l.path, key)
				v, err := l.quoted(f.typ)
				if v != nil || err != nil {
					return v, err
				}
				l.path = l.path[:len(l.path)-1]
				continue
			}
			elem = f.typ
		case reflect.Map:
			if v := l.mapKey(t.Key(), key); v != nil {
				return v, nil
			}
			elem = t.Elem()
		default:
			elem = t // a member of an interface{} value goes into an interface{} too
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

// mapKey reports a member name that encoding/json cannot turn into a key of type kt.
func (l *locator) mapKey(kt reflect.Type, key string) *Violation {
	var err error
	switch {
	case reflect.PointerTo(kt).Implements(textUnmarshalerType):
		err = reflect.New(kt).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(key))
		if err != nil {
			v := Body(Pointer(append(l.path, key)...), codeInvalidValue, "member name: "+err.Error())
			return &v
		}
		return nil
	case kt.Kind() == reflect.String:
		return nil
	case kt.Kind() >= reflect.Int && kt.Kind() <= reflect.Int64:
		_, err = strconv.ParseInt(key, 10, kt.Bits())
	case kt.Kind() >= reflect.Uint && kt.Kind() <= reflect.Uintptr:
		_, err = strconv.ParseUint(key, 10, kt.Bits())
	}
	if err != nil {
		v := Body(Pointer(append(l.path, key)...), CodeWrongType, "member name must be "+jsonKind(kt)+" that fits in "+strconv.Itoa(kt.Bits())+" bits")
		return &v
	}
	return nil
}

func (l *locator) array(t reflect.Type) (*Violation, error) {
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Interface:
	default:
		return l.wrong(t, "array"), l.skip(json.Delim('['))
	}
	elem := t // an element of an interface{} value goes into an interface{} too
	if t.Kind() != reflect.Interface {
		elem = t.Elem()
	}
	for i := 0; l.dec.More(); i++ {
		if t.Kind() == reflect.Array && i >= t.Len() {
			// encoding/json ignores elements past a Go array's length.
			if err := l.skipValue(); err != nil {
				return nil, err
			}
			continue
		}
		l.path = append(l.path, strconv.Itoa(i))
		v, err := l.value(elem)
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
	name   string
	index  []int
	tagged bool
	typ    reflect.Type
	quoted bool // the ",string" option: the JSON value is a string that holds the Go value
}

// structInfo is a struct's JSON members in encoding/json's order, with an index by exact name.
type structInfo struct {
	list   []field
	byName map[string]int
}

// structFields lists a struct's JSON member names by the rules of encoding/json's typeFields: tags, "-",
// the fields of embedded structs promoted, a shallower field hiding deeper ones of the same name, a
// tagged one winning at equal depth, and names that stay ambiguous dropped.
func structFields(t reflect.Type) *structInfo {
	var all []field
	type level struct {
		typ   reflect.Type
		index []int
	}
	next := []level{{typ: t}}
	// Types walked at a shallower depth are not walked again; one embedded twice at the same depth is,
	// so that its fields come out ambiguous, as in encoding/json.
	visited := map[reflect.Type]bool{}
	for len(next) > 0 {
		current := slices.DeleteFunc(next, func(lv level) bool { return visited[lv.typ] })
		next = nil
		for _, lv := range current {
			visited[lv.typ] = true
		}
		for _, lv := range current {
			for i := range lv.typ.NumField() {
				f := lv.typ.Field(i)
				if f.Anonymous {
					et := f.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !f.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !f.IsExported() {
					continue
				}
				tag := f.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				index := append(slices.Clip(lv.index), i)
				ft := f.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name == "" && f.Anonymous && ft.Kind() == reflect.Struct {
					next = append(next, level{typ: ft, index: index})
					continue
				}
				quoted := false
				if slices.Contains(strings.Split(opts, ","), "string") {
					switch ft.Kind() {
					case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
						reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
						reflect.Float32, reflect.Float64, reflect.String:
						quoted = true
					}
				}
				tagged := name != ""
				if !tagged {
					name = f.Name
				}
				all = append(all, field{name: name, index: index, tagged: tagged, typ: f.Type, quoted: quoted})
			}
		}
	}
	// Per name: keep the shallowest; at equal depth a single tagged field wins, otherwise none does.
	slices.SortStableFunc(all, func(a, b field) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := len(a.index) - len(b.index); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})
	var out []field
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].name == all[i].name {
			j++
		}
		if j-i == 1 || len(all[i].index) != len(all[i+1].index) || all[i].tagged != all[i+1].tagged {
			out = append(out, all[i])
		}
		i = j
	}
	slices.SortFunc(out, func(a, b field) int { return slices.Compare(a.index, b.index) })
	info := &structInfo{list: out, byName: make(map[string]int, len(out))}
	for i, f := range out {
		info.byName[f.name] = i
	}
	return info
}

// lookup matches a key as encoding/json does: exactly first, then the first field, in field order, whose
// name matches case-insensitively.
func (s *structInfo) lookup(key string) (field, bool) {
	if i, ok := s.byName[key]; ok {
		return s.list[i], true
	}
	for _, f := range s.list {
		if strings.EqualFold(f.name, key) {
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
