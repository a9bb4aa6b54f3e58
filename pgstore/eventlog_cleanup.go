package pgstore

// Retention: old events go, in bounded batches, behind each stream's watermark.

import (
	"context"
	"fmt"
	"time"
)

// Cleanup implements driver.Log. Cleanups of one log run one at a time (an advisory lock): they are
// background work, and serialising them keeps two from deadlocking over each other's stragglers.
func (l *EventLog) Cleanup(ctx context.Context, before time.Time, limit int) (int, error) {
	if l == nil || l.db == nil {
		return 0, errZeroEventLog
	}
	if limit < 1 {
		return 0, ctx.Err()
	}
	tx, err := l.db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("pgstore: event log cleanup: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey(evlogLockName("cleanup", l.cfg))); err != nil {
		return 0, fmt.Errorf("pgstore: event log cleanup: %w", err)
	}
	rows, err := tx.Query(ctx, l.sql.cleanupPick, before.Unix(), int64(limit))
	if err != nil {
		return 0, fmt.Errorf("pgstore: event log cleanup: %w", err)
	}
	var (
		streams []string
		through []int64
	)
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			rows.Close()
			return 0, fmt.Errorf("pgstore: event log cleanup: %w", err)
		}
		streams, through = append(streams, s), append(through, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("pgstore: event log cleanup: %w", err)
	}
	if len(streams) == 0 {
		return 0, nil
	}
	// Counter rows are locked in one order, so that Cleanup never deadlocks with itself elsewhere.
	if _, err := tx.Exec(ctx, l.sql.cleanupLock, streams); err != nil {
		return 0, fmt.Errorf("pgstore: event log cleanup: %w", err)
	}
	tag, err := tx.Exec(ctx, l.sql.cleanupDelete, streams, through)
	if err != nil {
		return 0, fmt.Errorf("pgstore: event log cleanup: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("pgstore: event log cleanup: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
