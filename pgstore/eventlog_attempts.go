package pgstore

// The delivery history, newest first.

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// Attempts implements driver.Log.
func (l *EventLog) Attempts(ctx context.Context, q driver.AttemptQuery) ([]driver.AttemptRecord, bool, error) {
	if l == nil || l.db == nil {
		return nil, false, errZeroEventLog
	}
	if q.Sequence > math.MaxInt64 {
		return nil, false, ctx.Err()
	}
	before := int64(min(q.Before, math.MaxInt64))
	rows, err := l.db.Query(ctx, l.sql.attempts, q.Stream, int64(q.Sequence), int16(q.Outcome), before, int64(q.Limit)+1)
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: event log attempts: %w", err)
	}
	defer rows.Close()
	var out []driver.AttemptRecord
	for rows.Next() {
		var (
			r                  driver.AttemptRecord
			id, seq, latencyUS int64
			number, code       int32
			outcome            int16
			retry              *time.Time
		)
		if err := rows.Scan(&id, &seq, &r.EventID, &number, &outcome, &r.At, &latencyUS, &code, &r.Class,
			&r.Reason, &r.Response, &retry); err != nil {
			return nil, false, fmt.Errorf("pgstore: event log attempts: %w", err)
		}
		r.ID, r.Stream, r.Sequence, r.Number = uint64(id), q.Stream, uint64(seq), int(number)
		r.Outcome, r.Latency, r.StatusCode = driver.Outcome(outcome), time.Duration(latencyUS)*time.Microsecond, int(code)
		r.RetryAt = evlogTime(retry)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("pgstore: event log attempts: %w", err)
	}
	more := len(out) > q.Limit
	if more {
		out = out[:q.Limit]
	}
	return out, more, nil
}
