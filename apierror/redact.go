package apierror

import "strings"

// The markers of a credential are the prefixes of the platform's secrets and of the key formats
// clients are likely to paste by mistake: API keys (sk_), restricted and publishable keys (rk_, pk_)
// and webhook signing secrets (whsec_).

// minCredentialTail is how many characters must follow a marker before a word is taken for a
// credential: a real key has dozens, and a short word such as "pk_id" is left alone.
const minCredentialTail = 12

// Redacted replaces a value shaped like a credential in a problem's detail.
const Redacted = "(a value shaped like a credential, not repeated)"

// LooksLikeCredential reports whether s contains a word shaped like an API key or a signing secret:
// a run of letters, digits, '_' and '-' holding sk_, rk_, pk_ or whsec_ followed by at least 12 more
// such characters. Such input is never echoed in a problem (Redact), nor taken over as a request ID.
func LooksLikeCredential(s string) bool {
	_, _, ok := nextCredential(s, 0)
	return ok
}

// Redact returns s with every word shaped like a credential (LooksLikeCredential) replaced by
// Redacted. The Writer applies it to a problem's title, detail, instance, violations (pointer, name
// and detail: a member or parameter name is client input too) and the strings of its extension
// members, and to the error it logs for an opaque 500, so a problem built from client input ("no
// webhook endpoint %q", an unknown member "/sk_live_…") never reflects a key the client pasted in the
// wrong place into logs, proxies and error trackers.
func Redact(s string) string {
	start, end, ok := nextCredential(s, 0)
	if !ok {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(Redacted))
	last := 0
	for ok {
		b.WriteString(s[last:start])
		b.WriteString(Redacted)
		last = end
		start, end, ok = nextCredential(s, end)
	}
	b.WriteString(s[last:])
	return b.String()
}

// redact is Redact with its fast path inlined into the Writer: every marker ends in '_', and most
// details have none.
func redact(s string) string {
	if strings.IndexByte(s, '_') < 0 {
		return s
	}
	return Redact(s)
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// nextCredential finds the first credential-shaped word of s at or after from, as [start, end). Every
// marker ends in '_', so one IndexByte scan finds the candidates: most details have no '_' at all.
func nextCredential(s string, from int) (start, end int, ok bool) {
	for from < len(s) {
		i := strings.IndexByte(s[from:], '_')
		if i < 0 {
			return 0, 0, false
		}
		at := from + i // the '_'
		from = at + 1
		if !(at >= 2 && s[at-1] == 'k' && (s[at-2] == 's' || s[at-2] == 'r' || s[at-2] == 'p') ||
			at >= 5 && s[at-5:at] == "whsec") {
			continue
		}
		// The word around the marker; it must be followed by enough characters to be a key.
		start = at
		for start > 0 && isWordByte(s[start-1]) {
			start--
		}
		end = at + 1
		for end < len(s) && isWordByte(s[end]) {
			end++
		}
		if end-at-1 >= minCredentialTail {
			return start, end, true
		}
		from = end
	}
	return 0, 0, false
}
