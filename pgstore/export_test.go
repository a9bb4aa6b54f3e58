package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// SetSequenceHook makes fn run inside each of l's Sequence transactions, after the numbering
// statement and before the commit, with the runs it numbered: a test stalls a sequencer there, kills
// its connection, or fails it. It is set before l is used.
func SetSequenceHook(l *EventLog, fn func(ctx context.Context, tx pgx.Tx, runs []driver.SequencedRun) error) {
	l.beforeCommit = fn
}
