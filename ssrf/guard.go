package ssrf

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrBlocked is the condition of a dial or URL refused because its address is not a public
// unicast address. Errors from the guard wrap it; errors.As finds a *BlockedError for details.
var ErrBlocked = errors.New("ssrf: blocked address")

// BlockedError is the error of a refused address. Its message names the address class only:
// neither the address, which may reveal the internal network to the customer who reads the failure,
// nor the URL, whose query may carry a token. It is a plain value; the zero value names no address
// and no class.
type BlockedError struct {
	// Addr is the address refused, IPv4-mapped forms unmapped; for operators' logs.
	Addr netip.Addr
	// Class says why: "loopback", "private", "link-local", "cgnat", "multicast", "broadcast",
	// "unspecified", "documentation", "benchmarking", "site-local", "6to4", "nat64", "reserved",
	// "invalid".
	Class string
}

func (e *BlockedError) Error() string {
	return "ssrf: blocked address (" + e.Class + ")"
}

// Is makes errors.Is(err, ErrBlocked) true.
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// Guard decides which addresses webhook deliveries may connect to. By default only public
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
// An Guard is safe for concurrent use while its fields are not modified; NewTransport
// copies it. The zero value (and a nil *Guard) is the default policy.
type Guard struct {
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

// Check returns nil if a delivery may connect to addr on any port, or a *BlockedError. A zone
// is ignored. Entries of AllowAddrPorts do not count, since they allow one port only.
func (g *Guard) Check(addr netip.Addr) error {
	return g.check(addr, anyPort)
}

// anyPort is check's port when none is known: only entries that allow every port count.
const anyPort = -1

// check is Check for a connection to port (anyPort: unknown).
func (g *Guard) check(addr netip.Addr, port int) error {
	a, class := g.classify(addr, port)
	if class == "" {
		return nil
	}
	return &BlockedError{Addr: a, Class: class}
}

// classify returns the address as judged (zone dropped, unmapped) and why a connection to it on port
// is blocked, or "".
func (g *Guard) classify(addr netip.Addr, port int) (netip.Addr, string) {
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
func (g *Guard) allows(a netip.Addr, port int) bool {
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
func (g *Guard) nat64(a netip.Addr) (v4 netip.Addr, ok, supported bool) {
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
func (g *Guard) allowsHost(host string, port int) bool {
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
func (g *Guard) Control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &BlockedError{Class: "invalid"}
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
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return g.dial(ctx, network, addr, nil)
}

// dial is DialContext with a resolver, which tests replace to play DNS rebinding.
func (g *Guard) dial(ctx context.Context, network, addr string, r *net.Resolver) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("ssrf: network %q: %w", network, ErrBlocked)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("ssrf: dial: %w", err)
	}
	d := &net.Dialer{Timeout: deliveryDialTimeout, KeepAlive: deliveryKeepAlive, Resolver: r,
		ControlContext: g.Control}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok && (*Guard)(nil).Check(ta.AddrPort().Addr()) != nil {
		// Only the allow-list let this through: whatever answers here is ours, not the customer's.
		return &allowListedConn{Conn: c}, nil
	}
	return c, nil
}

// allowListedConn is a delivery connection to an address that only the allow-list admits.
type allowListedConn struct{ net.Conn }

// AllowListed reports whether c — a connection a Guard dialed, or the TLS connection on one — reached
// an address that only the allow-list admits (Guard.Allow, AllowAddrPorts or AllowHosts), that is an
// address of the service's own network: whatever answers there is not a customer's, so a caller
// should not record or show its answer. Use it in an httptrace.ClientTrace's GotConn.
func AllowListed(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	_, ok := c.(*allowListedConn)
	return ok
}

func (g *Guard) clone() *Guard {
	if g == nil {
		return &Guard{}
	}
	return &Guard{
		Allow:          slices.Clone(g.Allow),
		AllowAddrPorts: slices.Clone(g.AllowAddrPorts),
		AllowHosts:     slices.Clone(g.AllowHosts),
		NAT64:          slices.Clone(g.NAT64),
	}
}

// NewTransport returns a transport for webhook deliveries that dials through a copy of g (nil
// means the default policy). It ignores HTTP_PROXY and HTTPS_PROXY: through a proxy the guard would
// see only the proxy's address, and the proxy would connect to 169.254.169.254 for us. It bounds the
// dial, TLS handshake and response header phases, reads at most 64 KiB of response headers, keeps
// few idle connections per host, and does not ask for compression (the body is discarded).
func NewTransport(g *Guard) *http.Transport {
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

// NewClient returns a client on NewTransport(g) that never follows redirects: a 3xx
// is returned as the response, so a Location cannot lead a delivery somewhere its URL was not
// checked to go. It sets no overall timeout; bound each request with its context (the Dispatcher
// does).
func NewClient(g *Guard) *http.Client {
	return &http.Client{
		Transport:     NewTransport(g),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
