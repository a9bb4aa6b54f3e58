package producer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// This file keeps webhook deliveries away from the producer's own network (issue 14): customers type
// in the URLs, and without it 169.254.169.254, localhost:6379 or 10.0.0.0/8 received our POSTs.
//
// There are two lines of defence. URLPolicy.Check refuses a bad URL at registration with an error the
// customer can act on; it cannot see what a name will resolve to. AddressGuard refuses at dial time,
// on the address the kernel is about to connect to, after DNS resolution: that is the check that
// counts, because a name may resolve to a public address when it is registered and to 127.0.0.1 when
// it is delivered to (DNS rebinding), and names like 127.0.0.1.nip.io resolve to loopback on purpose.

// ErrBlockedAddress is the condition of a dial or URL refused because its address is not a public
// unicast address. Errors from the guard wrap it; errors.As finds a *BlockedAddressError for details.
var ErrBlockedAddress = errors.New("producer: blocked address")

// BlockedAddressError is the error of a refused address. Its message names the address class only:
// neither the address, which may reveal the internal network to the customer who reads the failure,
// nor the URL, whose query may carry a token. It is a plain value; the zero value names no address
// and no class.
type BlockedAddressError struct {
	// Addr is the address refused, IPv4-mapped forms unmapped; for operators' logs.
	Addr netip.Addr
	// Class says why: "loopback", "private", "link-local", "cgnat", "multicast", "broadcast",
	// "unspecified", "documentation", "benchmarking", "site-local", "6to4", "nat64", "reserved",
	// "invalid".
	Class string
}

func (e *BlockedAddressError) Error() string {
	return "producer: blocked address (" + e.Class + ")"
}

// Is makes errors.Is(err, ErrBlockedAddress) true.
func (e *BlockedAddressError) Is(target error) bool { return target == ErrBlockedAddress }

// AddressGuard decides which addresses webhook deliveries may connect to. By default only public
// unicast addresses pass; Allow and AllowAddrPorts open holes for the sandbox, tests and demos that
// deliver to loopback or a private network, and AllowHosts lets registration accept the names of
// such hosts. Open each hole as narrowly as the need: one guard per environment (a production
// endpoint must never reach what only the sandbox was allowed, see DispatcherOptions.ClientFor), a
// port where one is known. A response from a connection that only the allow-list let through is
// recorded by its status alone (see Dispatcher): an allow-listed internal service must not be
// readable through the delivery history.
//
// Blocked unless allowed: IPv4 0.0.0.0/8 (unspecified; 0.0.0.0 reaches loopback on Linux),
// 127.0.0.0/8, 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10 (CGNAT, where Alibaba's
// metadata service lives), 169.254.0.0/16 (cloud metadata), 192.0.0.0/24, 192.0.2.0/24,
// 192.88.99.0/24, 198.18.0.0/15, 198.51.100.0/24, 203.0.113.0/24, 224.0.0.0/4, 240.0.0.0/4 and
// 255.255.255.255; IPv6 ::, ::1, fe80::/10, fec0::/10, fc00::/7, ff00::/8, 2001::/23 (Teredo,
// ORCHID, benchmarking), 2001:db8::/32, 3fff::/20, and everything outside 2000::/3 — which includes
// IPv4-compatible ::a.b.c.d, deprecated and refused whatever it carries. IPv4-mapped ::ffff:a.b.c.d
// is judged as the IPv4 address it is. 6to4 (2002::/16) is refused outright: it is deprecated
// (RFC 7526), no real endpoint uses it, and where it leads depends on the host's tunnels. NAT64
// addresses (64:ff9b::/96 and the prefixes in NAT64) are judged by the IPv4 address they carry, so
// deliveries work from IPv6-only networks with DNS64 and still cannot reach 64:ff9b::7f00:1.
//
// An AddressGuard is safe for concurrent use while its fields are not modified; NewDeliveryTransport
// copies it. The zero value (and a nil *AddressGuard) is the default policy.
type AddressGuard struct {
	// Allow lists prefixes that pass on every port even if the block list has them, such as
	// 127.0.0.0/8 for tests. They are matched against the unmapped address and, for NAT64, the IPv4
	// address carried.
	Allow []netip.Prefix
	// AllowAddrPorts lists addresses that pass on one port only, such as 127.0.0.1:8443 for a
	// consumer on loopback: the same address on another port (127.0.0.1:6379) stays refused. They are
	// matched as Allow is; Check, which is given no port, does not consult them.
	AllowAddrPorts []netip.AddrPort
	// AllowHosts lists host names that URLPolicy.Check accepts although they are single labels or
	// local-use names: the sandbox's receiver, "localhost" in a demo. An entry is "name" (any port) or
	// "name:port" (that port only); names match case-insensitively and without a trailing dot. A
	// name opens no address: what it resolves to at delivery time goes through Allow and
	// AllowAddrPorts like any other address, so that a listed name cannot lead a delivery anywhere
	// else (list localhost with 127.0.0.0/8 and ::1/128).
	AllowHosts []string
	// NAT64 lists the network-specific NAT64 prefixes of the network the deliveries leave from
	// (RFC 6052: /32, /40, /48, /56, /64 or /96); addresses in them are judged by the IPv4 address
	// they carry. An address in a prefix of another length is refused. 64:ff9b::/96 always counts.
	NAT64 []netip.Prefix
}

// Timeouts of the delivery transport. A Dispatcher's per-request timeout bounds the whole request;
// these bound the phases for callers who use the client without a deadline of their own.
const (
	deliveryDialTimeout    = 5 * time.Second
	deliveryTLSTimeout     = 5 * time.Second
	deliveryHeaderTimeout  = 10 * time.Second
	deliveryIdleTimeout    = 90 * time.Second
	deliveryKeepAlive      = 30 * time.Second
	deliveryMaxIdle        = 256
	deliveryMaxIdlePerHost = 4
	deliveryMaxHeaderBytes = 64 << 10 // the endpoint is untrusted; bound what we read from it
)

type classedPrefix struct {
	prefix netip.Prefix
	class  string
}

// blocked4 and blocked6 are read-only tables. Order matters where prefixes nest.
var (
	blocked4 = []classedPrefix{
		{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
		{netip.MustParsePrefix("10.0.0.0/8"), "private"},
		{netip.MustParsePrefix("100.64.0.0/10"), "cgnat"},
		{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
		{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
		{netip.MustParsePrefix("172.16.0.0/12"), "private"},
		{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
		{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
		{netip.MustParsePrefix("192.88.99.0/24"), "reserved"},
		{netip.MustParsePrefix("192.168.0.0/16"), "private"},
		{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
		{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
		{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
		{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
		{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
		{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	}
	blocked6 = []classedPrefix{
		{netip.MustParsePrefix("::/128"), "unspecified"},
		{netip.MustParsePrefix("::1/128"), "loopback"},
		{netip.MustParsePrefix("ff00::/8"), "multicast"},
		{netip.MustParsePrefix("fe80::/10"), "link-local"},
		{netip.MustParsePrefix("fec0::/10"), "site-local"},
		{netip.MustParsePrefix("fc00::/7"), "private"},
		{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
		{netip.MustParsePrefix("3fff::/20"), "documentation"},
		{netip.MustParsePrefix("2001:2::/48"), "benchmarking"},
		{netip.MustParsePrefix("2001::/23"), "reserved"},
	}
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
)

// Check returns nil if a delivery may connect to addr on any port, or a *BlockedAddressError. A zone
// is ignored. Entries of AllowAddrPorts do not count, since they allow one port only.
func (g *AddressGuard) Check(addr netip.Addr) error {
	return g.check(addr, anyPort)
}

// anyPort is check's port when none is known: only entries that allow every port count.
const anyPort = -1

// check is Check for a connection to port (anyPort: unknown).
func (g *AddressGuard) check(addr netip.Addr, port int) error {
	a, class := g.classify(addr, port)
	if class == "" {
		return nil
	}
	return &BlockedAddressError{Addr: a, Class: class}
}

// classify returns the address as judged (zone dropped, unmapped) and why a connection to it on port
// is blocked, or "".
func (g *AddressGuard) classify(addr netip.Addr, port int) (netip.Addr, string) {
	if !addr.IsValid() {
		return addr, "invalid"
	}
	a := addr.WithZone("").Unmap()
	if g.allows(a, port) {
		return a, ""
	}
	if a.Is4() {
		return a, class4(a)
	}
	if v4, ok, supported := g.nat64(a); ok {
		if !supported {
			return a, "nat64"
		}
		if g.allows(v4, port) {
			return a, ""
		}
		return a, class4(v4)
	}
	if sixToFour.Contains(a) {
		b := a.As16()
		if c := class4(netip.AddrFrom4([4]byte(b[2:6]))); c != "" {
			return a, c
		}
		return a, "6to4"
	}
	for _, r := range blocked6 {
		if r.prefix.Contains(a) {
			return a, r.class
		}
	}
	if !globalUnicast6.Contains(a) {
		return a, "reserved"
	}
	return a, ""
}

func class4(a netip.Addr) string {
	for _, r := range blocked4 {
		if r.prefix.Contains(a) {
			return r.class
		}
	}
	return ""
}

// allows reports whether an entry of the allow-list lets a connect to port (anyPort: every port).
func (g *AddressGuard) allows(a netip.Addr, port int) bool {
	if g == nil {
		return false
	}
	for _, p := range g.Allow {
		if p.Contains(a) {
			return true
		}
	}
	if port == anyPort {
		return false
	}
	for _, ap := range g.AllowAddrPorts {
		if int(ap.Port()) == port && ap.Addr().WithZone("").Unmap() == a {
			return true
		}
	}
	return false
}

// nat64 reports whether a is in a NAT64 prefix, whether that prefix's length is one RFC 6052 defines,
// and if so the IPv4 address a carries: four bytes from the prefix's end, skipping bits 64–71.
func (g *AddressGuard) nat64(a netip.Addr) (v4 netip.Addr, ok, supported bool) {
	bits := -1
	if nat64WellKnown.Contains(a) {
		bits = 96
	} else if g != nil {
		for _, p := range g.NAT64 {
			if p.Addr().Is6() && p.Contains(a) {
				bits = p.Bits()
				break
			}
		}
	}
	switch bits {
	case -1:
		return netip.Addr{}, false, false
	case 32, 40, 48, 56, 64, 96:
	default:
		return netip.Addr{}, true, false
	}
	b := a.As16()
	var out [4]byte
	for i, n := bits/8, 0; n < 4; i++ {
		if i == 8 {
			continue
		}
		out[n] = b[i]
		n++
	}
	return netip.AddrFrom4(out), true, true
}

// allowsHost reports whether an entry of AllowHosts names host with port (or with no port).
func (g *AddressGuard) allowsHost(host string, port int) bool {
	if g == nil || host == "" {
		return false
	}
	host = strings.TrimSuffix(host, ".")
	for _, h := range g.AllowHosts {
		name, p, hasPort := strings.Cut(h, ":")
		if !strings.EqualFold(strings.TrimSuffix(name, "."), host) {
			continue
		}
		if !hasPort {
			return true
		}
		if n, err := strconv.Atoi(p); err == nil && n == port {
			return true
		}
	}
	return false
}

// Control is a net.Dialer ControlContext hook: it refuses the connection unless the resolved ip:port
// the dialer is about to connect to is allowed (a public unicast address, or one the allow-list
// opens for that port). It runs after DNS resolution, once per address tried, so a name that
// resolves elsewhere at delivery time than it did at registration is caught.
func (g *AddressGuard) Control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &BlockedAddressError{Class: "invalid"}
	}
	return g.check(ap.Addr(), int(ap.Port()))
}

// DialContext dials a TCP address for a delivery; use it as http.Transport.DialContext. Every address
// the host resolves to goes through Control, whether or not the name is in AllowHosts. Networks other
// than tcp, tcp4 and tcp6 are refused. A connection to an address that only the allow-list admits
// is marked as such, so that the Dispatcher records no response snippet from it.
//
// The resolver's search list still applies: a name that does not resolve as given may be tried
// under the local search domains. Whatever it resolves to is checked, but a public address that only
// an ACL protects is not refused; that, like every address the block list cannot know about, is for
// the egress firewall.
func (g *AddressGuard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return g.dial(ctx, network, addr, nil)
}

// dial is DialContext with a resolver, which tests replace to play DNS rebinding.
func (g *AddressGuard) dial(ctx context.Context, network, addr string, r *net.Resolver) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("producer: network %q: %w", network, ErrBlockedAddress)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("producer: dial: %w", err)
	}
	d := &net.Dialer{Timeout: deliveryDialTimeout, KeepAlive: deliveryKeepAlive, Resolver: r,
		ControlContext: g.Control}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok && (*AddressGuard)(nil).Check(ta.AddrPort().Addr()) != nil {
		// Only the allow-list let this through: whatever answers here is ours, not the customer's.
		return &allowListedConn{Conn: c}, nil
	}
	return c, nil
}

// allowListedConn is a delivery connection to an address that only the allow-list admits.
type allowListedConn struct{ net.Conn }

// allowListed reports whether c (or the connection under its TLS) is an allowListedConn.
func allowListed(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	_, ok := c.(*allowListedConn)
	return ok
}

func (g *AddressGuard) clone() *AddressGuard {
	if g == nil {
		return &AddressGuard{}
	}
	return &AddressGuard{
		Allow:          slices.Clone(g.Allow),
		AllowAddrPorts: slices.Clone(g.AllowAddrPorts),
		AllowHosts:     slices.Clone(g.AllowHosts),
		NAT64:          slices.Clone(g.NAT64),
	}
}

// NewDeliveryTransport returns a transport for webhook deliveries that dials through a copy of g (nil
// means the default policy). It ignores HTTP_PROXY and HTTPS_PROXY: through a proxy the guard would
// see only the proxy's address, and the proxy would connect to 169.254.169.254 for us. It bounds the
// dial, TLS handshake and response header phases, reads at most 64 KiB of response headers, keeps
// few idle connections per host, and does not ask for compression (the body is discarded).
func NewDeliveryTransport(g *AddressGuard) *http.Transport {
	return &http.Transport{
		Proxy:                  nil, // never http.ProxyFromEnvironment: see above
		DialContext:            g.clone().DialContext,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    deliveryTLSTimeout,
		ResponseHeaderTimeout:  deliveryHeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		IdleConnTimeout:        deliveryIdleTimeout,
		MaxIdleConns:           deliveryMaxIdle,
		MaxIdleConnsPerHost:    deliveryMaxIdlePerHost,
		MaxResponseHeaderBytes: deliveryMaxHeaderBytes,
		DisableCompression:     true,
	}
}

// NewDeliveryClient returns a client on NewDeliveryTransport(g) that never follows redirects: a 3xx
// is returned as the response, so a Location cannot lead a delivery somewhere its URL was not
// checked to go. It sets no overall timeout; bound each request with its context (the Dispatcher
// does).
func NewDeliveryClient(g *AddressGuard) *http.Client {
	return &http.Client{
		Transport:     NewDeliveryTransport(g),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

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

func (e *URLError) Error() string { return "producer: webhook URL " + e.Detail + " (" + e.Code + ")" }

// Unwrap returns the *BlockedAddressError or ErrBlockedAddress of a host_blocked refusal, else nil.
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
// the default AddressGuard.
type URLPolicy struct {
	// AllowHTTP accepts http as well as https (sandbox, tests).
	AllowHTTP bool
	// MaxLength limits the URL in bytes; 0 (or negative) means DefaultMaxURLLength.
	MaxLength int
	// Guard judges IP literals and supplies AllowHosts; nil means the default AddressGuard.
	Guard *AddressGuard
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
			err: ErrBlockedAddress}
	}
	for _, s := range localSuffixes {
		if name == s || strings.HasSuffix(name, "."+s) {
			return &URLError{Code: CodeHostBlocked, Detail: "must not use a host under ." + s + ", which is for local use",
				err: ErrBlockedAddress}
		}
	}
	return nil
}

func (p URLPolicy) checkAddr(a netip.Addr, port int) error {
	err := p.Guard.check(a, port)
	if err == nil {
		return nil
	}
	var be *BlockedAddressError
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
