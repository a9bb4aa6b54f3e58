package ssrf

import (
	"context"
	"net/netip"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 30: the allow-list trusted host names without checking their addresses. A name on the list
// is accepted at registration, and at dial time still goes only to the addresses the list allows.
func TestAllowListedNameDialledOnlyToAllowedAddresses(t *testing.T) {
	srv, hits := ssrfTarget(t, nil)
	port := ssrfPort(t, srv.URL)
	target := "http://hooks.internal:" + port + "/hooks"
	named := &Guard{AllowHosts: []string{"hooks.internal"}, Allow: []netip.Prefix{netip.MustParsePrefix("10.1.2.3/32")}}
	require.NoError(t, URLPolicy{AllowHTTP: true, Guard: named}.Check(target), "the listed name passes registration")

	// The name resolves to loopback, which the list does not open: refused before connecting.
	dns := &ssrfFakeDNS{answers: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}
	_, err := ssrfPost(ssrfClientWithResolver(named, dns.resolver()), target)
	require.ErrorIs(t, err, ErrBlocked)
	var be *BlockedError
	require.ErrorAs(t, err, &be)
	require.Equal(t, "loopback", be.Class)
	require.Zero(t, hits.Load(), "the internal service was never reached")

	// With loopback on the list too, the same name reaches it: the refusal was the address check's.
	both := &Guard{AllowHosts: []string{"hooks.internal"}, Allow: ssrfLoopback}
	resp, err := ssrfPost(ssrfClientWithResolver(both, dns.resolver()), target)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.EqualValues(t, 1, hits.Load())
}

// Issue 30: the allow-list was port-blind. An address:port entry opens that port only, at
// registration and at dial time; a name:port entry passes registration with that port only.
func TestAllowListPorts(t *testing.T) {
	srv, hits := ssrfTarget(t, nil)
	other, otherHits := ssrfTarget(t, nil)
	port, otherPort := ssrfPort(t, srv.URL), ssrfPort(t, other.URL)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	g := &Guard{
		AllowAddrPorts: []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(n))},
		AllowHosts:     []string{"localhost:" + port},
	}

	p := URLPolicy{AllowHTTP: true, Guard: g}
	require.NoError(t, p.Check("http://127.0.0.1:"+port+"/hooks"))
	require.NoError(t, p.Check("http://LocalHost.:"+port+"/hooks"))
	for _, u := range []string{"http://127.0.0.1:" + otherPort + "/", "http://127.0.0.1/", "https://127.0.0.1/",
		"http://127.0.0.1:6379/", "http://127.0.0.2:" + port + "/", "http://[::ffff:127.0.0.1]:6379/"} {
		var ue *URLError
		require.ErrorAs(t, p.Check(u), &ue, u)
		require.Equal(t, CodeHostBlocked, ue.Code, u)
	}
	for _, u := range []string{"http://localhost:" + otherPort + "/", "http://localhost/", "https://localhost/"} {
		var ue *URLError
		require.ErrorAs(t, p.Check(u), &ue, u)
		require.Equal(t, CodeHostBlocked, ue.Code, u)
	}
	require.ErrorIs(t, g.Check(netip.MustParseAddr("127.0.0.1")), ErrBlocked, "Check knows no port")

	c := NewClient(g)
	resp, err := ssrfPost(c, srv.URL+"/hooks")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	_, err = ssrfPost(c, other.URL+"/hooks")
	require.ErrorIs(t, err, ErrBlocked, "the same address on another port")
	require.EqualValues(t, 1, hits.Load())
	require.Zero(t, otherHits.Load())

	require.NoError(t, g.Control(context.Background(), "tcp4", "127.0.0.1:"+port, nil))
	require.ErrorIs(t, g.Control(context.Background(), "tcp4", "127.0.0.1:"+otherPort, nil), ErrBlocked)
	require.ErrorIs(t, g.Control(context.Background(), "tcp6", "[::ffff:127.0.0.1]:"+otherPort, nil), ErrBlocked)
	require.NoError(t, g.Control(context.Background(), "tcp6", "[::ffff:127.0.0.1]:"+port, nil), "mapped forms are unmapped")
}

// A connection that only the allow-list admits is marked, so that the dispatcher records no snippet
// of its answer; a public one is not.
func TestAllowListedConnectionMarked(t *testing.T) {
	srv, _ := ssrfTarget(t, nil)
	c, err := (&Guard{Allow: ssrfLoopback}).DialContext(context.Background(), "tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.True(t, AllowListed(c))
}
