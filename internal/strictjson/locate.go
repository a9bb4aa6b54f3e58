package strictjson

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
)

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
func locate(data []byte, t reflect.Type, allowUnknown bool) *Error {
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

func (l *locator) wrong(t reflect.Type, got string) *Error {
	v := at(l.pointer(), WrongType, "must be "+jsonKind(t)+", got "+got)
	return &v
}

// value consumes one JSON value and reports the first problem found in it.
func (l *locator) value(t reflect.Type) (*Error, error) {
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
				v := at(l.pointer(), WrongType, "must be a base64 string, got a string that is not valid base64")
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
func (l *locator) custom(t reflect.Type) (*Error, error) {
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
		v := at(l.pointer(), WrongType, "must be a string, got "+typ.Value)
		return &v, nil
	}
	v := at(l.pointer(), InvalidValue, err.Error())
	return &v, nil
}

// quoted consumes one value for a field with the ",string" option, which encoding/json expects as a
// JSON string holding the field's own JSON encoding ("42", "true").
func (l *locator) quoted(t reflect.Type) (*Error, error) {
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
	v := at(l.pointer(), WrongType, "must be a string holding "+jsonKind(t)+", got "+got)
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

func (l *locator) number(t reflect.Type, n json.Number) *Error {
	s := string(n)
	switch t.Kind() {
	case reflect.Interface:
		// encoding/json stores a number in an interface as a float64.
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			v := at(l.pointer(), WrongType, "must be a number in range, got "+s)
			return &v
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if _, err := strconv.ParseInt(s, 10, t.Bits()); err != nil {
			v := at(l.pointer(), WrongType, "must be an integer that fits in "+strconv.Itoa(t.Bits())+" bits, got "+s)
			return &v
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if _, err := strconv.ParseUint(s, 10, t.Bits()); err != nil {
			v := at(l.pointer(), WrongType, "must be a non-negative integer that fits in "+strconv.Itoa(t.Bits())+" bits, got "+s)
			return &v
		}
	case reflect.Float32, reflect.Float64:
		if _, err := strconv.ParseFloat(s, t.Bits()); err != nil {
			v := at(l.pointer(), WrongType, "must be a number in range, got "+s)
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

func (l *locator) object(t reflect.Type) (*Error, error) {
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
					v := at(Pointer(append(l.path, key)...), UnknownField, "is not a known field")
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
func (l *locator) mapKey(kt reflect.Type, key string) *Error {
	var err error
	switch {
	case reflect.PointerTo(kt).Implements(textUnmarshalerType):
		err = reflect.New(kt).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(key))
		if err != nil {
			v := at(Pointer(append(l.path, key)...), InvalidValue, "member name: "+err.Error())
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
		v := at(Pointer(append(l.path, key)...), WrongType, "member name must be "+jsonKind(kt)+" that fits in "+strconv.Itoa(kt.Bits())+" bits")
		return &v
	}
	return nil
}

func (l *locator) array(t reflect.Type) (*Error, error) {
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
