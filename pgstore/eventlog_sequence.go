package pgstore

// Sequencing: committed pending events get their numbers, one statement per batch.

import (
	"cmp"
	"context"
	"fmt"
	"slices"

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

// sequenceOn runs the numbering statement on db and reads what it numbered.
func (l *EventLog) sequenceOn(ctx context.Context, db DB, limit int) ([]evlogNumbered, error) {
	rows, err := db.Query(ctx, l.sql.sequence, int64(limit), int32(sequenceLockClass), l.cfg.events+"#")
	if err != nil {
		return nil, fmt.Errorf("pgstore: event log sequence: %w", err)
	}
	var got []evlogNumbered
	for rows.Next() {
		var n evlogNumbered
		if err := rows.Scan(&n.stream, &n.seq, &n.id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgstore: event log sequence: %w", err)
		}
		got = append(got, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: event log sequence: %w", err)
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
