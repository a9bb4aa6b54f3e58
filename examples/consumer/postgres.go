package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svcplatform/conventions/examples/consumer/consumer"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/webhook"
)

// processedMigration is the consumer's own table: what it did with each event. A real consumer writes
// its business effects here instead (an order copied into its own database, a ledger entry).
const processedMigration = `
CREATE TABLE IF NOT EXISTS consumer_processed_events (
    event_id text   PRIMARY KEY, -- a second insert of one event would fail: exactly once, checked
    stream   text   NOT NULL,
    sequence bigint NOT NULL,
    type     text   NOT NULL,
    data     jsonb  NOT NULL
)`

// usePostgres keeps the cursor in PostgreSQL and makes processing exactly-once across restarts and
// replicas: each event's row and the cursor's advance commit in one transaction (ProcessInTx), so a
// crash between the two cannot happen, and a replica racing on the same event finds it done.
func usePostgres(ctx context.Context, dsn string, cfg *consumer.Config) (func(), error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := pgstore.Migrate(ctx, pool, &pgstore.CursorStoreOptions{}); err != nil {
		pool.Close()
		return nil, err
	}
	if _, err := pool.Exec(ctx, processedMigration); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	cursors, err := pgstore.NewCursorStore(pool, nil)
	if err != nil {
		pool.Close()
		return nil, err
	}
	cfg.Cursors = cursors
	cfg.ProcessAdvances = true
	cfg.Process = cursors.ProcessInTx(func(ctx context.Context, tx pgx.Tx, s webhook.Step) error {
		_, err := tx.Exec(ctx, `INSERT INTO consumer_processed_events (event_id, stream, sequence, type, data)
VALUES ($1, $2, $3, $4, $5)`, s.Event.ID, s.Stream, int64(s.Event.Sequence), s.Event.Type, []byte(s.Event.Data))
		return err
	})
	return pool.Close, nil
}
