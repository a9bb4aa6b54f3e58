package versioning

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/svcplatform/conventions/internal/jsonstr"
)

// The transforms see JSON as map[string]any, []any, string, json.Number, bool and nil, exactly what
// encoding/json produces with UseNumber, and their output is encoded exactly as a json.Encoder with
// SetEscapeHTML(false) encodes it (a differential fuzz test holds the two to that). This codec does
// it without reflection: shaping a body is on the request path, and encoding/json spent most of a
// transform's time reflecting over interfaces.

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// jsonParser reads from data and cuts plain strings and numbers out of src, one string copy of
// data made up front: member names and values share it instead of costing an allocation each.
type jsonParser struct {
	data  []byte
	src   string
	i     int
	depth int
	// members is a stack of the open objects' members, so each map is made once at its final size
	// (plus room for a transform to add a member) instead of growing.
	members []member
}

type member struct {
	name  string
	value any
}

// mapSlack is the room left in each decoded map for members a transform adds.
const mapSlack = 2

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", errNotJSON, p.i, fmt.Sprintf(format, args...))
}

// parseJSON decodes one JSON value with nothing but whitespace around it.
func parseJSON(data []byte) (any, error) {
	p := jsonParser{data: data, src: string(data)}
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.i != len(p.data) {
		return nil, p.errorf("data after the JSON value")
	}
	return v, nil
}

func (p *jsonParser) skipSpace() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (any, error) {
	if p.i >= len(p.data) {
		return nil, p.errorf("unexpected end")
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.str()
	case c == 't':
		return p.literal("true", true)
	case c == 'f':
		return p.literal("false", false)
	case c == 'n':
		return p.literal("null", nil)
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return nil, p.errorf("unexpected byte %q", p.data[p.i])
}

func (p *jsonParser) literal(word string, v any) (any, error) {
	if !bytes.HasPrefix(p.data[p.i:], []byte(word)) {
		return nil, p.errorf("invalid literal")
	}
	p.i += len(word)
	return v, nil
}

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > maxJSONDepth {
		return p.errorf("nested too deeply")
	}
	p.i++
	p.skipSpace()
	return nil
}

func (p *jsonParser) object() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		p.depth--
		return make(map[string]any, mapSlack), nil
	}
	base := len(p.members)
	for {
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return nil, p.errorf("expected a member name")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return nil, p.errorf("expected ':'")
		}
		p.i++
		p.skipSpace()
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		p.members = append(p.members, member{k, v})
		p.skipSpace()
		if p.i >= len(p.data) {
			return nil, p.errorf("unexpected end")
		}
		switch p.data[p.i] {
		case ',':
			p.i++
			p.skipSpace()
		case '}':
			p.i++
			p.depth--
			ms := p.members[base:]
			m := make(map[string]any, len(ms)+mapSlack)
			for _, kv := range ms {
				m[kv.name] = kv.value // a repeated name keeps the last value, as encoding/json does
			}
			clear(ms) // drop the references the stack would otherwise keep alive
			p.members = p.members[:base]
			return m, nil
		default:
			return nil, p.errorf("expected ',' or '}'")
		}
	}
}

func (p *jsonParser) array() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	a := make([]any, 0, 4)
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		p.depth--
		return a, nil
	}
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		p.skipSpace()
		if p.i >= len(p.data) {
			return nil, p.errorf("unexpected end")
		}
		switch p.data[p.i] {
		case ',':
			p.i++
			p.skipSpace()
		case ']':
			p.i++
			p.depth--
			return a, nil
		default:
			return nil, p.errorf("expected ',' or ']'")
		}
	}
}

// str decodes a string. Plain ones (no escape, valid UTF-8) are the common case and cost one copy;
// the rest go through encoding/json, which knows every escape and replaces invalid UTF-8 as
// encoding/json does everywhere else.
func (p *jsonParser) str() (string, error) {
	start := p.i
	p.i++
	plain := true
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			if plain {
				return p.src[start+1 : p.i-1], nil
			}
			var s string
			if err := json.Unmarshal(p.data[start:p.i], &s); err != nil {
				return "", fmt.Errorf("%w: offset %d: %w", errNotJSON, start, err)
			}
			return s, nil
		case c == '\\':
			plain = false
			p.i += 2
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(p.data[p.i:])
			if r == utf8.RuneError && size == 1 {
				plain = false
			}
			p.i += size
		default:
			p.i++
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *jsonParser) number() (any, error) {
	start := p.i
	if p.data[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.data) && p.data[p.i] == '0':
		p.i++
	case p.i < len(p.data) && p.data[p.i] >= '1' && p.data[p.i] <= '9':
		p.digits()
	default:
		return nil, p.errorf("invalid number")
	}
	if p.i < len(p.data) && p.data[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return nil, p.errorf("invalid number")
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return nil, p.errorf("invalid number")
		}
	}
	return json.Number(p.src[start:p.i]), nil
}

func (p *jsonParser) digits() int {
	n := 0
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

// appendJSON encodes v as a json.Encoder with SetEscapeHTML(false) would, without the newline.
// Values of other types than the decoder produces (a transform may add an int, a struct, …) are
// handed to encoding/json.
func appendJSON(b []byte, v any) ([]byte, error) {
	var e jsonEncoder
	return e.append(b, v)
}

// jsonEncoder keeps one stack of member names for all the maps it sorts.
type jsonEncoder struct {
	keys []string
}

func (e *jsonEncoder) append(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		if x {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case string:
		return jsonstr.Append(b, x), nil
	case json.Number:
		s := string(x)
		if s == "" {
			s = "0" // encoding/json's rule for the zero Number
		}
		if !validNumber(s) {
			return nil, fmt.Errorf("json: invalid number literal %q", s)
		}
		return append(b, s...), nil
	case map[string]any:
		if x == nil {
			return append(b, "null"...), nil
		}
		base := len(e.keys)
		for k := range x {
			e.keys = append(e.keys, k)
		}
		keys := e.keys[base:]
		slices.Sort(keys)
		b = append(b, '{')
		for i := range keys {
			k := e.keys[base+i] // e.keys may move while the values are encoded
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonstr.Append(b, k)
			b = append(b, ':')
			var err error
			if b, err = e.append(b, x[k]); err != nil {
				return nil, err
			}
		}
		e.keys = e.keys[:base]
		return append(b, '}'), nil
	case []any:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, el := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = e.append(b, el); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...), nil
}

// validNumber reports whether s is a JSON number literal.
func validNumber(s string) bool {
	p := jsonParser{data: []byte(s), src: s}
	if len(s) == 0 || !(s[0] == '-' || s[0] >= '0' && s[0] <= '9') {
		return false
	}
	_, err := p.number()
	return err == nil && p.i == len(s)
}
