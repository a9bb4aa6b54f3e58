package main

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/seal"
	"github.com/svcplatform/conventions/ssrf"
)

func TestSealerFromEnvironment(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	s, err := sealer("", logger)
	require.NoError(t, err)
	require.Nil(t, s, "no ring: nothing sealed, secrets stored without their body")

	k1, err := seal.GenerateKey(1)
	require.NoError(t, err)
	k2, err := seal.GenerateKey(2)
	require.NoError(t, err)
	s, err = sealer(k2.Reveal()+", "+k1.Reveal(), logger)
	require.NoError(t, err)
	old, err := seal.NewRing(k1)
	require.NoError(t, err)
	blob := old.Seal(nil, []byte("body"), []byte("aad"))
	got, err := s.Open(nil, blob, []byte("aad"))
	require.NoError(t, err, "a rotated ring opens what the old key sealed")
	require.Equal(t, "body", string(got))

	secret := strings.SplitN(k1.Reveal(), ":", 2)[1]
	_, err = sealer(k2.Reveal()+",9:"+secret[:20], logger)
	require.ErrorContains(t, err, EnvSealKeys+": key 2")
	require.NotContains(t, err.Error(), secret[:20], "the error never echoes key material")
}

func TestWebhookGuardFromEnvironment(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	sbx, live, err := webhookGuards(" ; ", logger)
	require.NoError(t, err)
	require.Nil(t, sbx, "unset: public addresses only")
	require.Nil(t, live)

	// The README's list, without an environment, is the sandbox's: production gets nothing of it.
	sbx, live, err = webhookGuards("127.0.0.0/8, ::1/128,localhost,10.1.2.3,fd00::/8", logger)
	require.NoError(t, err)
	require.Nil(t, live, "live never reaches what only the sandbox was allowed")
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("10.1.2.3/32"), netip.MustParsePrefix("fd00::/8")}, sbx.Allow)
	require.Equal(t, []string{"localhost"}, sbx.AllowHosts)
	require.NoError(t, sbx.Check(netip.MustParseAddr("127.0.0.1")))
	require.NoError(t, sbx.Check(netip.MustParseAddr("10.1.2.3")))
	require.ErrorIs(t, sbx.Check(netip.MustParseAddr("10.1.2.4")), ssrf.ErrBlocked)
	require.ErrorIs(t, sbx.Check(netip.MustParseAddr("169.254.169.254")), ssrf.ErrBlocked)

	// Per environment, with ports.
	sbx, live, err = webhookGuards("sandbox=127.0.0.1:8443,localhost:3000 ; live = hooks.corp:443,[fd00::7]:443,10.9.0.0/16", logger)
	require.NoError(t, err)
	require.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:8443")}, sbx.AllowAddrPorts)
	require.Equal(t, []string{"localhost:3000"}, sbx.AllowHosts)
	require.Empty(t, sbx.Allow)
	require.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("[fd00::7]:443")}, live.AllowAddrPorts)
	require.Equal(t, []string{"hooks.corp:443"}, live.AllowHosts)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}, live.Allow)
	sbxPolicy := ssrf.URLPolicy{AllowHTTP: true, Guard: sbx}
	require.NoError(t, sbxPolicy.Check("http://127.0.0.1:8443/hooks"))
	require.NoError(t, sbxPolicy.Check("http://localhost:3000/hooks"))
	require.Error(t, sbxPolicy.Check("http://127.0.0.1:6379/"), "a port not on the entry")
	require.Error(t, sbxPolicy.Check("http://localhost:6379/"), "a port not on the entry")
	livePolicy := ssrf.URLPolicy{Guard: live}
	require.NoError(t, livePolicy.Check("https://hooks.corp/x"))
	require.Error(t, livePolicy.Check("https://127.0.0.1:8443/x"), "the sandbox's entry is not production's")

	for _, tc := range []struct{ list, bad string }{
		{"127.0.0.0/8,127.0.0.0/33", `sandbox entry 2 "127.0.0.0/33"`},
		{"live=10.1.2.3/16", `live entry 1 "10.1.2.3/16" has host bits set: write 10.1.0.0/16 for the network, or 10.1.2.3/32`},
		{"sandbox=localhost,local host", `sandbox entry 2 "local host"`},
		{"https://localhost", `sandbox entry 1 "https://localhost"`},
		{"fe80::1%eth0", `sandbox entry 1 "fe80::1%eth0"`},
		{"a..b", `sandbox entry 1 "a..b"`},
		{"sandbox=127.0.0.1:0", `sandbox entry 1 "127.0.0.1:0" has port 0`},
		{"sandbox=localhost:99999", `sandbox entry 1 "localhost:99999" has a port outside`},
		{"127.0.0.0/8:443", `sandbox entry 1 "127.0.0.0/8:443" is not a CIDR prefix`},
		{"prod=10.0.0.1", `group "prod=10.0.0.1": the environment must be sandbox or live`},
		{"127.0.0.1;sandbox=::1", "the sandbox environment is named twice"},
	} {
		_, _, err := webhookGuards(tc.list, logger)
		require.ErrorContains(t, err, EnvWebhookAllow+": "+tc.bad, tc.list)
	}
}

// A production rate limit the flags cannot express refuses to start, naming the flag, before any
// backend is opened.
func TestRateLimitFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"-live-rate", "0"}, {"-live-rate", "-5"}, {"-live-rate", "NaN"}, {"-live-rate", "+Inf"},
		{"-live-burst", "0"}, {"-live-burst", "-1"},
	} {
		var stderr strings.Builder
		err := run(args, &strings.Builder{}, &stderr)
		require.ErrorContains(t, err, args[0]+": want", "%v", args)
	}
}
