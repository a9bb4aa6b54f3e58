package pgstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/cursortest"
	"github.com/svcplatform/conventions/webhook/webhooktest"
)

// cursorCtx is the test's context: no deadline of its own, since these tests assert counts and orders
// (TestCursorProcessInTxExactlyOnce runs 300 events through two replicas); go test's -timeout bounds them.
func cursorCtx(t *testing.T) context.Context { return t.Context() }

func newCursorStore(t *testing.T, opts *pgstore.CursorStoreOptions) (*pgstore.CursorStore, pgstore.DB) {
	t.Helper()
	pool, _ := pgtest.Pool(t)
	require.NoError(t, pgstore.Migrate(cursorCtx(t), pool, opts))
	return must(pgstore.NewCursorStore(pool, opts)), pool
}

func TestCursorStoreConformance(t *testing.T) {
	cursortest.Run(t, func(t *testing.T) webhook.CursorStore {
		s, _ := newCursorStore(t, nil)
		return s
	})
}

func TestCursorStoreConformanceQualifiedTable(t *testing.T) {
	cursortest.Run(t, func(t *testing.T) webhook.CursorStore {
		_, schema := pgtest.Pool(t)
		pool, _ := pgtest.Pool(t) // search_path elsewhere: only the qualified name can find the table
		opts := &pgstore.CursorStoreOptions{Schema: schema, Table: `odd "name"`}
		require.NoError(t, pgstore.Migrate(cursorCtx(t), pool, opts))
		return must(pgstore.NewCursorStore(pool, opts))
	})
}

func TestCursorMigration(t *testing.T) {
	require.Contains(t, must(pgstore.MigrationSQL(&pgstore.CursorStoreOptions{})), `CREATE TABLE IF NOT EXISTS "webhook_cursors"`)
	sql := must(pgstore.MigrationSQL(&pgstore.CursorStoreOptions{Schema: "app", Table: "cur"}))
	require.Contains(t, sql, `CREATE SCHEMA IF NOT EXISTS "app";`)
	require.Contains(t, sql, `"app"."cur"`)

	pool, _ := pgtest.Pool(t)
	ctx := cursorCtx(t)
	var wg sync.WaitGroup
	for range 4 { // replicas starting together
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pgstore.Migrate(ctx, pool, &pgstore.CursorStoreOptions{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	require.NoError(t, pgstore.Migrate(ctx, pool, &pgstore.CursorStoreOptions{}), "idempotent")
}

func TestCursorStoreWithoutTable(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	s := must(pgstore.NewCursorStore(pool, nil))
	_, err := s.Get(cursorCtx(t), "we_1")
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "pgstore: "), err.Error())
}

func TestCursorAdvanceTx(t *testing.T) {
	s, db := newCursorStore(t, nil)
	ctx := cursorCtx(t)

	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, s.AdvanceTx(ctx, tx, "we_1", 0, 3))
	require.NoError(t, tx.Rollback(ctx))
	got, err := s.Get(ctx, "we_1")
	require.NoError(t, err)
	require.Zero(t, got, "rolled back with the transaction")

	tx, err = db.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, s.AdvanceTx(ctx, tx, "we_1", 0, 3))
	require.NoError(t, s.AdvanceTx(ctx, tx, "we_1", 3, 4))
	require.ErrorIs(t, s.AdvanceTx(ctx, tx, "we_1", 3, 4), webhook.ErrCursorConflict)
	require.NoError(t, tx.Commit(ctx))
	got, err = s.Get(ctx, "we_1")
	require.NoError(t, err)
	require.Equal(t, uint64(4), got)

	require.Error(t, s.AdvanceTx(ctx, nil, "we_1", 4, 5))
	require.ErrorIs(t, s.AdvanceTx(ctx, tx, "we_1", 4, 4), webhook.ErrCursorBackward)
}

// AdvanceTx is called by the caller's own code rather than by a Tracker, so unlike Advance it checks
// what webhook.CursorStore lets a store assume: these were the conformance suite's InvalidArguments
// for every store, and are the promise of this entry point now.
func TestCursorAdvanceTxRefusesInvalidArguments(t *testing.T) {
	s, db := newCursorStore(t, nil)
	ctx := cursorCtx(t)
	require.NoError(t, s.Advance(ctx, "we_1", 0, 10))
	cases := []struct {
		name     string
		from, to uint64
		want     error
	}{
		{"same", 10, 10, webhook.ErrCursorBackward},
		{"backward", 10, 9, webhook.ErrCursorBackward},
		{"zero to zero", 0, 0, webhook.ErrCursorBackward},
		{"above MaxSequence", 10, webhook.MaxSequence + 1, webhook.ErrCursorRange},
		{"max uint64", 10, ^uint64(0), webhook.ErrCursorRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := db.Begin(ctx)
			require.NoError(t, err)
			require.ErrorIs(t, s.AdvanceTx(ctx, tx, "we_1", tc.from, tc.to), tc.want)
			require.NoError(t, tx.Commit(ctx), "nothing was sent: the transaction is not aborted")
			got, err := s.Get(ctx, "we_1")
			require.NoError(t, err)
			require.Equal(t, uint64(10), got)
		})
	}
}

func TestCursorAdvanceTxSerializationFailureIsAConflict(t *testing.T) {
	s, db := newCursorStore(t, nil)
	ctx := cursorCtx(t)
	require.NoError(t, s.Advance(ctx, "we_1", 0, 5))

	tx, err := db.(interface {
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	}).BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var n int
	require.NoError(t, tx.QueryRow(ctx, "SELECT 1").Scan(&n)) // takes the snapshot
	require.NoError(t, s.Advance(ctx, "we_1", 5, 6))          // another replica commits first

	err = s.AdvanceTx(ctx, tx, "we_1", 5, 6)
	require.ErrorIs(t, err, webhook.ErrCursorConflict)
	require.Contains(t, err.Error(), "40001")
}

// TestCursorProcessInTxExactlyOnce runs two Trackers — two replicas, each with its own stream locks —
// on one table, with deliveries duplicated and reordered across them and processing failing at
// random. Processing inserts a row in the same transaction as the cursor's advance, so the table of
// effects must end with every event exactly once, in sequence order.
func TestCursorProcessInTxExactlyOnce(t *testing.T) {
	const n = 300
	s, db := newCursorStore(t, nil)
	ctx := cursorCtx(t)
	_, err := db.Exec(ctx, `CREATE TABLE effects (id bigserial PRIMARY KEY, stream text NOT NULL, seq bigint NOT NULL)`)
	require.NoError(t, err)

	secret := webhook.NewSecret()
	src := webhooktest.NewSource(secret, "sk_sandbox_pg", nil)
	for range n {
		src.Emit("we_pg", "order.created", nil)
	}

	var rngMu sync.Mutex
	rng := rand.New(rand.NewPCG(7, 11))
	chance := func(p float64) bool {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.Float64() < p
	}
	process := s.ProcessInTx(func(ctx context.Context, tx pgx.Tx, step webhook.Step) error {
		if _, err := tx.Exec(ctx, "INSERT INTO effects (stream, seq) VALUES ($1, $2)", step.Stream, int64(step.Event.Sequence)); err != nil {
			return err
		}
		if chance(0.03) {
			return errors.New("injected failure after the write: the transaction must roll it back")
		}
		return nil
	})
	var trackers [2]*webhook.Tracker
	for i := range trackers {
		trackers[i], err = webhook.NewTracker(s, src, process, &webhook.TrackerOptions{ProcessAdvances: true, FetchBatch: 16})
		require.NoError(t, err)
	}

	// Every event delivered twice, once to each replica, in a locally shuffled order; a few are dropped.
	type delivery struct {
		replica int
		seq     uint64
	}
	var queue []delivery
	for seq := uint64(1); seq <= n; seq++ {
		if seq%17 == 0 && seq != n {
			continue
		}
		queue = append(queue, delivery{0, seq}, delivery{1, seq})
	}
	for i := range queue {
		j := i + rng.IntN(min(8, len(queue)-i))
		queue[i], queue[j] = queue[j], queue[i]
	}
	ch := make(chan delivery)
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range ch {
				ev := src.Event("we_pg", d.seq)
				for attempt := 0; ; attempt++ { // the producer retries until 2xx
					_, err := trackers[d.replica].Receive(ctx, "we_pg", &ev)
					if err == nil {
						break
					}
					if attempt > 50 || ctx.Err() != nil {
						t.Errorf("sequence %d: %v", d.seq, err)
						return
					}
				}
			}
		}()
	}
	for _, d := range queue {
		ch <- d
	}
	close(ch)
	wg.Wait()

	rows, err := db.Query(ctx, "SELECT seq FROM effects WHERE stream = 'we_pg' ORDER BY id")
	require.NoError(t, err)
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Len(t, seqs, n, "each event's effects committed exactly once")
	for i, seq := range seqs {
		require.Equal(t, int64(i+1), seq, "committed in sequence order")
	}
	got, err := s.Get(ctx, "we_pg")
	require.NoError(t, err)
	require.Equal(t, uint64(n), got)
}

func TestCursorProcessInTxRejectsStaleStep(t *testing.T) {
	s, _ := newCursorStore(t, nil)
	ctx := cursorCtx(t)
	require.NoError(t, s.Advance(ctx, "we_1", 0, 5))
	ran := false
	process := s.ProcessInTx(func(context.Context, pgx.Tx, webhook.Step) error { ran = true; return nil })
	err := process(ctx, webhook.Step{Stream: "we_1", From: 4, Event: &webhook.Event{Sequence: 5}})
	require.ErrorIs(t, err, webhook.ErrCursorConflict)
	require.False(t, ran, "the work is not done when the cursor already moved")
}
