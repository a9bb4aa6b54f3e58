package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/pgstore"
)

// The Transactor's pipelined transaction keeps PostgreSQL's semantics while it defers BEGIN,
// savepoints and the completion: what a handler sees and what commits are as if every statement had
// gone alone.
func TestTransactorPipelinedTransaction(t *testing.T) {
	_, pool, schema := newIdemStore(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE `+schema+`.pipe (n int PRIMARY KEY)`)
	require.NoError(t, err)
	tr := must(pgstore.NewTransactor(pool, &pgstore.IdempotencyOptions{Schema: schema, Table: "idem"}))
	count := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.pipe`).Scan(&n))
		return n
	}
	run := func(fn func(ctx context.Context, tx pgx.Tx) error) error {
		return tr.InTx(ctx, func(ctx context.Context, _ idempotency.Store) error {
			tx, ok := pgstore.TxFromContext(ctx)
			require.True(t, ok)
			return fn(ctx, tx)
		})
	}
	ins := `INSERT INTO ` + schema + `.pipe VALUES ($1)`

	t.Run("nothing sent, nothing to do", func(t *testing.T) {
		require.NoError(t, run(func(context.Context, pgx.Tx) error { return nil }))
		require.Error(t, run(func(context.Context, pgx.Tx) error { return errors.New("handler failed") }))
	})
	t.Run("savepoints", func(t *testing.T) {
		require.NoError(t, run(func(ctx context.Context, tx pgx.Tx) error {
			// A savepoint rolled back before anything was sent in it never reaches the server.
			sp, err := tx.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, sp.Rollback(ctx))
			require.ErrorIs(t, sp.Rollback(ctx), pgx.ErrTxClosed)

			// A failed statement in a savepoint, rolled back, leaves the transaction usable.
			sp, err = tx.Begin(ctx)
			require.NoError(t, err)
			_, err = sp.Exec(ctx, ins, 1)
			require.NoError(t, err)
			nested, err := sp.Begin(ctx)
			require.NoError(t, err)
			_, err = nested.Exec(ctx, `SELECT 1/0`)
			var pe *pgconn.PgError
			require.ErrorAs(t, err, &pe)
			require.NoError(t, nested.Rollback(ctx))
			require.NoError(t, sp.Commit(ctx))
			var n int
			require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.pipe`).Scan(&n))
			require.Equal(t, 1, n, "the savepoint's insert is there, the failed statement's effects are not")

			// A savepoint rolled back after its work was sent undoes the work.
			sp, err = tx.Begin(ctx)
			require.NoError(t, err)
			_, err = sp.Exec(ctx, ins, 2)
			require.NoError(t, err)
			require.NoError(t, sp.Rollback(ctx))
			rows, err := tx.Query(ctx, `SELECT n FROM `+schema+`.pipe ORDER BY n`)
			require.NoError(t, err)
			got, err := pgx.CollectRows(rows, pgx.RowTo[int])
			require.NoError(t, err)
			require.Equal(t, []int{1}, got)
			return nil
		}))
		require.Equal(t, 1, count())
	})
	t.Run("a failed statement fails the commit", func(t *testing.T) {
		err := run(func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, ins, 10)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, ins, 10) // duplicate key: the transaction is aborted
			require.Error(t, err)
			return nil // a careless handler goes on as if nothing happened
		})
		require.ErrorIs(t, err, pgx.ErrTxCommitRollback)
		require.Equal(t, 1, count(), "nothing of the aborted transaction committed")
	})
	t.Run("a batch goes after what is queued", func(t *testing.T) {
		require.NoError(t, run(func(ctx context.Context, tx pgx.Tx) error {
			sp, err := tx.Begin(ctx)
			require.NoError(t, err)
			b := &pgx.Batch{}
			b.Queue(ins, 20)
			b.Queue(ins, 21)
			require.NoError(t, sp.SendBatch(ctx, b).Close())
			return sp.Commit(ctx)
		}))
		require.Equal(t, 3, count())
	})
	t.Run("the completion of a vanished claim rolls everything back", func(t *testing.T) {
		key := idempotency.Key{Scope: "s", Key: "gone"}
		err := tr.InTx(ctx, func(ctx context.Context, st idempotency.Store) error {
			c, err := st.Claim(ctx, key, idemFP1, idemT0, idemT0.Add(idemLease), idemT0.Add(idemRetention))
			require.NoError(t, err)
			tx, _ := pgstore.TxFromContext(ctx)
			_, err = tx.Exec(ctx, ins, 30)
			require.NoError(t, err)
			// Something deletes the record under the claim (it cannot happen: the row is locked by
			// this transaction; only this transaction itself can).
			_, err = tx.Exec(ctx, `DELETE FROM `+schema+`.idem WHERE key = 'gone'`)
			require.NoError(t, err)
			return st.Complete(ctx, key, c.Token, idempotency.Response{Status: 201}, idemT0.Add(idemRetention))
		})
		require.ErrorIs(t, err, idempotency.ErrLeaseLost)
		require.Equal(t, 3, count(), "the handler's insert did not commit without its stored response")
	})
}
