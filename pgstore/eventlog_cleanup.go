package pgstore

// Retention: old events go, in bounded batches, behind each stream's watermark.

import (
	"context"
	"fmt"
	"time"
)

// Cleanup implements driver.Log. Each stream is read from its watermark up, by the primary key, so a
// batch never walks the rows earlier batches deleted and costs the same however many went before,
// with or without VACUUM. Cleanups of one log run one at a time (an advisory lock): they are
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
	rows, err := tx.Query(ctx, l.sql.cleanupPick, before.Unix(), int64(limit), int64(cleanupStreams), int64(cleanupStragglers),
		int64(cleanupWindow))
	if err != nil {
		return 0, fmt.Errorf("pgstore: event log cleanup: %w", err)
	}
	var (
		streams        []string
		after, through []int64
		firstCreated   []*int64
	)
	for rows.Next() {
		var (
			s    string
			a, t int64
			fc   *int64
		)
		if err := rows.Scan(&s, &a, &t, &fc); err != nil {
			rows.Close()
			return 0, fmt.Errorf("pgstore: event log cleanup: %w", err)
		}
		streams, after, through, firstCreated = append(streams, s), append(after, a), append(through, t), append(firstCreated, fc)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("pgstore: event log cleanup: %w", err)
	}
	if len(streams) == 0 {
		return 0, tx.Commit(ctx)
	}
	// Counter rows are locked in one order, so that Cleanup never deadlocks with a claim, a
	// settlement or the sequencer.
	if _, err := tx.Exec(ctx, l.sql.cleanupLock, streams); err != nil {
		return 0, fmt.Errorf("pgstore: event log cleanup: %w", err)
	}
	tag, err := tx.Exec(ctx, l.sql.cleanupDelete, streams, after, through, firstCreated)
	if err != nil {
		return 0, fmt.Errorf("pgstore: event log cleanup: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("pgstore: event log cleanup: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// The bounds of one Cleanup batch's reading (cleanup_pick): the streams it looks at (those whose
// retained events may be the oldest), how many events beyond the limit it reads of a stream it looks
// at alone, to find the expired events that a younger one was numbered before, and how many beyond
// its share of the limit it reads of each stream when it looks at several.
const (
	cleanupStreams    = 64
	cleanupStragglers = 1000
	cleanupWindow     = 16
)
