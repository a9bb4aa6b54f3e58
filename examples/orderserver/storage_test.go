package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/redisstore"
)

// On PostgreSQL the portal's links and sessions are in PostgreSQL, whether or not Redis keeps the
// idempotency records; with Redis alone (everything else in memory) the portal is in memory too.
func TestOpenBackendsPortal(t *testing.T) {
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	dsn := testenv.PostgresDSN(t)
	cfg, closeAll, err := openBackends(ctx, dsn, "", "", nil, logger)
	require.NoError(t, err)
	t.Cleanup(closeAll)
	require.IsType(t, &pgstore.PortalStore{}, cfg.Portal)

	redisURL, prefix := testenv.Redis(t)
	cfg, closeBoth, err := openBackends(ctx, dsn, redisURL, prefix, nil, logger)
	require.NoError(t, err)
	t.Cleanup(closeBoth)
	require.IsType(t, &redisstore.IdempotencyStore{}, cfg.Idempotency)
	require.IsType(t, &pgstore.PortalStore{}, cfg.Portal, "Redis moves the idempotency records, not the portal")

	cfg, closeRedis, err := openBackends(ctx, "", redisURL, prefix, nil, logger)
	require.NoError(t, err)
	t.Cleanup(closeRedis)
	require.Nil(t, cfg.Portal, "without PostgreSQL the portal is in memory, with the orders")
}
