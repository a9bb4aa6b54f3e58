package redisstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/internal/testkit/idemobserve"
)

// The Hooks of a middleware on Redis see its store calls as the redis backend's.
func TestIdempotencyHooksNameRedis(t *testing.T) {
	store, _ := newIdemStore(t)
	calls, err := idemobserve.StoreCalls(store)
	require.NoError(t, err)
	require.Equal(t, []string{"claim redis ok", "complete redis ok", "claim redis ok"}, calls)
}
