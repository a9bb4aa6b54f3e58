package producer

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/svcplatform/conventions/webhook"
)

// The envelope is written by hand rather than by encoding/json: a range page is a thousand events,
// and encoding/json re-validates and compacts every event's data through reflection. Data was checked
// to be valid JSON when it was appended (and is checked again after a Render hook), so it is copied
// as it is. The field order and names are webhook.Event's.

// appendEvent appends ev as JSON. ev.Data must be valid JSON.
func appendEvent(b []byte, ev *webhook.Event) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, ev.ID)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendUint(b, ev.Sequence, 10)
	b = append(b, `,"type":`...)
	b = appendString(b, ev.Type)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, ev.Created, 10)
	b = append(b, `,"api_version":`...)
	b = appendString(b, ev.APIVersion)
	b = append(b, `,"data":`...)
	if len(ev.Data) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, ev.Data...)
	}
	return append(b, '}')
}

// eventSize estimates the encoded size of ev, to size buffers in one allocation.
func eventSize(ev *webhook.Event) int {
	return 96 + len(ev.ID) + len(ev.Type) + len(ev.APIVersion) + len(ev.Data)
}

// appendList appends a range response body.
func appendList(b []byte, events []webhook.Event, hasMore bool) []byte {
	b = append(b, `{"object":"list","data":[`...)
	for i := range events {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEvent(b, &events[i])
	}
	b = append(b, `],"has_more":`...)
	b = strconv.AppendBool(b, hasMore)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaping as encoding/json does (HTML characters included),
// with invalid UTF-8 replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
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
			i += size
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
	b = append(b, s[start:]...)
	return append(b, '"')
}

// validData reports whether a rendered event's data may be copied into a body as it is.
func validData(data json.RawMessage) bool { return len(data) == 0 || json.Valid(data) }
