package pgstore

// Sequencing: committed pending events get their numbers, one statement per batch.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// sequenceLockClass is the first key of the numbering locks (pg_try_advisory_xact_lock(class,
// hashtext(events table, stream))). Two streams whose keys collide merely take turns.
const sequenceLockClass = 0x73657173 // "seqs"

// Sequence implements driver.Sequencing: one statement, its own transaction, that numbers at most
// limit of the oldest committed pending events, of the streams no other sequencer is numbering at the
// moment. The runs come back ordered by stream. Call it on a log built on a pool (the Dispatcher's
// Sequencer does); on a pgx.Tx the statement runs inside that transaction, whose commit then decides,
// and the streams stay locked until it ends.
func (l *EventLog) Sequence(ctx context.Context, limit int) ([]driver.SequencedRun, error) {
	if l == nil || l.db == nil {
		return nil, errZeroEventLog
	}
	if limit < 1 {
		return nil, ctx.Err()
	}
	if l.beforeCommit == nil {
		// The statement is its own transaction: its numbering locks are held until it commits, and
		// it commits before its last row reaches us. One round trip.
		got, err := l.sequenceOn(ctx, l.db, limit)
		if err != nil {
			return nil, err
		}
		return evlogRuns(got), nil
	}
	// A test's hook runs between the statement and the commit: an explicit transaction.
	tx, err := l.db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: event log sequence: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	got, err := l.sequenceOn(ctx, tx, limit)
	if err != nil {
		return nil, err
	}
	runs := evlogRuns(got)
	if err := l.beforeCommit(ctx, tx, runs); err != nil {
		return nil, fmt.Errorf("pgstore: event log sequence: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: event log sequence: %w", err)
	}
	return runs, nil
}

// sequenceOn runs the numbering statement on db, and then, in the same transaction when db sends
// batches, the query of the next low-water mark; it reads what the statement numbered and raises the
// mark.
func (l *EventLog) sequenceOn(ctx context.Context, db DB, limit int) ([]evlogNumbered, error) {
	low := strconv.FormatUint(l.low.get(), 10)
	args := []any{int64(limit), int32(sequenceLockClass), l.cfg.events + "#", low}
	var (
		got  []evlogNumbered
		next string
	)
	scan := func(rows pgx.Rows) error {
		for rows.Next() {
			var n evlogNumbered
			if err := rows.Scan(&n.stream, &n.seq, &n.id); err != nil {
				rows.Close()
				return err
			}
			got = append(got, n)
		}
		rows.Close()
		return rows.Err()
	}
	if b, ok := db.(batcher); ok {
		var batch pgx.Batch
		batch.Queue(l.sql.sequence, args...)
		batch.Queue(l.sql.lowWater, low)
		br := b.SendBatch(ctx, &batch)
		rows, err := br.Query()
		if err == nil {
			err = scan(rows)
		}
		if err == nil {
			err = br.QueryRow().Scan(&next)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("pgstore: event log sequence: %w", err)
		}
	} else {
		rows, err := db.Query(ctx, l.sql.sequence, args...)
		if err == nil {
			err = scan(rows)
		}
		if err == nil {
			err = db.QueryRow(ctx, l.sql.lowWater, low).Scan(&next)
		}
		if err != nil {
			return nil, fmt.Errorf("pgstore: event log sequence: %w", err)
		}
	}
	if xid, err := strconv.ParseUint(next, 10, 64); err == nil {
		l.low.raise(xid)
	}
	return got, nil
}

// evlogNumbered is one event the numbering statement moved.
type evlogNumbered struct {
	stream, id string
	seq        int64
}

// evlogRuns groups numbered events into runs, ordered by stream and then sequence; nil for none.
func evlogRuns(got []evlogNumbered) []driver.SequencedRun {
	if len(got) == 0 {
		return nil
	}
	slices.SortFunc(got, func(a, b evlogNumbered) int {
		return cmp.Or(cmp.Compare(a.stream, b.stream), cmp.Compare(a.seq, b.seq))
	})
	var runs []driver.SequencedRun
	for i, n := range got {
		if i == 0 || n.stream != got[i-1].stream {
			runs = append(runs, driver.SequencedRun{Stream: n.stream, First: uint64(n.seq)})
		}
		r := &runs[len(runs)-1]
		r.IDs = append(r.IDs, n.id)
	}
	return runs
}

// Unsequenced reports how many appended events wait for their number: committed ones, and on a
// pgx.Tx those of the transaction. A number that stays high means no Sequencer (no Dispatcher) runs
// on the log.
func (l *EventLog) Unsequenced(ctx context.Context) (int, error) {
	if l == nil || l.db == nil {
		return 0, errZeroEventLog
	}
	var n int64
	if err := l.db.QueryRow(ctx, l.sql.unsequenced).Scan(&n); err != nil {
		return 0, fmt.Errorf("pgstore: event log unsequenced: %w", err)
	}
	return int(n), nil
}
