package pgstore_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/storetest"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
)

// TestIdempotencyReplicas runs the exactly-once-across-replicas tests (storetest.RunReplicas) on a
// real PostgreSQL, in both modes: replicas with an IdempotencyStore, and replicas in transactional
// mode whose handlers write their orders in the request's transaction.
func TestIdempotencyReplicas(t *testing.T) {
	storetest.RunReplicas(t, storetest.ReplicaConfig{Modes: []storetest.ReplicaMode{
		{Name: "store", Setup: func(t *testing.T) storetest.ReplicaBackend {
			return idemReplicaBackend(t, func(pool *pgxpool.Pool, opts *pgstore.IdempotencyStoreOptions) *idempotency.Options {
				return &idempotency.Options{Store: must(pgstore.NewIdempotencyStore(pool, opts))}
			})
		}, Unreachable: func(t *testing.T) *idempotency.Options {
			return &idempotency.Options{Store: must(pgstore.NewIdempotencyStore(idemUnreachablePool(t), nil))}
		}},
		{Name: "transactional", Setup: func(t *testing.T) storetest.ReplicaBackend {
			return idemReplicaBackend(t, func(pool *pgxpool.Pool, opts *pgstore.IdempotencyStoreOptions) *idempotency.Options {
				return &idempotency.Options{Transactor: must(pgstore.NewTransactor(pool, opts))}
			})
		}, Unreachable: func(t *testing.T) *idempotency.Options {
			return &idempotency.Options{Transactor: must(pgstore.NewTransactor(idemUnreachablePool(t), nil))}
		}},
	}})
}

// idemReplicaBackend migrates a fresh schema with the idempotency table and the handler's own orders
// table; options builds one replica's middleware options on it.
func idemReplicaBackend(t *testing.T, options func(*pgxpool.Pool, *pgstore.IdempotencyStoreOptions) *idempotency.Options) storetest.ReplicaBackend {
	pool, schema := pgtest.Pool(t)
	ctx := context.Background()
	opts := &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}
	require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	_, err := pool.Exec(ctx, `CREATE TABLE orders (key text NOT NULL, run text NOT NULL)`)
	require.NoError(t, err)
	return storetest.ReplicaBackend{
		Options:     func() *idempotency.Options { return options(pool, opts) },
		Store:       must(pgstore.NewIdempotencyStore(pool, opts)),
		WriteOrder:  idemOrderWrite,
		OrderCounts: func(t *testing.T) map[string]int { return idemOrderCounts(t, pool) },
	}
}

// idemUnreachablePool points at a closed port, so the shared server is left alone.
func idemUnreachablePool(t *testing.T) *pgxpool.Pool {
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// idemOrderWrite writes the order in the request's transaction (transactional mode).
func idemOrderWrite(r *http.Request, key, run string) error {
	tx, ok := pgstore.TxFromContext(r.Context())
	if !ok {
		return errors.New("no transaction in the request context")
	}
	_, err := tx.Exec(r.Context(), `INSERT INTO orders (key, run) VALUES ($1, $2)`, key, run)
	return err
}

func idemOrderCounts(t *testing.T, pool *pgxpool.Pool) map[string]int {
	rows, err := pool.Query(context.Background(), `SELECT key, count(*) FROM orders GROUP BY key`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		require.NoError(t, rows.Scan(&k, &n))
		out[k] = n
	}
	require.NoError(t, rows.Err())
	return out
}
