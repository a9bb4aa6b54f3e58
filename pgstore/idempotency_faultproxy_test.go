package pgstore_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/storetest"
	"github.com/svcplatform/conventions/internal/faultproxy"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
)

// idemProxiedPool returns a pool that reaches the test database through a new fault proxy, with
// search_path set to schema; both are closed when the test ends.
func idemProxiedPool(t *testing.T, schema string) (*pgxpool.Pool, *faultproxy.Proxy) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	proxy := faultproxy.Start(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = proxy.HostPort()
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.ConnConfig.Fallbacks = nil
	cfg.MaxConns = 8
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close) // runs before the proxy's cleanup: the pool closes its connections first
	return pool, proxy
}

// TestIdempotencyOutage: PostgreSQL becomes unreachable between the claim and the completion (the
// proxy cuts every connection), shorter and longer than the lease, and stalls: the handler runs
// once, the response is stored when the server is back, and a stalled server costs a 503.
func TestIdempotencyOutage(t *testing.T) {
	storetest.RunOutage(t, func(t *testing.T) storetest.OutageBackend {
		_, _, schema := newIdemStore(t)
		pool, proxy := idemProxiedPool(t, schema)
		return storetest.OutageBackend{
			Store:   must(pgstore.NewIdempotencyStore(pool, &pgstore.IdempotencyOptions{Schema: schema, Table: "idem"})),
			Cut:     proxy.Cut,
			Stall:   proxy.Stall,
			Restore: func() { proxy.Resume(); proxy.Restore() },
		}
	})
}
