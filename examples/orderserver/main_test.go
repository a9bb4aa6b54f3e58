package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
)

func TestSealerFromEnvironment(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	s, err := sealer("", logger)
	require.NoError(t, err)
	require.Nil(t, s, "no ring: nothing sealed, secrets stored without their body")

	k1, err := idempotency.GenerateSealKey(1)
	require.NoError(t, err)
	k2, err := idempotency.GenerateSealKey(2)
	require.NoError(t, err)
	s, err = sealer(k2.Reveal()+", "+k1.Reveal(), logger)
	require.NoError(t, err)
	old, err := idempotency.NewSealer(k1)
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
