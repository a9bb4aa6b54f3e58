package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// svc prints what servers send — IDs, URLs, event types and data, problem details — and a server
// must not be able to act on the developer's terminal through it: move the cursor, rewrite the
// title, hide text, or reorder what a line seems to say. Two layers see to it:
//
//   - Every byte svc writes to stdout and stderr passes through terminalSafe (run installs it, so no
//     command can forget it): only valid UTF-8 of graphic runes, newlines and tabs gets through.
//     Anything else — C0 controls (ESC, BEL, CR, …), DEL, C1 controls (U+0080–U+009F, CSI U+009B and
//     OSC U+009D among them), raw bytes that are not UTF-8 (a lone 0x9B is CSI to an 8-bit
//     terminal), bidi overrides and isolates (U+202A–U+202E, U+2066–U+2069), every other format
//     character, line and paragraph separators, private-use and unassigned code points — becomes
//     U+FFFD.
//   - --json output is JSON whose strings escape exactly those runes as \u (jsonSafe), so it passes
//     the writer unchanged and a program reading it gets every value exactly as the server sent it;
//     only bytes that are not UTF-8, which no JSON decoder can return either, are \ufffd.

// printable reports whether r may reach a terminal inside a line.
// (U+FFFD is one; a byte that is not UTF-8, which utf8.DecodeRune also reports as U+FFFD, is not.)
func printable(r rune) bool { return unicode.IsGraphic(r) }

// terminalSafe passes output on, made safe for a terminal. Each Write is cleaned as a whole, so a
// rune split across two writes would become U+FFFD; svc's writers (fmt, tabwriter) never split one.
// It is safe for concurrent use when the writer underneath is.
type terminalSafe struct{ w io.Writer }

// newTerminalSafe wraps w, once.
func newTerminalSafe(w io.Writer) io.Writer {
	if _, ok := w.(terminalSafe); ok {
		return w
	}
	return terminalSafe{w}
}

func (t terminalSafe) Write(p []byte) (int, error) {
	if _, err := t.w.Write(safeText(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// safeText is p with every rune that may not reach a terminal (see above) replaced by U+FFFD; p
// itself when there is none.
func safeText(p []byte) []byte {
	i := 0
	for i < len(p) {
		c := p[i]
		if c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' {
			i++
			continue
		}
		if r, size := utf8.DecodeRune(p[i:]); c >= utf8.RuneSelf && size > 1 && printable(r) {
			i += size
			continue
		}
		break
	}
	if i == len(p) {
		return p
	}
	out := make([]byte, i, len(p)+8)
	copy(out, p[:i])
	for i < len(p) {
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == '\n' || r == '\t':
			out = append(out, byte(r))
		case r == utf8.RuneError && size == 1, !printable(r):
			out = utf8.AppendRune(out, utf8.RuneError)
		default:
			out = append(out, p[i:i+size]...)
		}
		i += size
	}
	return out
}

// clean is s for a place within a line — a field of a table, a problem's detail: every rune that
// may not reach a terminal, newlines and tabs included, becomes U+FFFD, so a server cannot forge a
// line of svc's output either.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if printable(r) {
			return r
		}
		return utf8.RuneError
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// errNotJSON: --json was asked for and the server's answer is not JSON.
var errNotJSON = errors.New("the server's answer is not JSON")

// jsonSafe returns the JSON value data on one line, with every rune of its strings that may not
// reach a terminal written as a \u escape (a surrogate pair above U+FFFF), so the value stays exactly
// the same for whoever decodes it; bytes that are not UTF-8 become \ufffd, as any decoder reads them.
func jsonSafe(data []byte) ([]byte, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return nil, errNotJSON
	}
	p := compact.Bytes()
	out := make([]byte, 0, len(p))
	inString := false
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case !inString:
			inString = c == '"'
			out = append(out, c)
			i++
		case c == '\\': // an escape is ASCII; copy it with the byte it escapes
			out = append(out, c, p[i+1])
			i += 2
		case c == '"':
			inString = false
			out = append(out, c)
			i++
		case c >= 0x20 && c < 0x7f:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(p[i:])
			if r == utf8.RuneError && size == 1 || !printable(r) {
				out = appendEscaped(out, r)
			} else {
				out = append(out, p[i:i+size]...)
			}
			i += size
		}
	}
	return out, nil
}

func appendEscaped(out []byte, r rune) []byte {
	if r > 0xFFFF {
		hi, lo := utf16.EncodeRune(r)
		return appendEscaped(appendEscaped(out, hi), lo)
	}
	out = append(out, `\u`...)
	hex := strconv.FormatUint(uint64(r), 16)
	return append(append(out, "0000"[len(hex):]...), hex...)
}

// printJSON prints a server's JSON answer on one line, safe for a terminal and exact for a program.
func printJSON(w io.Writer, body []byte) error {
	b, err := jsonSafe(body)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
