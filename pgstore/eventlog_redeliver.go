package pgstore

// Redeliveries: settled events queued to be pushed again (driver.Redeliverer), and the settlement
// and release of their leases. Claim takes them (claim.sql) when a stream has nothing else due.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// redeliveryToken marks the fencing token of a redelivery's lease. The token is the stream's, as for
// any claim (a counter that never comes near this bit); the mark tells Settle and Release that the
// lease's delivery is a row of the redeliveries table, so that they reach it with a statement of its
// own, and the settlements of normal deliveries — nearly all of them — run the same statement, at
// the same cost, as they would without redeliveries. A lease with the mark wrongly set or cleared
// finds no delivery: ErrLeaseLost, as for any token the delivery never had.
const redeliveryToken = 1 << 62

// Redeliver implements driver.Redeliverer in one statement (redeliver.sql): it locks the stream's
// row, queues the range's settled events that are not queued yet — those below the cursor without
// reading them, those settled out of order from the deliveries table — and brings the stream's
// next_due down to at, so that Claim finds it. Its cost follows the range; Claim's does not.
func (l *EventLog) Redeliver(ctx context.Context, stream string, from, to uint64, at time.Time) (int, error) {
	if l == nil || l.db == nil {
		return 0, errZeroEventLog
	}
	if from > math.MaxInt64 {
		return 0, ctx.Err() // past the end of any stream
	}
	to = min(to, math.MaxInt64)
	var pruned, last, n int64
	err := l.db.QueryRow(ctx, l.sql.redeliver, stream, int64(from), int64(to), at).Scan(&pruned, &last, &n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pgstore: event log redeliver: %w", err)
	}
	if int64(from) <= pruned {
		return 0, &driver.PrunedError{Stream: stream, FirstRetained: uint64(pruned) + 1}
	}
	return int(n), nil
}

// settleWithRedeliveries makes the settlements ss[i] for i in redo, which hold redeliveries, together
// with those of normal deliveries that Settle prepared (index and args, as for settle), in one
// transaction and one round trip, and sets their errs.
func (l *EventLog) settleWithRedeliveries(ctx context.Context, ss []driver.Settlement, redo []int, errs []error, index []int, args []any) {
	rargs, rindex := settleArgs(ss, redo, redeliveryToken, errs)
	var stmts []lockedStatement
	if len(index) > 0 {
		stmts = append(stmts, lockedStatement{l.sql.settle, args})
	}
	if len(rindex) > 0 {
		stmts = append(stmts, lockedStatement{l.sql.settleRedeliveries, rargs})
	}
	if len(stmts) == 0 {
		return
	}
	all := rargs[0].([]string)
	if len(index) > 0 {
		all = append(slices.Clone(args[0].([]string)), all...)
	}
	l.lockedSettle(ctx, distinctStreams(all), stmts, errs, index, rindex, "settle")
}

// releaseWithRedeliveries is settleWithRedeliveries for releases: ss[i] for i in redo hold
// redeliveries; index and args are the releases of normal deliveries, as releaseAll prepared them.
func (l *EventLog) releaseWithRedeliveries(ctx context.Context, ss []driver.Settlement, redo []int, errs []error, index []int, args []any) {
	var (
		streams = make([]string, 0, len(redo))
		seqs    = make([]int64, 0, len(redo))
		tokens  = make([]int64, 0, len(redo))
		dues    = make([]time.Time, 0, len(redo))
		holds   = make([]*time.Time, 0, len(redo))
		rindex  = make([]int, 0, len(redo)) // ordinal-1 → position in ss
	)
	for _, i := range redo {
		errs[i] = driver.ErrLeaseLost
		lease := ss[i].Lease
		token := lease.Token &^ redeliveryToken
		if lease.Sequence > math.MaxInt64 || token > math.MaxInt64 || token == 0 {
			continue
		}
		streams, seqs, tokens = append(streams, lease.Stream), append(seqs, int64(lease.Sequence)), append(tokens, int64(token))
		dues, holds, rindex = append(dues, ss[i].Attempt.RetryAt), append(holds, holdOf(ss[i])), append(rindex, i)
	}
	var stmts []lockedStatement
	if len(index) > 0 {
		stmts = append(stmts, lockedStatement{l.sql.release, args})
	}
	if len(rindex) > 0 {
		stmts = append(stmts, lockedStatement{l.sql.releaseRedeliveries, []any{streams, seqs, tokens, dues, holds}})
	}
	if len(stmts) == 0 {
		return
	}
	all := streams
	if len(index) > 0 {
		all = append(slices.Clone(args[0].([]string)), streams...)
	}
	l.lockedSettle(ctx, distinctStreams(all), stmts, errs, index, rindex, "release")
}

// lockedSettle runs stmts — the normal deliveries' statement when index is not empty, then the
// redeliveries' when rindex is not — with lockedQueries, and sets the errors of their settlements.
func (l *EventLog) lockedSettle(ctx context.Context, streams []string, stmts []lockedStatement, errs []error, index, rindex []int, op string) {
	ords, err := l.lockedQueries(ctx, streams, stmts...)
	if err != nil {
		settled(errs, index, nil, err, op)
		settled(errs, rindex, nil, err, op)
		return
	}
	k := 0
	if len(index) > 0 {
		settled(errs, index, ords[k], nil, op)
		k++
	}
	if len(rindex) > 0 {
		settled(errs, rindex, ords[k], nil, op)
	}
}
