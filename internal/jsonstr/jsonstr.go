// Package jsonstr appends Go strings as JSON strings, byte for byte as encoding/json encodes them, for
// the packages that write JSON by hand on hot paths (problem bodies, webhook envelopes, version
// transforms).
package jsonstr

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// Append appends s as a quoted JSON string as an encoding/json Encoder with SetEscapeHTML(false)
// writes it: '"', '\\' and control characters escaped, invalid UTF-8 replaced by U+FFFD, and U+2028
// and U+2029 escaped for JavaScript.
func Append(b []byte, s string) []byte {
	b = append(b, '"')
	b = AppendContent(b, s, false)
	return append(b, '"')
}

// AppendHTMLSafe is Append that also escapes '<', '>' and '&', as json.Marshal does.
func AppendHTMLSafe(b []byte, s string) []byte {
	b = append(b, '"')
	b = AppendContent(b, s, true)
	return append(b, '"')
}

// AppendContent appends s escaped for the inside of a JSON string, without the quotes, so that a
// string may be written in parts. html escapes '<', '>' and '&' too.
func AppendContent(b []byte, s string, html bool) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!html || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}
