package ssrf

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSSRFGuardCheck(t *testing.T) {
	cases := []struct {
		addr  string
		class string // "" allowed
	}{
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"2606:4700:4700::1111", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""}, // NAT64 of a public address: IPv6-only networks with DNS64
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"10.0.0.1", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"100.64.0.1", "cgnat"},
		{"100.100.100.200", "cgnat"}, // Alibaba Cloud metadata
		{"169.254.169.254", "link-local"},
		{"192.0.0.8", "reserved"},
		{"192.0.2.1", "documentation"},
		{"192.88.99.1", "reserved"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"198.51.100.7", "documentation"},
		{"203.0.113.7", "documentation"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.255", "broadcast"},
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"fec0::1", "site-local"},
		{"fc00::1", "private"},
		{"fd00:ec2::254", "private"}, // AWS metadata over IPv6
		{"ff02::1", "multicast"},
		{"2001:db8::1", "documentation"},
		{"3fff::1", "documentation"},
		{"2001:2::1", "benchmarking"},
		{"2001::1", "reserved"},              // Teredo
		{"2001:20::1", "reserved"},           // ORCHIDv2
		{"100::1", "reserved"},               // discard-only
		{"::ffff:127.0.0.1", "loopback"},     // IPv4-mapped
		{"::ffff:a9fe:a9fe", "link-local"},   // IPv4-mapped 169.254.169.254
		{"::ffff:10.1.2.3", "private"},       // IPv4-mapped
		{"::127.0.0.1", "reserved"},          // IPv4-compatible, deprecated
		{"::8.8.8.8", "reserved"},            // IPv4-compatible, whatever it carries
		{"64:ff9b::7f00:1", "loopback"},      // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", "link-local"}, // NAT64 of 169.254.169.254
		{"64:ff9b:1::1", "reserved"},         // local-use NAT64 unless listed in NAT64
		{"2002:7f00:1::1", "loopback"},       // 6to4 of 127.0.0.1
		{"2002:a9fe:a9fe::", "link-local"},   // 6to4 of 169.254.169.254
		{"2002:808:808::1", "6to4"},          // 6to4 is refused whatever it carries
	}
	var g Guard
	for _, c := range cases {
		t.Run(c.addr, func(t *testing.T) {
			err := g.Check(netip.MustParseAddr(c.addr))
			if c.class == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrBlocked)
			var be *BlockedError
			require.ErrorAs(t, err, &be)
			require.Equal(t, c.class, be.Class)
			require.Contains(t, err.Error(), c.class)
			require.NotContains(t, err.Error(), strings.Split(c.addr, "%")[0], "the address is for logs, not the message")
		})
	}
	t.Run("nil guard is the default", func(t *testing.T) {
		var nilGuard *Guard
		require.ErrorIs(t, nilGuard.Check(netip.MustParseAddr("127.0.0.1")), ErrBlocked)
		require.NoError(t, nilGuard.Check(netip.MustParseAddr("8.8.8.8")))
	})
	t.Run("invalid address", func(t *testing.T) {
		require.ErrorIs(t, g.Check(netip.Addr{}), ErrBlocked)
	})
}

func TestGuardAllowWinsOverBlockList(t *testing.T) {
	g := Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}
	for _, ok := range []string{"127.0.0.1", "127.9.9.9", "::ffff:127.0.0.1", "64:ff9b::7f00:1", "fd00::1", "8.8.8.8"} {
		require.NoError(t, g.Check(netip.MustParseAddr(ok)), ok)
	}
	for _, blocked := range []string{"::1", "10.0.0.1", "169.254.169.254", "fc00::1", "2002:7f00:1::"} {
		require.ErrorIs(t, g.Check(netip.MustParseAddr(blocked)), ErrBlocked, blocked)
	}
}

func TestGuardNAT64Prefixes(t *testing.T) {
	g := Guard{NAT64: []netip.Prefix{
		netip.MustParsePrefix("2600:1f00:64::/96"),
		netip.MustParsePrefix("2600:1f00:65::/64"),
		netip.MustParsePrefix("2600:1f00:66::/100"), // not an RFC 6052 length
	}}
	cases := map[string]string{
		"2600:1f00:64::a9fe:a9fe":       "link-local", // /96 carrying 169.254.169.254
		"2600:1f00:64::808:808":         "",
		"2600:1f00:65:0:a:0:1:0":        "private", // /64: bytes 9–12 carry 10.0.0.1, byte 8 is the u octet
		"2600:1f00:65:0:8:808:800:0":    "",        // 8.8.8.8
		"2600:1f00:66::808:808":         "nat64",
		"2600:1f00:67::1":               "", // outside every NAT64 prefix: plain global unicast
		"64:ff9b::c0a8:101":             "private",
		"2600:1f00:64::ffff:ffff":       "broadcast",
		"2600:1f00:65:0:ff:ffff:ff00:0": "broadcast",
	}
	for addr, class := range cases {
		err := g.Check(netip.MustParseAddr(addr))
		if class == "" {
			require.NoError(t, err, addr)
			continue
		}
		var be *BlockedError
		require.ErrorAs(t, err, &be, addr)
		require.Equal(t, class, be.Class, addr)
	}
}

func TestSSRFURLPolicyCheck(t *testing.T) {
	strict := URLPolicy{}
	sandbox := URLPolicy{AllowHTTP: true}
	loopback := URLPolicy{AllowHTTP: true, Guard: &Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
	named := URLPolicy{AllowHTTP: true, Guard: &Guard{AllowHosts: []string{"localhost", "Receiver"}}}
	cases := []struct {
		name   string
		policy URLPolicy
		url    string
		code   string // "" accepted
	}{
		{"https", strict, "https://hooks.example.com/orders?token=abc", ""},
		{"https port", strict, "https://hooks.example.com:8443/orders", ""},
		{"upper case host", strict, "https://Hooks.Example.COM/x", ""},
		{"trailing dot name", strict, "https://hooks.example.com./x", ""},
		{"public IPv4", strict, "https://8.8.8.8/x", ""},
		{"public IPv6", strict, "https://[2606:4700:4700::1111]/x", ""},
		{"punycode", strict, "https://xn--bcher-kva.example/x", ""},
		{"http when allowed", sandbox, "http://hooks.example.com/x", ""},
		{"loopback when allowed", loopback, "http://127.0.0.1:8080/x", ""},
		{"decimal loopback when allowed is still not canonical", loopback, "http://2130706433/x", CodeHostNotCanonical},
		{"allow-listed name", named, "http://localhost:8080/x", ""},
		{"allow-listed name case and dot", named, "http://LOCALHOST.:8080/x", ""},
		{"allow-listed single label", named, "http://receiver:8080/x", ""},

		{"too long", strict, "https://hooks.example.com/" + strings.Repeat("a", 2048), CodeURLTooLong},
		{"custom limit", URLPolicy{MaxLength: 30}, "https://hooks.example.com/abcdef", CodeURLTooLong},
		{"empty", strict, "", CodeURLNotAbsolute},
		{"relative", strict, "/hooks", CodeURLNotAbsolute},
		{"no scheme", strict, "//hooks.example.com/x", CodeURLNotAbsolute},
		{"opaque", strict, "https:hooks.example.com", CodeURLNotAbsolute},
		{"one slash", strict, "https:/hooks.example.com", CodeURLNotAbsolute},
		{"control character", strict, "https://hooks.example.com/\x00", CodeURLMalformed},
		{"bad escape", strict, "https://hooks.example.com/%zz", CodeURLMalformed},
		{"http", strict, "http://hooks.example.com/x", CodeSchemeNotAllowed},
		{"ftp", sandbox, "ftp://hooks.example.com/x", CodeSchemeNotAllowed},
		{"gopher", strict, "gopher://hooks.example.com/x", CodeSchemeNotAllowed},
		{"file", strict, "file:///etc/passwd", CodeSchemeNotAllowed},
		{"userinfo", strict, "https://user:pass@hooks.example.com/x", CodeURLHasUserinfo},
		{"user only", strict, "https://user@hooks.example.com/x", CodeURLHasUserinfo},
		{"fragment", strict, "https://hooks.example.com/x#frag", CodeURLHasFragment},
		{"empty fragment", strict, "https://hooks.example.com/x#", CodeURLHasFragment},
		{"no host", strict, "https:///x", CodeHostMissing},
		{"port only", strict, "https://:443/x", CodeHostMissing},
		{"empty port", strict, "https://hooks.example.com:/x", CodePortInvalid},
		{"port zero", strict, "https://hooks.example.com:0/x", CodePortInvalid},
		{"port too big", strict, "https://hooks.example.com:65536/x", CodePortInvalid},

		// The list.
		{"metadata IP", strict, "https://169.254.169.254/latest/meta-data/", CodeHostBlocked},
		{"localhost redis", sandbox, "http://localhost:6379/", CodeHostBlocked},
		{"private 10/8", strict, "https://10.0.0.1/x", CodeHostBlocked},
		{"GCP metadata name", sandbox, "http://metadata.google.internal/computeMetadata/v1/", CodeHostBlocked},
		{"decimal", strict, "https://2130706433/x", CodeHostBlocked},
		{"hex short", strict, "https://0x7f.1/x", CodeHostBlocked},
		{"ULA", strict, "https://[fd00::1]/x", CodeHostBlocked},

		// Other spellings of blocked addresses.
		{"loopback", strict, "https://127.0.0.1/x", CodeHostBlocked},
		{"loopback trailing dot", strict, "https://127.0.0.1./x", CodeHostBlocked},
		{"hex", strict, "https://0x7f000001/x", CodeHostBlocked},
		{"hex upper", strict, "https://0X7F000001/x", CodeHostBlocked},
		{"octal", strict, "https://0177.0.0.1/x", CodeHostBlocked},
		{"short", strict, "https://127.1/x", CodeHostBlocked},
		{"three parts", strict, "https://127.0.1/x", CodeHostBlocked},
		{"decimal metadata", strict, "https://2852039166/x", CodeHostBlocked},
		{"octal metadata", strict, "https://0251.0376.0251.0376/x", CodeHostBlocked},
		{"zero", strict, "https://0/x", CodeHostBlocked},
		{"percent-encoded name", strict, "https://%6c%6fcalhost/x", CodeURLMalformed},
		{"IPv6 loopback", strict, "https://[::1]/x", CodeHostBlocked},
		{"IPv6 unspecified", strict, "https://[::]/x", CodeHostBlocked},
		{"IPv4-mapped", strict, "https://[::ffff:127.0.0.1]/x", CodeHostBlocked},
		{"IPv4-mapped hex", strict, "https://[::ffff:a9fe:a9fe]/x", CodeHostBlocked},
		{"NAT64 loopback", strict, "https://[64:ff9b::7f00:1]/x", CodeHostBlocked},
		{"6to4 loopback", strict, "https://[2002:7f00:1::1]/x", CodeHostBlocked},
		{"link-local IPv6", strict, "https://[fe80::1]/x", CodeHostBlocked},
		{"CGNAT", strict, "https://100.64.1.1/x", CodeHostBlocked},
		{"documentation", strict, "https://192.0.2.1/x", CodeHostBlocked},
		{"localhost", strict, "https://localhost/x", CodeHostBlocked},
		{"localhost trailing dot", strict, "https://localhost./x", CodeHostBlocked},
		{"localhost upper", strict, "https://LOCALHOST/x", CodeHostBlocked},
		{"sub.localhost", strict, "https://api.localhost/x", CodeHostBlocked},
		{"internal", strict, "https://vault.internal/x", CodeHostBlocked},
		{"AWS internal", strict, "https://instance-data.ec2.internal/x", CodeHostBlocked},
		{"mDNS", strict, "https://printer.local/x", CodeHostBlocked},
		{"kubernetes", strict, "https://kubernetes.default.svc.cluster.local/x", CodeHostBlocked},
		{"home.arpa", strict, "https://nas.home.arpa/x", CodeHostBlocked},
		{"single label", strict, "https://redis/x", CodeHostBlocked},
		{"single label metadata", strict, "https://metadata/x", CodeHostBlocked},

		// Hosts that are not well-formed.
		{"zone", strict, "https://[fe80::1%25eth0]/x", CodeHostInvalid},
		{"zone on public", strict, "https://[2606:4700::1%25eth0]/x", CodeHostInvalid},
		{"IPv4 in brackets", strict, "https://[8.8.8.8]/x", CodeURLMalformed},
		{"five parts", strict, "https://1.2.3.4.5/x", CodeHostInvalid},
		{"part too big", strict, "https://256.1.1.1/x", CodeHostInvalid},
		{"numeric last label", strict, "https://hooks.example.123/x", CodeHostInvalid},
		{"bad octal", strict, "https://08.0.0.1/x", CodeHostInvalid},
		{"empty label", strict, "https://hooks..example.com/x", CodeHostInvalid},
		{"two trailing dots", strict, "https://hooks.example.com../x", CodeHostInvalid},
		{"non-ASCII", strict, "https://bücher.example/x", CodeHostInvalid},
		{"fullwidth digits", strict, "https://１２７.０.０.１/x", CodeHostInvalid},
		{"long label", strict, "https://" + strings.Repeat("a", 64) + ".example.com/x", CodeHostInvalid},

		// Public addresses in legacy forms.
		{"decimal public", strict, "https://134744072/x", CodeHostNotCanonical},
		{"octal public", strict, "https://010.8.8.8/x", CodeHostNotCanonical},
		{"short public", strict, "https://8.526344/x", CodeHostNotCanonical},
		{"public trailing dot", strict, "https://8.8.8.8./x", CodeHostNotCanonical},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.policy.Check(c.url)
			if c.code == "" {
				require.NoError(t, err)
				return
			}
			var ue *URLError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, c.code, ue.Code, ue.Detail)
			require.NotEmpty(t, ue.Detail)
			require.True(t, strings.HasPrefix(err.Error(), "ssrf: URL "), err.Error())
			if c.code == CodeHostBlocked {
				require.ErrorIs(t, err, ErrBlocked)
			} else {
				require.NotErrorIs(t, err, ErrBlocked)
			}
		})
	}
}

func TestURLErrorNeverEchoesSecrets(t *testing.T) {
	const secret = "hunter2-s3cret"
	for _, raw := range []string{
		"https://u:" + secret + "@10.0.0.1/x",
		"https://u:" + secret + "@hooks.example.com/x#f",
		"ftp://u:" + secret + "@hooks.example.com/x",
		"https://u:" + secret + "@[::1/x",
		"https://u:" + secret + "@hooks.example.com/\x7f",
		"https://" + secret + "@hooks.example.com/x",
		"https://hooks.example.com/x?token=" + secret + "#frag",
		"https://hooks.example.com/" + strings.Repeat("a", 3000) + "?token=" + secret,
		"https://localhost/x?token=" + secret,
	} {
		err := URLPolicy{}.Check(raw)
		require.Error(t, err, raw)
		require.NotContains(t, err.Error(), secret)
		require.NotContains(t, err.Error(), "token=")
	}
}

func TestSSRFParseIPv4Legacy(t *testing.T) {
	cases := map[string]string{ // "" means not an address
		"127.0.0.1":               "127.0.0.1",
		"2130706433":              "127.0.0.1",
		"0x7f000001":              "127.0.0.1",
		"0x7f.1":                  "127.0.0.1",
		"0177.0.0.1":              "127.0.0.1",
		"0177.1":                  "127.0.0.1",
		"127.1":                   "127.0.0.1",
		"127.0.1":                 "127.0.0.1",
		"0x7f.0x0.0x0.01":         "127.0.0.1",
		"0":                       "0.0.0.0",
		"0x":                      "0.0.0.0",
		"4294967295":              "255.255.255.255",
		"1.16777215":              "1.255.255.255",
		"1.2.65535":               "1.2.255.255",
		"4294967296":              "",
		"1.16777216":              "",
		"1.2.65536":               "",
		"256.0.0.1":               "",
		"1.2.3.256":               "",
		"1.2.3.4.5":               "",
		"08":                      "",
		"0x1g":                    "",
		"1..2":                    "",
		"":                        "",
		"-1":                      "",
		"+1":                      "",
		"1.2.3.":                  "",
		"99999999999999999999999": "",
	}
	for in, want := range cases {
		got, ok := parseIPv4Legacy(in)
		if want == "" {
			require.False(t, ok, "%q parsed as %s", in, got)
			continue
		}
		require.True(t, ok, in)
		require.Equal(t, want, got.String(), in)
	}
}

// ssrfTarget is an httptest server on loopback that counts the requests it receives.
func ssrfTarget(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func ssrfPost(c *http.Client, target string) (*http.Response, error) {
	resp, err := c.Post(target, "application/json", strings.NewReader(`{}`))
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	return resp, err
}

var ssrfLoopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

func TestGuardDialRefusesLoopbackServer(t *testing.T) {
	srv, hits := ssrfTarget(t, nil)
	_, err := ssrfPost(NewClient(nil), srv.URL+"/hooks?token=abc")
	require.ErrorIs(t, err, ErrBlocked)
	var be *BlockedError
	require.ErrorAs(t, err, &be)
	require.Equal(t, "loopback", be.Class)
	require.Equal(t, "127.0.0.1", be.Addr.String())
	require.NotContains(t, be.Error(), "token")
	require.NotContains(t, be.Error(), "127.0.0.1")
	require.Zero(t, hits.Load(), "the handler must never run")
}

func TestGuardDialReachesAllowedPrefix(t *testing.T) {
	srv, hits := ssrfTarget(t, nil)
	resp, err := ssrfPost(NewClient(&Guard{Allow: ssrfLoopback}), srv.URL+"/hooks")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.EqualValues(t, 1, hits.Load())
}

// A name in AllowHosts opens no address (issue 30: it used to skip the dial-time check, so a listed
// name led wherever it resolved): alone it is refused at dial time; with its addresses allowed, it
// goes through.
func TestGuardDialAllowHosts(t *testing.T) {
	srv, hits := ssrfTarget(t, nil)
	port := ssrfPort(t, srv.URL)
	_, err := ssrfPost(NewClient(&Guard{AllowHosts: []string{"LocalHost."}}), "http://localhost:"+port+"/hooks")
	require.ErrorIs(t, err, ErrBlocked)
	require.Zero(t, hits.Load())

	c := NewClient(&Guard{AllowHosts: []string{"LocalHost."}, Allow: ssrfLoopback})
	resp, err := ssrfPost(c, "http://localhost:"+port+"/hooks")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.EqualValues(t, 1, hits.Load())
}

// A name that resolves to loopback is refused at dial time, though no URL check ran.
func TestSSRFGuardRefusesNameResolvingToLoopback(t *testing.T) {
	srv, hits := ssrfTarget(t, nil)
	port := ssrfPort(t, srv.URL)
	_, err := ssrfPost(NewClient(nil), "http://localhost:"+port+"/hooks")
	require.ErrorIs(t, err, ErrBlocked)
	require.Zero(t, hits.Load())
}

// DNS rebinding: the name resolves to a public address when checked and to loopback when dialled.
// The guard judges the address the dial connects to, so it refuses.
func TestSSRFGuardDNSRebinding(t *testing.T) {
	srv, hits := ssrfTarget(t, nil)
	port := ssrfPort(t, srv.URL)
	target := "http://hooks.rebind.test:" + port + "/hooks"
	require.NoError(t, URLPolicy{AllowHTTP: true}.Check(target), "registration cannot see where the name leads")

	dns := &ssrfFakeDNS{answers: []netip.Addr{netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("127.0.0.1")}}
	r := dns.resolver()
	first, err := r.LookupNetIP(context.Background(), "ip4", "hooks.rebind.test")
	require.NoError(t, err)
	require.Equal(t, []netip.Addr{netip.MustParseAddr("8.8.8.8")}, first, "a check that resolved the name would pass it")

	_, err = ssrfPost(ssrfClientWithResolver(nil, r), target)
	require.ErrorIs(t, err, ErrBlocked)
	require.Zero(t, hits.Load())

	// The same resolver with loopback allowed reaches the server: the refusal above was the guard's,
	// not a resolution failure.
	resp, err := ssrfPost(ssrfClientWithResolver(&Guard{Allow: ssrfLoopback}, r), target)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.EqualValues(t, 1, hits.Load())
	require.GreaterOrEqual(t, dns.queries(), 3)
}

func TestGuardDialRefusesIPv4MappedIPv6(t *testing.T) {
	srv, hits := ssrfTarget(t, nil)
	port := ssrfPort(t, srv.URL)
	var g Guard
	_, err := g.DialContext(context.Background(), "tcp", "[::ffff:127.0.0.1]:"+port)
	require.ErrorIs(t, err, ErrBlocked)
	_, err = ssrfPost(NewClient(nil), "http://[::ffff:127.0.0.1]:"+port+"/hooks")
	require.ErrorIs(t, err, ErrBlocked)
	require.Zero(t, hits.Load())
}

func TestGuardDialRefusesOtherNetworks(t *testing.T) {
	g := Guard{Allow: ssrfLoopback, AllowHosts: []string{"localhost"}}
	for _, network := range []string{"unix", "udp", "ip4:icmp", ""} {
		_, err := g.DialContext(context.Background(), network, "localhost:53")
		require.ErrorIs(t, err, ErrBlocked, network)
	}
}

func TestGuardControlRefusesUnparseableAddress(t *testing.T) {
	var g Guard
	require.ErrorIs(t, g.Control(context.Background(), "unix", "/var/run/docker.sock", nil), ErrBlocked)
	require.ErrorIs(t, g.Control(context.Background(), "tcp6", "[fe80::1%eth0]:80", nil), ErrBlocked)
	require.NoError(t, g.Control(context.Background(), "tcp4", "8.8.8.8:443", nil))
}

func TestDeliveryClientDoesNotFollowRedirects(t *testing.T) {
	second, secondHits := ssrfTarget(t, nil)
	first, firstHits := ssrfTarget(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, second.URL+"/elsewhere", http.StatusFound)
	})
	resp, err := ssrfPost(NewClient(&Guard{Allow: ssrfLoopback}), first.URL+"/hooks")
	require.NoError(t, err)
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.Equal(t, second.URL+"/elsewhere", resp.Header.Get("Location"))
	require.EqualValues(t, 1, firstHits.Load())
	require.Zero(t, secondHits.Load())
}

// An HTTP_PROXY from the environment would take deliveries past the guard: the guard would see the
// proxy's address, and the proxy would connect anywhere.
func TestDeliveryClientIgnoresProxyEnvironment(t *testing.T) {
	proxy, proxyHits := ssrfTarget(t, nil)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")

	tr := NewTransport(&Guard{Allow: ssrfLoopback}) // the proxy itself would pass
	require.Nil(t, tr.Proxy)
	_, err := ssrfPost(&http.Client{Transport: tr}, "http://203.0.113.5/hooks")
	require.ErrorIs(t, err, ErrBlocked)
	var be *BlockedError
	require.ErrorAs(t, err, &be)
	require.Equal(t, "documentation", be.Class)
	require.Zero(t, proxyHits.Load())
}

func TestDeliveryClientCopiesTheGuard(t *testing.T) {
	srv, hits := ssrfTarget(t, nil)
	g := &Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	c := NewClient(g)
	g.Allow[0] = netip.MustParsePrefix("10.0.0.0/8") // later changes do not reach the transport
	g.Allow = nil
	resp, err := ssrfPost(c, srv.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.EqualValues(t, 1, hits.Load())
}

func ssrfPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u.Port()
}

// ssrfClientWithResolver is NewClient with a resolver of the test's choosing.
func ssrfClientWithResolver(g *Guard, r *net.Resolver) *http.Client {
	c := NewClient(g)
	g = g.clone()
	c.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return g.dial(ctx, network, addr, r)
	}
	return c
}

// ssrfFakeDNS is a DNS server in memory: it answers A queries for any name with answers in turn (the
// last repeats) and AAAA queries with no records.
type ssrfFakeDNS struct {
	mu      sync.Mutex
	answers []netip.Addr
	n       int
}

func (f *ssrfFakeDNS) queries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *ssrfFakeDNS) next() netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.answers[min(f.n, len(f.answers)-1)]
	f.n++
	return a
}

func (f *ssrfFakeDNS) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe() // a stream: the resolver frames messages with a length, as over TCP
		go f.serve(server)
		return client, nil
	}}
}

func (f *ssrfFakeDNS) serve(c net.Conn) {
	defer c.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, q); err != nil || len(q) < 12 {
			return
		}
		i := 12
		for i < len(q) && q[i] != 0 {
			i += int(q[i]) + 1
		}
		if i+5 > len(q) {
			return
		}
		qtype := binary.BigEndian.Uint16(q[i+1:])
		resp := append([]byte{q[0], q[1], 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0}, q[12:i+5]...)
		if qtype == 1 { // A
			a := f.next().As4()
			resp[7] = 1
			resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4)
			resp = append(resp, a[:]...)
		}
		out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

// FuzzURLPolicyCheck: Check never panics, and never accepts a URL whose host is, in any spelling
// inet_aton or netip reads, an address the guard blocks.
func FuzzURLPolicyCheck(f *testing.F) {
	for _, s := range []string{
		"https://hooks.example.com/x?y=z", "http://127.0.0.1:8080/", "https://2130706433/", "https://0x7f.1/",
		"https://0177.0.0.1/", "https://127.1/", "https://[::ffff:127.0.0.1]/", "https://[fe80::1%25eth0]/",
		"https://metadata.google.internal/", "https://localhost./", "https://u:p@h.example/", "https://h.example/#f",
		"https://[64:ff9b::7f00:1]/", "https://8.8.8.8./", "https://%31%32%37.0.0.1/", "https:x", "",
	} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, raw string, allowHTTP bool) {
		p := URLPolicy{AllowHTTP: allowHTTP}
		err := p.Check(raw)
		if err != nil {
			var ue *URLError
			if !errors.As(err, &ue) || ue.Code == "" || ue.Detail == "" {
				t.Fatalf("Check(%q) = %v, want a *URLError with a code and detail", raw, err)
			}
			return
		}
		u, perr := url.Parse(raw)
		if perr != nil {
			t.Fatalf("Check accepted unparseable %q", raw)
		}
		if u.Scheme != "https" && (!allowHTTP || u.Scheme != "http") {
			t.Fatalf("Check accepted scheme %q", u.Scheme)
		}
		if u.User != nil || strings.Contains(raw, "#") || u.Hostname() == "" {
			t.Fatalf("Check accepted %q", raw)
		}
		host := strings.TrimSuffix(u.Hostname(), ".")
		if a, err := netip.ParseAddr(host); err == nil && p.Guard.Check(a) != nil {
			t.Fatalf("Check accepted %q, host %s is blocked", raw, a)
		}
		if a, ok := parseIPv4Legacy(strings.ToLower(host)); ok && p.Guard.Check(a) != nil {
			t.Fatalf("Check accepted %q, host %s is blocked", raw, a)
		}
		if strings.EqualFold(host, "localhost") {
			t.Fatalf("Check accepted %q", raw)
		}
	})
}

func BenchmarkGuardCheck(b *testing.B) {
	var g Guard
	addrs := []netip.Addr{netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("2606:4700::1111"),
		netip.MustParseAddr("::ffff:10.0.0.1")}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = g.Check(addrs[i%len(addrs)])
	}
}

func BenchmarkURLPolicyCheck(b *testing.B) {
	var p URLPolicy
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Check("https://hooks.example.com/orders?token=abc"); err != nil {
			b.Fatal(err)
		}
	}
}
