package pgstore_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/storetest"
	"github.com/svcplatform/conventions/internal/testkit/faultproxy"
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
			Store:   must(pgstore.NewIdempotencyStore(pool, &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"})),
			Cut:     proxy.Cut,
			Stall:   proxy.Stall,
			Restore: func() { proxy.Resume(); proxy.Restore() },
		}
	})
}

// TestTransactorStoreCut: in transactional mode a cut connection is a store failure, not the
// handler's: whether the handler's own statement meets the cut or the commit does, the answer is 503
// with Retry-After, nothing is committed, and once the server is back the retry runs once and is then
// replayed. (A handler's own SQL failure is the opaque 500: TestTransactorRollbackLeavesNothing.)
func TestTransactorStoreCut(t *testing.T) {
	for _, when := range []string{"handler statement", "commit"} {
		t.Run(when, func(t *testing.T) {
			e := newIdemTxEnv(t)
			pool, proxy := idemProxiedPool(t, e.opts.Schema)
			m := must(idempotency.New(&idempotency.Options{Transactor: must(pgstore.NewTransactor(pool, e.opts)), Now: e.clock.Now}))
			var cutting atomic.Bool
			cutting.Store(true)
			var backend int32
			h := m.Handler(e.orderHandler(func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) bool {
				if !cutting.Load() {
					return true
				}
				require.NoError(t, tx.QueryRow(r.Context(), `SELECT pg_backend_pid()`).Scan(&backend))
				proxy.Cut()
				if when == "handler statement" {
					_, err := tx.Exec(r.Context(), `INSERT INTO orders (key, run) VALUES ('second', 'x')`)
					var pe *pgconn.PgError
					require.Error(t, err)
					require.False(t, errors.As(err, &pe), "a cut is not a server's answer: %v", err)
					http.Error(w, "orders failed", http.StatusInternalServerError)
					return false
				}
				return true
			}))
			rec := e.do(h, "k")
			requireProblem(t, rec, http.StatusServiceUnavailable, apierror.CodeUnavailable)
			require.NotEmpty(t, rec.Header().Get("Retry-After"))

			// The server learns of the cut on its own time; until then the cut transaction still
			// holds the key's locks, and a retry gets 409. Wait for its end, as a later retry would.
			var ended bool
			require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT pg_terminate_backend($1, 10000)`, backend).Scan(&ended))
			proxy.Restore()
			cutting.Store(false)
			require.Zero(t, e.orders("k"))
			_, err := e.record("k")
			require.ErrorIs(t, err, driver.ErrNotFound)
			rec = e.do(h, "k")
			require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
			rec = e.do(h, "k")
			require.Equal(t, "true", rec.Header().Get(idempotency.HeaderReplayed))
			require.EqualValues(t, 2, e.runs.Load())
			require.Equal(t, 1, e.orders("k"))
		})
	}
}
