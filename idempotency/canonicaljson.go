package idempotency

import (
	"bytes"
	"crypto/sha256"
	"math/big"
	"net/http"
	"slices"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// CanonicalJSONFingerprint is an Options.Fingerprint for JSON APIs: a retry that re-serializes the
// same JSON body — its members in another order, other whitespace, other escapes, 1.0 for 1 — is the
// same request, where the default fingerprint (NewFingerprint over the body's bytes) answers 422
// idempotency_key_reused. It is NewFingerprint over the method, path and query with, in place of the
// body's SHA-256, a digest of the body's JSON value.
//
// Two bodies have the same digest when they are the same JSON value by the rules of RFC 8785 (JCS):
// members are unordered, whitespace between tokens is insignificant, and strings compare by their
// characters however they are escapes ("\u0041" is "A", "\/" is "/"). Numbers compare by their
// exact decimal value (1, 1.0, 10e-1 and 1E0 are one number, -0 is 0), not, as in JCS, through an
// IEEE 754 double: 9007199254740993 and 9007199254740992 are one double but two amounts, so two
// requests. Array order, letter case and Unicode normalization are significant.
//
// A body that is not strict JSON — not JSON at all (empty, a form, binary), invalid UTF-8 or an
// escaped lone surrogate, a member named twice in one object (which a strict decoder refuses and
// encoding/json would take the last of), or nested deeper than 10,000 — is fingerprinted by its
// bytes, exactly as the default does, and never matches a body that is strict JSON. It never fails,
// and costs time and memory linear in the body's size.
func CanonicalJSONFingerprint(r *http.Request, body []byte) (Fingerprint, error) {
	return NewFingerprint(r.Method, r.URL.EscapedPath(), r.URL.RawQuery, canonicalJSONSum(body)), nil
}

// Tags of the two kinds of body digest, so that no body's bytes can be crafted to equal another
// body's canonical digest.
const (
	tagCanonicalJSON = "idempotency canonical json v1\x00"
	tagBodyBytes     = "idempotency body bytes v1\x00"
)

// maxCanonicalDepth bounds the nesting followed, as encoding/json and the strict decoder bound theirs.
const maxCanonicalDepth = 10000

// canonicalJSONSum is the body digest of CanonicalJSONFingerprint.
func canonicalJSONSum(body []byte) [32]byte {
	c := canonPool.Get().(*canonicalizer)
	defer c.put()
	if out, ok := c.canonical(body); ok {
		return sha256.Sum256(out)
	}
	h := sha256.New()
	h.Write([]byte(tagBodyBytes))
	h.Write(body)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// canonical returns the canonical form whose SHA-256 is a body's digest, and false when body is not
// strict JSON. The form is the value's tokens without whitespace, strings quoted as RFC 8785 quotes
// them, numbers in one decimal form, and each object's members sorted by their canonical names. A
// member's value is 'v' and its form when that is at most maxInlineValue bytes long, else 'h' and
// the form's SHA-256: so sorting an object moves a bounded number of bytes per member, and a hostile
// body cannot make it copy what nests inside again at every level — time and memory stay linear in
// the body's size. The form is decodable (tokens and tags delimit themselves), so two bodies have
// the same form only when they are the same value. The result is valid until the next use of c.
func (c *canonicalizer) canonical(body []byte) ([]byte, bool) {
	c.src, c.i, c.depth = body, 0, 0
	c.out = append(c.out[:0], tagCanonicalJSON...)
	c.space()
	if !c.value() {
		return nil, false
	}
	c.space()
	if c.i != len(c.src) {
		return nil, false
	}
	return c.out, true
}

// canonicalizer is the state of one canonicalization, pooled.
type canonicalizer struct {
	src     []byte
	i       int
	depth   int
	out     []byte   // the canonical form being written
	members []member // members of the objects being read, a stack
	tmp     []byte   // a decoded string
	scratch []byte   // an object's members while they are sorted
}

// member is an object member in out: its canonical name is out[start:nameEnd], the member
// out[start:end].
type member struct{ start, nameEnd, end int }

// maxInlineValue is the longest member value form kept as it is; a longer one is replaced by its
// SHA-256.
const maxInlineValue = 32

var canonPool = sync.Pool{New: func() any { return new(canonicalizer) }}

func (c *canonicalizer) put() {
	c.src = nil
	if cap(c.out) > maxPooledBuffer || cap(c.scratch) > maxPooledBuffer || cap(c.tmp) > maxPooledBuffer || cap(c.members) > maxPooledBuffer/32 {
		return // one huge body must not pin its buffers
	}
	c.out, c.members, c.tmp, c.scratch = c.out[:0], c.members[:0], c.tmp[:0], c.scratch[:0]
	canonPool.Put(c)
}

func (c *canonicalizer) space() {
	for c.i < len(c.src) {
		switch c.src[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// value reads one JSON value and appends its canonical form.
func (c *canonicalizer) value() bool {
	if c.i >= len(c.src) {
		return false
	}
	switch b := c.src[c.i]; {
	case b == '{':
		return c.object()
	case b == '[':
		return c.array()
	case b == '"':
		var ok bool
		if c.tmp, ok = c.str(c.tmp[:0]); !ok {
			return false
		}
		c.out = appendCanonicalString(c.out, c.tmp)
		return true
	case b == '-' || '0' <= b && b <= '9':
		return c.number()
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if end := c.i + len(lit); end <= len(c.src) && string(c.src[c.i:end]) == lit {
				c.i += len(lit)
				c.out = append(c.out, lit...)
				return true
			}
		}
		return false
	}
}

func (c *canonicalizer) enter() bool {
	c.depth++
	return c.depth <= maxCanonicalDepth
}

func (c *canonicalizer) array() bool {
	if !c.enter() {
		return false
	}
	c.i++ // '['
	c.out = append(c.out, '[')
	c.space()
	if c.i < len(c.src) && c.src[c.i] == ']' {
		c.i++
		c.depth--
		c.out = append(c.out, ']')
		return true
	}
	for {
		c.space()
		if !c.value() {
			return false
		}
		c.space()
		if c.i >= len(c.src) {
			return false
		}
		switch c.src[c.i] {
		case ',':
			c.i++
			c.out = append(c.out, ',')
		case ']':
			c.i++
			c.depth--
			c.out = append(c.out, ']')
			return true
		default:
			return false
		}
	}
}

func (c *canonicalizer) object() bool {
	if !c.enter() {
		return false
	}
	c.i++ // '{'
	objStart, base := len(c.out), len(c.members)
	c.out = append(c.out, '{')
	c.space()
	if c.i < len(c.src) && c.src[c.i] == '}' {
		c.i++
		c.out = append(c.out, '}')
		c.depth--
		return true
	}
	for {
		c.space()
		if c.i >= len(c.src) || c.src[c.i] != '"' {
			return false
		}
		if len(c.members) > base {
			c.out = append(c.out, ',')
		}
		m := member{start: len(c.out)}
		var ok bool
		if c.tmp, ok = c.str(c.tmp[:0]); !ok {
			return false
		}
		c.out = appendCanonicalString(c.out, c.tmp)
		m.nameEnd = len(c.out)
		c.space()
		if c.i >= len(c.src) || c.src[c.i] != ':' {
			return false
		}
		c.i++
		c.space()
		c.out = append(c.out, ':', 'v')
		mark := len(c.out)
		if !c.value() {
			return false
		}
		if len(c.out)-mark > maxInlineValue {
			// A long value is represented by its digest: sorting this object then moves 33 bytes for
			// it, and never again what is inside.
			sum := sha256.Sum256(c.out[mark:])
			c.out = append(c.out[:mark-1], 'h')
			c.out = append(c.out, sum[:]...)
		}
		m.end = len(c.out)
		c.members = append(c.members, m)
		c.space()
		if c.i >= len(c.src) {
			return false
		}
		if c.src[c.i] == '}' {
			c.i++
			break
		}
		if c.src[c.i] != ',' {
			return false
		}
		c.i++
	}
	// Members are ordered by their canonical names, a total order in which equal names are adjacent
	// (canonical quoting is one-to-one).
	ms, out := c.members[base:], c.out
	name := func(m member) []byte { return out[m.start:m.nameEnd] }
	cmp := func(a, b member) int { return bytes.Compare(name(a), name(b)) }
	if !slices.IsSortedFunc(ms, cmp) {
		c.scratch = append(c.scratch[:0], c.out[objStart:]...)
		for k := range ms {
			ms[k].start -= objStart
			ms[k].nameEnd -= objStart
			ms[k].end -= objStart
		}
		scratch := c.scratch
		slices.SortFunc(ms, func(a, b member) int {
			return bytes.Compare(scratch[a.start:a.nameEnd], scratch[b.start:b.nameEnd])
		})
		c.out = append(c.out[:objStart], '{')
		for k, m := range ms {
			if k > 0 {
				c.out = append(c.out, ',')
			}
			c.out = append(c.out, scratch[m.start:m.end]...)
		}
		out = c.out
		name = func(m member) []byte { return scratch[m.start:m.nameEnd] }
	}
	for k := 1; k < len(ms); k++ {
		if bytes.Equal(name(ms[k-1]), name(ms[k])) {
			return false // a member named twice: a strict decoder refuses it
		}
	}
	c.out = append(c.out, '}')
	c.members = c.members[:base]
	c.depth--
	return true
}

// str reads a string and appends its decoded characters (UTF-8) to dst. Invalid UTF-8, a control
// character, a bad escape or a lone surrogate is not strict JSON.
func (c *canonicalizer) str(dst []byte) ([]byte, bool) {
	c.i++ // '"'
	for c.i < len(c.src) {
		// A run of plain ASCII is copied at once.
		j := c.i
		for j < len(c.src) && c.src[j] >= 0x20 && c.src[j] < utf8.RuneSelf && c.src[j] != '"' && c.src[j] != '\\' {
			j++
		}
		dst = append(dst, c.src[c.i:j]...)
		if c.i = j; j == len(c.src) {
			break
		}
		b := c.src[c.i]
		switch {
		case b == '"':
			c.i++
			return dst, true
		case b == '\\':
			if c.i+1 >= len(c.src) {
				return dst, false
			}
			e := c.src[c.i+1]
			c.i += 2
			switch e {
			case '"', '\\', '/':
				dst = append(dst, e)
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r, ok := c.hex4()
				if !ok {
					return dst, false
				}
				if utf16.IsSurrogate(r) {
					// Only a high surrogate followed by an escaped low one is a character.
					if r >= 0xdc00 || c.i+1 >= len(c.src) || c.src[c.i] != '\\' || c.src[c.i+1] != 'u' {
						return dst, false
					}
					c.i += 2
					lo, ok := c.hex4()
					if !ok || lo < 0xdc00 || lo > 0xdfff {
						return dst, false
					}
					r = utf16.DecodeRune(r, lo)
				}
				dst = utf8.AppendRune(dst, r)
			default:
				return dst, false
			}
		case b < 0x20:
			return dst, false
		case b < utf8.RuneSelf:
			dst = append(dst, b)
			c.i++
		default:
			r, size := utf8.DecodeRune(c.src[c.i:])
			if r == utf8.RuneError && size == 1 {
				return dst, false
			}
			dst = append(dst, c.src[c.i:c.i+size]...)
			c.i += size
		}
	}
	return dst, false
}

func (c *canonicalizer) hex4() (rune, bool) {
	if c.i+4 > len(c.src) {
		return 0, false
	}
	var r rune
	for _, b := range c.src[c.i : c.i+4] {
		switch {
		case '0' <= b && b <= '9':
			b -= '0'
		case 'a' <= b && b <= 'f':
			b -= 'a' - 10
		case 'A' <= b && b <= 'F':
			b -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(b)
	}
	c.i += 4
	return r, true
}

// appendCanonicalString appends s (valid UTF-8) quoted as RFC 8785 §3.2.2.2 writes strings: '"' and
// '\\' escaped, control characters as \b, \t, \n, \f, \r or \u00xx, every other character as itself.
func appendCanonicalString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for len(s) > 0 {
		// A run of characters written as they are is copied at once.
		j := 0
		for j < len(s) && s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' {
			j++
		}
		dst = append(dst, s[:j]...)
		if j == len(s) {
			break
		}
		b := s[j]
		s = s[j+1:]
		switch {
		case b == '"' || b == '\\':
			dst = append(dst, '\\', b)
		case b == '\b':
			dst = append(dst, '\\', 'b')
		case b == '\t':
			dst = append(dst, '\\', 't')
		case b == '\n':
			dst = append(dst, '\\', 'n')
		case b == '\f':
			dst = append(dst, '\\', 'f')
		case b == '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
		}
	}
	return append(dst, '"')
}

// maxExponentDigits bounds the significant digits of an exponent computed in an int, with room for
// the body's length; a longer one (JSON sets no limit) is computed with math/big.
const maxExponentDigits = 15

// number reads a number (RFC 8259 §6) and appends its exact decimal value in one form: "0", or an
// optional '-', the significant digits without leading or trailing zeros, and "e" with the exponent
// unless it is 0 — so 100, 1e2, 1.00E+2 and 10e1 are all "1e2".
func (c *canonicalizer) number() bool {
	src := c.src
	neg := src[c.i] == '-'
	if neg {
		c.i++
	}
	digits := func() (int, int) {
		start := c.i
		for c.i < len(src) && '0' <= src[c.i] && src[c.i] <= '9' {
			c.i++
		}
		return start, c.i
	}
	is, ie := digits()
	if is == ie || src[is] == '0' && ie-is > 1 {
		return false // no digits, or a leading zero
	}
	fs, fe := ie, ie
	if c.i < len(src) && src[c.i] == '.' {
		c.i++
		if fs, fe = digits(); fs == fe {
			return false
		}
	}
	exp := 0
	var bigExp []byte // the digits of an exponent too long for exp
	expNeg := false
	if c.i < len(src) && (src[c.i] == 'e' || src[c.i] == 'E') {
		c.i++
		if c.i < len(src) && (src[c.i] == '+' || src[c.i] == '-') {
			expNeg = src[c.i] == '-'
			c.i++
		}
		es, ee := digits()
		if es == ee {
			return false
		}
		for es < ee-1 && src[es] == '0' {
			es++
		}
		if ee-es > maxExponentDigits {
			bigExp = src[es:ee]
		} else {
			for _, d := range src[es:ee] {
				exp = exp*10 + int(d-'0')
			}
			if expNeg {
				exp = -exp
			}
		}
	}
	// The significand is the integer and fraction digits; the value is significand × 10^(exp-len(fraction)).
	exp -= fe - fs
	intPart, frac := src[is:ie], src[fs:fe]
	// Leading zeros: of the integer part (only "0"), then of the fraction when the integer part is 0.
	lead := intPart
	if len(lead) == 1 && lead[0] == '0' {
		lead = nil
		for len(frac) > 0 && frac[0] == '0' {
			frac = frac[1:]
		}
	}
	// Trailing zeros: of the fraction, then of the integer part when the fraction is empty.
	for len(frac) > 0 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
		exp++
	}
	if len(frac) == 0 {
		for len(lead) > 0 && lead[len(lead)-1] == '0' {
			lead = lead[:len(lead)-1]
			exp++
		}
	}
	if len(lead) == 0 && len(frac) == 0 {
		c.out = append(c.out, '0') // zero, whatever its sign and exponent
		return true
	}
	if neg {
		c.out = append(c.out, '-')
	}
	c.out = append(c.out, lead...)
	c.out = append(c.out, frac...)
	if bigExp != nil {
		// exp holds what the digits moved the exponent by; the exponent is never 0 here.
		var e big.Int
		e.SetString(string(bigExp), 10)
		if expNeg {
			e.Neg(&e)
		}
		e.Add(&e, big.NewInt(int64(exp)))
		c.out = append(c.out, 'e')
		c.out = e.Append(c.out, 10)
		return true
	}
	if exp != 0 {
		c.out = append(c.out, 'e')
		c.out = appendInt(c.out, exp)
	}
	return true
}

func appendInt(dst []byte, v int) []byte {
	if v < 0 {
		dst = append(dst, '-')
		v = -v
	}
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(dst, buf[i:]...)
}
