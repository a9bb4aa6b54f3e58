package ssrf

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// DefaultMaxURLLength is URLPolicy's default limit on a webhook URL, in bytes.
const DefaultMaxURLLength = 2048

// Codes of URLError, usable as problem codes of a registration field.
const (
	CodeURLTooLong       = "url_too_long"       // longer than the limit, in bytes
	CodeURLMalformed     = "url_malformed"      // not parseable as a URL
	CodeURLNotAbsolute   = "url_not_absolute"   // no scheme, or no "//" authority
	CodeSchemeNotAllowed = "scheme_not_allowed" // not https (or http when allowed)
	CodeURLHasUserinfo   = "url_has_userinfo"   // user:password@ is not allowed
	CodeURLHasFragment   = "url_has_fragment"   // #… is never sent, so it is a mistake
	CodeHostMissing      = "host_missing"       // empty host
	CodeHostInvalid      = "host_invalid"       // not a host name or IP literal we accept
	CodeHostNotCanonical = "host_not_canonical" // a legacy numeric IPv4 form of a public address
	CodeHostBlocked      = "host_blocked"       // a blocked address, or a local-use name
	CodePortInvalid      = "port_invalid"       // empty, zero or above 65535
)

// Limits of host names (RFC 1035).
const (
	maxHostLength  = 253
	maxLabelLength = 63
)

// localSuffixes are names reserved or customary for local and private use (RFC 6761, RFC 6762
// appendix G, RFC 8375, ICANN's .internal): they resolve, if at all, inside our own network.
var localSuffixes = []string{
	"localhost", "local", "internal", "localdomain", "home.arpa",
	"lan", "home", "corp", "intranet", "private",
}

// URLError is why URLPolicy.Check refused a webhook URL. Code is one of the Code… constants; Detail
// is a sentence for the customer, located at the URL field ("must use https"). Neither repeats the
// URL's user information or query. It is a plain value; the zero value has no Code and refuses
// nothing.
type URLError struct {
	Code   string
	Detail string
	err    error
}

func (e *URLError) Error() string { return "ssrf: URL " + e.Detail + " (" + e.Code + ")" }

// Unwrap returns the *BlockedError or ErrBlocked of a host_blocked refusal, else nil.
func (e *URLError) Unwrap() error { return e.err }

// URLPolicy checks webhook URLs at registration, so the customer learns at once what the dial-time
// guard would refuse at every delivery. It is an early, located error, not the defence: it cannot know
// where a name will resolve.
//
// Check requires an absolute https URL (http too with AllowHTTP) with a host, no user information
// and no fragment, at most MaxLength bytes. The host must be:
//   - an IP literal that Guard allows (IPv6 in brackets, without a zone identifier), or
//   - a name of ASCII letters, digits, '-' and '_' in dot-separated labels (use the xn-- form of an
//     internationalised name), with at least two labels — a single label resolves through the
//     local search list — and not under localhost, local, internal (metadata.google.internal),
//     localdomain, home.arpa, lan, home, corp, intranet or private, or
//   - a name in Guard.AllowHosts (with the URL's port, when the entry names one), which skips the
//     other name checks; where it resolves is still the dial-time guard's to judge.
//
// An IP literal is judged with the URL's port (its scheme's default when it has none), so an
// address that Guard.AllowAddrPorts opens on one port is refused on any other.
//
// A host whose last label is a number is an IPv4 address to browsers, curl and getaddrinfo, which
// accept the inet_aton(3) forms 2130706433, 0x7f000001, 0177.0.0.1, 127.1 and 0x7f.1. Check parses it
// as inet_aton does: a blocked address is host_blocked; a public one in any form but the dotted quad
// is host_not_canonical, because Go's resolver would look it up as a name while others read a number.
//
// A URLPolicy is a plain value, safe for concurrent use. The zero value requires https and applies
// the default Guard.
type URLPolicy struct {
	// AllowHTTP accepts http as well as https (sandbox, tests).
	AllowHTTP bool
	// MaxLength limits the URL in bytes; 0 (or negative) means DefaultMaxURLLength.
	MaxLength int
	// Guard judges IP literals and supplies AllowHosts; nil means the default Guard.
	Guard *Guard
}

// Check returns nil if raw is acceptable as a webhook URL, or a *URLError.
func (p URLPolicy) Check(raw string) error {
	limit := p.MaxLength
	if limit <= 0 {
		limit = DefaultMaxURLLength
	}
	if len(raw) > limit {
		return urlErr(CodeURLTooLong, fmt.Sprintf("is %d bytes long; the limit is %d", len(raw), limit))
	}
	u, err := url.Parse(raw)
	if err != nil {
		// err quotes raw, user information included: never pass it on.
		return urlErr(CodeURLMalformed, "is not a valid URL")
	}
	if u.Scheme == "" || u.Opaque != "" || !strings.HasPrefix(raw[len(u.Scheme)+1:], "//") {
		return urlErr(CodeURLNotAbsolute, "must be an absolute URL such as https://hooks.example.com/path")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && p.AllowHTTP:
	case p.AllowHTTP:
		return urlErr(CodeSchemeNotAllowed, "must use https or http")
	default:
		return urlErr(CodeSchemeNotAllowed, "must use https")
	}
	if u.User != nil {
		return urlErr(CodeURLHasUserinfo, "must not contain a user name or password; authenticate with the signature")
	}
	if strings.Contains(raw, "#") {
		return urlErr(CodeURLHasFragment, "must not have a fragment (#…)")
	}
	host := u.Hostname()
	if host == "" {
		return urlErr(CodeHostMissing, "has no host")
	}
	if strings.HasSuffix(u.Host, ":") {
		return urlErr(CodePortInvalid, "has an empty port")
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if ps := u.Port(); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			return urlErr(CodePortInvalid, "has a port outside 1–65535")
		}
		port = n
	}
	return p.checkHost(host, port, strings.HasPrefix(u.Host, "["))
}

func (p URLPolicy) checkHost(host string, port int, bracketed bool) error {
	if strings.Contains(host, "%") {
		return urlErr(CodeHostInvalid, "must not have an IPv6 zone identifier")
	}
	if p.Guard.allowsHost(host, port) {
		return nil
	}
	a, err := netip.ParseAddr(host)
	switch {
	case bracketed && (err != nil || !a.Is6()):
		return urlErr(CodeHostInvalid, "has an invalid IPv6 address")
	case err == nil && a.Is6() && !bracketed:
		return urlErr(CodeHostInvalid, "must put an IPv6 address in brackets")
	case err == nil:
		return p.checkAddr(a, port)
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if !validHostName(name) {
		return urlErr(CodeHostInvalid, "has an invalid host name; use letters, digits and '-' (xn-- for other scripts)")
	}
	if endsInNumber(name) {
		a, ok := parseIPv4Legacy(name)
		if !ok {
			return urlErr(CodeHostInvalid, "has a host that looks like an IPv4 address but is not one")
		}
		if err := p.checkAddr(a, port); err != nil {
			return err
		}
		return urlErr(CodeHostNotCanonical, "must write its IPv4 address as "+a.String())
	}
	if !strings.Contains(name, ".") {
		return &URLError{Code: CodeHostBlocked, Detail: "must have a fully qualified host name, not a single label",
			err: ErrBlocked}
	}
	for _, s := range localSuffixes {
		if name == s || strings.HasSuffix(name, "."+s) {
			return &URLError{Code: CodeHostBlocked, Detail: "must not use a host under ." + s + ", which is for local use",
				err: ErrBlocked}
		}
	}
	return nil
}

func (p URLPolicy) checkAddr(a netip.Addr, port int) error {
	err := p.Guard.check(a, port)
	if err == nil {
		return nil
	}
	var be *BlockedError
	errors.As(err, &be)
	article := "a "
	if strings.ContainsRune("aeiou", rune(be.Class[0])) {
		article = "an "
	}
	return &URLError{Code: CodeHostBlocked, Detail: "must not point at " + article + be.Class + " address", err: err}
}

func urlErr(code, detail string) *URLError { return &URLError{Code: code, Detail: detail} }

// validHostName reports whether name (lower case, no trailing dot) is dot-separated labels of ASCII
// letters, digits, '-' and '_', each 1–63 bytes, 253 bytes in all.
func validHostName(name string) bool {
	if name == "" || len(name) > maxHostLength {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > maxLabelLength {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// endsInNumber reports whether the last label of name is decimal digits or 0x and hex digits: the
// WHATWG URL rule for a host that must be read as an IPv4 address. No top-level domain is numeric.
func endsInNumber(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if hex, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// parseIPv4Legacy parses s (lower case) as inet_aton(3) does: one to four dot-separated parts, each
// decimal, octal (leading 0) or hex (0x; "0x" alone is 0, as in WHATWG), the last part filling the
// bytes the others leave: a, a.b (b: 24 bits), a.b.c (c: 16 bits), a.b.c.d.
func parseIPv4Legacy(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals [4]uint64
	for i, p := range parts {
		v, ok := parseIPv4Part(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	n := len(parts)
	for i := range n - 1 {
		if vals[i] > 0xff {
			return netip.Addr{}, false
		}
	}
	last := vals[n-1]
	if last >= 1<<(8*(5-n)) {
		return netip.Addr{}, false
	}
	var ip uint32
	for i := range n - 1 {
		ip |= uint32(vals[i]) << (24 - 8*i)
	}
	ip |= uint32(last)
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), true
}

func parseIPv4Part(p string) (uint64, bool) {
	base := 10
	switch {
	case p == "":
		return 0, false
	case strings.HasPrefix(p, "0x"):
		p, base = p[2:], 16
		if p == "" {
			return 0, true
		}
	case len(p) > 1 && p[0] == '0':
		p, base = p[1:], 8
	}
	v, err := strconv.ParseUint(p, base, 64)
	if err != nil || v > 0xffffffff {
		return 0, false
	}
	return v, true
}
