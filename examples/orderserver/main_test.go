package main

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/seal"
	"github.com/svcplatform/conventions/webhook/producer"
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
	g, err := webhookGuard(" ", logger)
	require.NoError(t, err)
	require.Nil(t, g, "unset: public addresses only")

	g, err = webhookGuard("127.0.0.0/8, ::1/128,localhost,10.1.2.3,fd00::/8", logger)
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("10.1.2.3/32"), netip.MustParsePrefix("fd00::/8")}, g.Allow)
	require.Equal(t, []string{"localhost"}, g.AllowHosts)
	require.NoError(t, g.Check(netip.MustParseAddr("127.0.0.1")))
	require.NoError(t, g.Check(netip.MustParseAddr("10.1.2.3")))
	require.ErrorIs(t, g.Check(netip.MustParseAddr("10.1.2.4")), producer.ErrBlockedAddress)
	require.ErrorIs(t, g.Check(netip.MustParseAddr("169.254.169.254")), producer.ErrBlockedAddress)

	for _, tc := range []struct{ list, bad string }{
		{"127.0.0.0/8,127.0.0.0/33", `"127.0.0.0/33"`},
		{"10.1.2.3/16", `"10.1.2.3/16" has host bits set: write 10.1.0.0/16 for the network, or 10.1.2.3/32`},
		{"localhost,local host", `"local host"`},
		{"https://localhost", `"https://localhost"`},
		{"fe80::1%eth0", `"fe80::1%eth0"`},
		{"a..b", `"a..b"`},
	} {
		_, err := webhookGuard(tc.list, logger)
		require.ErrorContains(t, err, EnvWebhookAllow+": entry "+tc.bad, tc.list)
	}
}
