package pgserver_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/examples/orderserver/server/pgserver"
)

// twoReplicas builds two servers on one migrated PostgreSQL schema, as replicas behind a load
// balancer run, each from pgserver.Config (checked by check before the server is built), and issues
// sandbox credentials on the first. It returns the pool too, for a test that looks into the tables.
func twoReplicas(t *testing.T, check func(server.Config)) (pool *pgxpool.Pool, a, b *server.Server, creds apikey.Credentials) {
	t.Helper()
	ctx := context.Background()
	pool, _ = testenv.PostgresPool(t)
	require.NoError(t, pgserver.Migrate(ctx, pool))
	replica := func() *server.Server {
		cfg, err := pgserver.Config(pool, nil)
		require.NoError(t, err)
		check(cfg)
		s, err := server.New(cfg)
		require.NoError(t, err)
		return s
	}
	a, b = replica(), replica()
	creds, err := a.IssueCredentials(ctx, apikey.Sandbox)
	require.NoError(t, err)
	return pool, a, b, creds
}
