package strictjson

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// maxScanDepth bounds the nesting the strict scan follows, as encoding/json bounds its own; deeper
// input is left to encoding/json, which refuses it.
const maxScanDepth = 10000

// smallObject is the number of members an object is checked for duplicates by comparing each name
// with those before it; a larger object uses a map, so a hostile object with many members costs
// linear time.
const smallObject = 16

// strictScan is the first pass of Decode: one walk over the bytes, guided by the destination's
// shape, that finds what encoding/json would let through silently — a member given twice, a member
// name that matches a field only when case is ignored, a string that is not UTF-8 or holds a lone
// surrogate — and reports it located. Syntax errors are not its business: on one it stops, and
// encoding/json reports it with its offset.
type strictScan struct {
	data         []byte
	i            int
	depth        int
	allowUnknown bool
	path         []pathToken // where the scan is, for a violation's pointer
	keys         []keySpan   // the names of the objects being scanned, a stack shared by all of them
	strip        [][2]int    // members to drop before decoding (case variants, with AllowUnknownFields)
	syntax       bool        // a syntax error stopped the scan
	inName       bool        // str is scanning a member name
	first        *Error      // the first violation found
}

// scanPool recycles scanners, so that their stacks are allocated once, not per request.
var scanPool = sync.Pool{New: func() any { return &strictScan{keys: make([]keySpan, 0, 32), path: make([]pathToken, 0, 16)} }}

func (sc *strictScan) reset(data []byte, allowUnknown bool) {
	*sc = strictScan{data: data, allowUnknown: allowUnknown, keys: sc.keys[:0], path: sc.path[:0], strip: sc.strip[:0]}
}

// release returns the scanner to the pool, without the request's data; a scanner whose stacks a
// deeply nested body grew large is dropped instead.
func (sc *strictScan) release() {
	if cap(sc.keys) > 1024 || cap(sc.path) > 1024 {
		return
	}
	sc.data, sc.first = nil, nil
	clear(sc.keys[:cap(sc.keys)])
	scanPool.Put(sc)
}

// pathToken is one reference token of the current pointer: a member name (raw, maybe escaped) or an
// array index.
type pathToken struct {
	start, end int // the raw name between the quotes; end < 0 for an index
	index      int
}

// keySpan is a member name seen in the current object: its raw bytes, and its unescaped text when
// the raw name holds escapes.
type keySpan struct {
	start, end int
	text       string
	escaped    bool
}

// scan checks the first JSON value of data against s. It returns a violation, or nil and the offset
// where the value ended (ok false when a syntax error stopped it).
//
// The whole value is scanned before anything is reported, so that a syntax error anywhere wins, as
// it does in encoding/json: a violation is only reported for a value that is otherwise well-formed.
func (sc *strictScan) scan(s *shape) (v *Error, end int, ok bool) {
	sc.skipSpace()
	sc.value(s)
	if sc.syntax {
		return nil, 0, false
	}
	return sc.first, sc.i, true
}

// note keeps the first violation found; the scan goes on to the end of the value.
func (sc *strictScan) note(v Error) {
	if sc.first == nil {
		sc.first = &v
	}
}

func (sc *strictScan) skipSpace() {
	for sc.i < len(sc.data) && isSpace(sc.data[sc.i]) {
		sc.i++
	}
}

func (sc *strictScan) fail() *Error {
	sc.syntax = true
	return nil
}

// value scans one value; sc.syntax is set when it is malformed.
func (sc *strictScan) value(s *shape) *Error {
	if sc.i >= len(sc.data) {
		return sc.fail()
	}
	switch c := sc.data[sc.i]; {
	case c == '{':
		return sc.object(s)
	case c == '[':
		return sc.array(s)
	case c == '"':
		_, v := sc.str()
		return v
	case c == 't':
		return sc.literal("true")
	case c == 'f':
		return sc.literal("false")
	case c == 'n':
		return sc.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return sc.number()
	}
	return sc.fail()
}

func (sc *strictScan) literal(word string) *Error {
	if !bytes.HasPrefix(sc.data[sc.i:], []byte(word)) {
		return sc.fail()
	}
	sc.i += len(word)
	return nil
}

// number scans a number by RFC 8259's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (sc *strictScan) number() *Error {
	d, i := sc.data, sc.i
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digitsEnd(d, i)
	default:
		return sc.fail()
	}
	if i < len(d) && d[i] == '.' {
		if i = digitsEnd(d, i+1); d[i-1] == '.' {
			return sc.fail()
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		start := i
		if i = digitsEnd(d, i); i == start {
			return sc.fail()
		}
	}
	sc.i = i
	return nil
}

// digitsEnd returns the index just past the run of decimal digits of d that starts at i.
func digitsEnd(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}

// str scans a string starting at its opening quote and reports whether it holds an escape. Bytes
// that are not UTF-8 and escaped lone surrogates are a violation at the current pointer.
func (sc *strictScan) str() (escaped bool, v *Error) {
	d := sc.data
	i := sc.i + 1
	for {
		// The common case: printable ASCII.
		for i < len(d) && d[i] >= 0x20 && d[i] < utf8.RuneSelf && d[i] != '"' && d[i] != '\\' {
			i++
		}
		if i >= len(d) {
			return false, sc.fail()
		}
		switch c := d[i]; {
		case c == '"':
			sc.i = i + 1
			return escaped, nil
		case c < 0x20:
			return false, sc.fail()
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				return false, sc.fail()
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				r, ok := hex4(d, i+2)
				if !ok {
					return false, sc.fail()
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// A high surrogate must be followed at once by an escaped low one.
					if r >= 0xDC00 || i+1 >= len(d) || d[i] != '\\' || d[i+1] != 'u' {
						sc.invalidUTF8("holds an escaped lone surrogate (\\u" + strconv.FormatInt(int64(r), 16) + "), which is not a character")
						continue
					}
					r2, ok := hex4(d, i+2)
					if !ok {
						return false, sc.fail()
					}
					if utf16.DecodeRune(r, r2) == utf8.RuneError {
						sc.invalidUTF8("holds an escaped lone surrogate (\\u" + strconv.FormatInt(int64(r), 16) + "), which is not a character")
						continue // the second escape is scanned on its own
					}
					i += 6
				}
			default:
				return false, sc.fail()
			}
		default: // a multi-byte sequence
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size <= 1 {
				sc.invalidUTF8("is not valid UTF-8")
				size = 1
			}
			i += size
		}
	}
}

func (sc *strictScan) invalidUTF8(detail string) {
	if n := len(sc.path); sc.first == nil && sc.inName && n > 0 {
		// The name itself is at fault: point at it as far as it can be read, up to its closing quote.
		t := &sc.path[n-1]
		j := t.start
		for j < len(sc.data) && sc.data[j] != '"' {
			if sc.data[j] == '\\' {
				j++
			}
			j++
		}
		t.end = min(j, len(sc.data))
	}
	if sc.first == nil {
		sc.note(Error{Kind: InvalidUTF8, Pointer: sc.pointer(), Detail: detail})
	}
}

func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func (sc *strictScan) enter() bool {
	sc.depth++
	return sc.depth <= maxScanDepth
}

func (sc *strictScan) object(s *shape) *Error {
	// A syntax error ends the whole scan, so the stacks are only unwound on the way out of a
	// well-formed object (no defer: this is the hot path).
	if !sc.enter() {
		return sc.fail()
	}
	sc.i++ // '{'
	base := len(sc.keys)
	var seen map[string]struct{} // past smallObject members
	sc.skipSpace()
	if sc.i < len(sc.data) && sc.data[sc.i] == '}' {
		sc.i++
		sc.depth--
		return nil
	}
	for {
		if sc.i >= len(sc.data) || sc.data[sc.i] != '"' {
			return sc.fail()
		}
		memberStart := sc.i
		nameStart := sc.i + 1
		// The name is checked at the member's own pointer.
		sc.path = append(sc.path, pathToken{start: nameStart, end: nameStart})
		sc.inName = true
		escaped, v := sc.str()
		sc.inName = false
		if v != nil || sc.syntax {
			return v
		}
		nameEnd := sc.i - 1
		sc.path[len(sc.path)-1].end = nameEnd
		k := keySpan{start: nameStart, end: nameEnd, escaped: escaped}
		if escaped {
			k.text = sc.unescape(nameStart-1, sc.i)
		}
		// A member given twice.
		if seen == nil && len(sc.keys)-base >= smallObject {
			seen = make(map[string]struct{}, 2*smallObject)
			for _, prev := range sc.keys[base:] {
				seen[sc.keyText(prev)] = struct{}{}
			}
		}
		if seen != nil {
			name := sc.keyText(k)
			if _, dup := seen[name]; dup {
				sc.duplicate()
			}
			seen[name] = struct{}{}
		} else {
			for _, prev := range sc.keys[base:] {
				if sc.sameKey(prev, k) {
					sc.duplicate()
					break
				}
			}
		}
		sc.keys = append(sc.keys, k)

		// The member's destination.
		elem := anyShape
		drop := false
		switch s.kind {
		case shapeStruct:
			var ok bool
			if escaped {
				elem, ok = s.fields[k.text]
			} else {
				elem, ok = s.fields[string(sc.data[nameStart:nameEnd])] // no allocation for the lookup
			}
			if !ok {
				if !sc.allowUnknown {
					if sc.first == nil {
						sc.note(Error{Kind: UnknownField, Pointer: sc.pointer(), Detail: "is not a known field"})
					}
					elem = anyShape
					break
				}
				// Unknown members are allowed, but one that matches a field when case is ignored
				// would be decoded into it by encoding/json: it is dropped instead.
				elem, drop = anyShape, s.foldMatch(sc.keyText(k))
			}
		case shapeMap, shapeList:
			elem = s.elem
		}

		sc.skipSpace()
		if sc.i >= len(sc.data) || sc.data[sc.i] != ':' {
			return sc.fail()
		}
		sc.i++
		sc.skipSpace()
		if v := sc.value(elem); v != nil || sc.syntax {
			return v
		}
		if drop {
			sc.strip = append(sc.strip, [2]int{memberStart, sc.i})
		}
		sc.path = sc.path[:len(sc.path)-1]
		if closed, ok := sc.next('}'); !ok || closed {
			sc.depth--
			sc.keys = sc.keys[:base]
			return nil
		}
	}
}

// next consumes what follows a member or an element: a comma, or closer. It reports whether the
// container closed, and ok false (with sc.syntax set) for anything else.
func (sc *strictScan) next(closer byte) (closed, ok bool) {
	sc.skipSpace()
	if sc.i < len(sc.data) {
		switch sc.data[sc.i] {
		case ',':
			sc.i++
			sc.skipSpace()
			return false, true
		case closer:
			sc.i++
			return true, true
		}
	}
	sc.syntax = true
	return false, false
}

func (sc *strictScan) duplicate() {
	if sc.first == nil {
		sc.note(Error{Kind: DuplicateMember, Pointer: sc.pointer(), Detail: "appears more than once in its object; send each member once"})
	}
}

func (sc *strictScan) keyText(k keySpan) string {
	if k.escaped {
		return k.text
	}
	return string(sc.data[k.start:k.end])
}

func (sc *strictScan) sameKey(a, b keySpan) bool {
	if !a.escaped && !b.escaped {
		return bytes.Equal(sc.data[a.start:a.end], sc.data[b.start:b.end])
	}
	return sc.keyText(a) == sc.keyText(b)
}

// unescape decodes the quoted string data[start:end]. A name cut short by the end of the input (the
// scan then ends in a syntax error, and the text is only a best effort) is returned raw.
func (sc *strictScan) unescape(start, end int) string {
	end = min(end, len(sc.data))
	var s string
	if err := json.Unmarshal(sc.data[start:end], &s); err == nil {
		return s
	}
	return string(sc.data[min(start+1, end):end])
}

func (sc *strictScan) array(s *shape) *Error {
	if !sc.enter() {
		return sc.fail()
	}
	sc.i++ // '['
	elem := anyShape
	if s.kind == shapeList {
		elem = s.elem
	}
	sc.skipSpace()
	if sc.i < len(sc.data) && sc.data[sc.i] == ']' {
		sc.i++
		sc.depth--
		return nil
	}
	sc.path = append(sc.path, pathToken{end: -1})
	for n := 0; ; n++ {
		sc.path[len(sc.path)-1].index = n
		if v := sc.value(elem); v != nil || sc.syntax {
			return v
		}
		if closed, ok := sc.next(']'); !ok || closed {
			sc.depth--
			sc.path = sc.path[:len(sc.path)-1]
			return nil
		}
	}
}

// pointer is the JSON Pointer of where the scan is.
func (sc *strictScan) pointer() string {
	tokens := make([]string, len(sc.path))
	for i, t := range sc.path {
		if t.end < 0 {
			tokens[i] = strconv.Itoa(t.index)
			continue
		}
		raw := sc.data[t.start:t.end]
		if bytes.IndexByte(raw, '\\') < 0 {
			tokens[i] = validText(string(raw))
			continue
		}
		tokens[i] = validText(sc.unescape(t.start-1, t.end+1))
	}
	return Pointer(tokens...)
}

// validText replaces each byte of s that is not UTF-8 with U+FFFD, as encoding/json does, so that a
// pointer to a member whose name is not UTF-8 reads as encoding/json would read the name.
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

// stripped returns data without the members the scan marked for dropping, with their separating
// commas.
func (sc *strictScan) stripped() []byte {
	out := make([]byte, 0, len(sc.data))
	last := 0
	for _, span := range sc.strip {
		start, end := span[0], span[1]
		out = append(out, sc.data[last:start]...)
		last = end
		// Take the comma after the member with it, or, for an object's last member, the one before.
		// That one is looked for in what is kept, not in the input: when the member before was
		// dropped too, its comma went with it ({"side":"buy","SIDE":"x","Side":"y"}).
		j := end
		for j < len(sc.data) && isSpace(sc.data[j]) {
			j++
		}
		if j < len(sc.data) && sc.data[j] == ',' {
			last = j + 1
			continue
		}
		k := len(out) - 1
		for k >= 0 && isSpace(out[k]) {
			k--
		}
		if k >= 0 && out[k] == ',' {
			out = out[:k]
		}
	}
	return append(out, sc.data[last:]...)
}
