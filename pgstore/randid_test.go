package pgstore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewRandomID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newRandomID("evt_")
		require.True(t, strings.HasPrefix(id, "evt_") && len(id) == 4+26, "malformed id %q", id)
		require.Equal(t, strings.ToLower(id), id, "id %q is not lowercase", id)
		require.False(t, seen[id], "duplicate id %q", id)
		seen[id] = true
	}
}

func TestRandomUint63(t *testing.T) {
	seen := map[uint64]bool{}
	var or uint64
	for range 10000 {
		n := randomUint63()
		require.True(t, n != 0 && n < 1<<63, "randomUint63() = %d, out of [1, 2^63)", n)
		require.False(t, seen[n], "duplicate %d", n)
		seen[n] = true
		or |= n
	}
	require.Equal(t, uint64(1<<63-1), or, "bits never set over 10,000 draws: %x", ^or&(1<<63-1))
}
