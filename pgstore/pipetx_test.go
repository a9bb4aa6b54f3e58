package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
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
	tr := must(pgstore.NewTransactor(pool, &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}))
	count := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.pipe`).Scan(&n))
		return n
	}
	run := func(fn func(ctx context.Context, tx pgx.Tx) error) error {
		return tr.InTx(ctx, func(ctx context.Context, _ driver.Store) error {
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
	t.Run("a handler's failure is told from the store's in a nested Transactor", func(t *testing.T) {
		key := driver.Key{Scope: "s", Key: "nested"}
		err := run(func(ctx context.Context, outer pgx.Tx) error {
			inner := must(pgstore.NewTransactor(outer, &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}))
			return inner.InTx(ctx, func(ctx context.Context, st driver.Store) error {
				c, err := st.Claim(ctx, key, idemFP1, idemT0, idemT0.Add(idemLease), idemT0.Add(idemRetention))
				require.NoError(t, err)
				tx, _ := pgstore.TxFromContext(ctx)
				_, err = tx.Exec(ctx, `SELECT 1/0`)
				require.Error(t, err)
				return st.Complete(ctx, key, c.Token, driver.Response{Status: 201}, idemT0.Add(idemRetention))
			})
		})
		require.ErrorIs(t, err, driver.ErrTxAborted)
		require.Equal(t, 3, count())
	})
	t.Run("the completion of a vanished claim rolls everything back", func(t *testing.T) {
		key := driver.Key{Scope: "s", Key: "gone"}
		err := tr.InTx(ctx, func(ctx context.Context, st driver.Store) error {
			c, err := st.Claim(ctx, key, idemFP1, idemT0, idemT0.Add(idemLease), idemT0.Add(idemRetention))
			require.NoError(t, err)
			tx, _ := pgstore.TxFromContext(ctx)
			_, err = tx.Exec(ctx, ins, 30)
			require.NoError(t, err)
			// Something deletes the record under the claim (it cannot happen: the row is locked by
			// this transaction; only this transaction itself can).
			_, err = tx.Exec(ctx, `DELETE FROM `+schema+`.idem WHERE key = 'gone'`)
			require.NoError(t, err)
			return st.Complete(ctx, key, c.Token, driver.Response{Status: 201}, idemT0.Add(idemRetention))
		})
		require.ErrorIs(t, err, driver.ErrLeaseLost)
		require.Equal(t, 3, count(), "the handler's insert did not commit without its stored response")
	})
}

// TestTransactorEscapeHatches: what a handler does through the transaction's escape hatches — Conn,
// Prepare, LargeObjects — runs inside the transaction and shares its fate, although BEGIN and
// SAVEPOINT are deferred: it is rolled back with it, and nothing of it reaches the pool's next user.
func TestTransactorEscapeHatches(t *testing.T) {
	_, shared, schema := newIdemStore(t)
	ctx := context.Background()
	_, err := shared.Exec(ctx, `CREATE TABLE `+schema+`.hatch (n int PRIMARY KEY)`)
	require.NoError(t, err)
	// One connection: whatever a transaction leaves on it, the next user gets.
	cfg := shared.Config()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	tr := must(pgstore.NewTransactor(pool, &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}))
	errRollback := errors.New("roll back")
	run := func(fn func(ctx context.Context, tx pgx.Tx) error) error {
		return tr.InTx(ctx, func(ctx context.Context, _ driver.Store) error {
			tx, ok := pgstore.TxFromContext(ctx)
			require.True(t, ok)
			return fn(ctx, tx)
		})
	}
	ins := `INSERT INTO ` + schema + `.hatch VALUES ($1)`
	rows := func() []int {
		r, err := pool.Query(ctx, `SELECT n FROM `+schema+`.hatch ORDER BY n`)
		require.NoError(t, err)
		got, err := pgx.CollectRows(r, pgx.RowTo[int])
		require.NoError(t, err)
		return got
	}
	clear := func() {
		_, err := pool.Exec(ctx, `DELETE FROM `+schema+`.hatch`)
		require.NoError(t, err)
	}

	t.Run("Conn writes roll back with the transaction", func(t *testing.T) {
		t.Cleanup(clear)
		require.ErrorIs(t, run(func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Conn().Exec(ctx, ins, 1) // the first statement: BEGIN was still queued
			require.NoError(t, err)
			return errRollback
		}), errRollback)
		require.Empty(t, rows(), "a write through Conn must not commit on its own")
	})
	t.Run("Conn writes roll back with their savepoint", func(t *testing.T) {
		t.Cleanup(clear)
		require.NoError(t, run(func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, ins, 1)
			require.NoError(t, err)
			sp, err := tx.Begin(ctx)
			require.NoError(t, err)
			_, err = sp.Conn().Exec(ctx, ins, 2) // SAVEPOINT was still queued
			require.NoError(t, err)
			require.NoError(t, sp.Rollback(ctx))

			// A connection taken earlier and used after a savepoint began works inside it too.
			conn := tx.Conn()
			sp, err = tx.Begin(ctx)
			require.NoError(t, err)
			_, err = conn.Exec(ctx, ins, 3)
			require.NoError(t, err)
			require.NoError(t, sp.Rollback(ctx))

			sp, err = tx.Begin(ctx)
			require.NoError(t, err)
			_, err = conn.Exec(ctx, ins, 4)
			require.NoError(t, err)
			return sp.Commit(ctx)
		}))
		require.Equal(t, []int{1, 4}, rows())
	})
	t.Run("a SET rolled back does not reach the next user", func(t *testing.T) {
		for _, via := range []string{"Conn", "Exec"} {
			require.ErrorIs(t, run(func(ctx context.Context, tx pgx.Tx) error {
				var err error
				if via == "Conn" {
					_, err = tx.Conn().Exec(ctx, `SET application_name = 'leaked'`)
				} else {
					_, err = tx.Exec(ctx, `SET application_name = 'leaked'`)
				}
				require.NoError(t, err)
				return errRollback
			}), errRollback)
			var name string
			require.NoError(t, pool.QueryRow(ctx, `SHOW application_name`).Scan(&name))
			require.NotEqual(t, "leaked", name, "a SET through %s outlived its rolled-back transaction", via)
		}
	})
	t.Run("Prepare works inside the transaction and ends with it", func(t *testing.T) {
		t.Cleanup(clear)
		for i, fate := range []error{errRollback, nil} {
			err := run(func(ctx context.Context, tx pgx.Tx) error {
				sd, err := tx.Prepare(ctx, "hatch_ins", ins)
				require.NoError(t, err)
				require.Len(t, sd.ParamOIDs, 1)
				_, err = tx.Exec(ctx, "hatch_ins", 10+i)
				require.NoError(t, err)
				var n int
				require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.hatch`).Scan(&n))
				require.Equal(t, 1, n, "the prepared statement's write is visible inside the transaction")
				return fate
			})
			require.ErrorIs(t, err, fate)
			var n int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE name = 'hatch_ins'`).Scan(&n))
			require.Zero(t, n, "the statement outlived the transaction that prepared it")
		}
		require.Equal(t, []int{11}, rows(), "the rolled-back write is gone, the committed one stays")
		// The next transaction may prepare the name for another statement.
		require.NoError(t, run(func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Prepare(ctx, "hatch_ins", `SELECT 1`)
			return err
		}))
		// A statement prepared in an aborted transaction fails like any other statement.
		err := run(func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT 1/0`)
			require.Error(t, err)
			sp, err := tx.Begin(ctx)
			require.NoError(t, err)
			_, err = sp.Prepare(ctx, "hatch_late", `SELECT 1`)
			var pe *pgconn.PgError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, "25P02", pe.Code)
			return nil
		})
		require.Error(t, err)
	})
	t.Run("LargeObjects work inside the transaction", func(t *testing.T) {
		exists := func(oid uint32) bool {
			var ok bool
			require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_largeobject_metadata WHERE oid = $1)`, oid).Scan(&ok))
			return ok
		}
		for _, fate := range []error{errRollback, nil} {
			var oid uint32
			require.NotPanics(t, func() {
				require.ErrorIs(t, run(func(ctx context.Context, tx pgx.Tx) error {
					sp, err := tx.Begin(ctx)
					require.NoError(t, err)
					los := sp.LargeObjects()
					oid, err = los.Create(ctx, 0)
					require.NoError(t, err)
					lo, err := los.Open(ctx, oid, pgx.LargeObjectModeWrite|pgx.LargeObjectModeRead)
					require.NoError(t, err)
					_, err = lo.Write([]byte("hatch"))
					require.NoError(t, err)
					require.NoError(t, lo.Close())
					require.NoError(t, sp.Commit(ctx))
					return fate
				}), fate)
			})
			require.Equal(t, fate == nil, exists(oid))
			if fate == nil {
				_, err := pool.Exec(ctx, `SELECT lo_unlink($1)`, oid)
				require.NoError(t, err)
			}
		}
	})
}
