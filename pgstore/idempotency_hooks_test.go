package pgstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/internal/testkit/idemobserve"
)

// The Hooks of a middleware on PostgreSQL see its store calls as the postgresql backend's.
func TestIdempotencyHooksNamePostgreSQL(t *testing.T) {
	store, _, _ := newIdemStore(t)
	calls, err := idemobserve.StoreCalls(store)
	require.NoError(t, err)
	require.Equal(t, []string{"claim postgresql ok", "complete postgresql ok", "claim postgresql ok"}, calls)
}
