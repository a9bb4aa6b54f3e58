package pgstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

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
