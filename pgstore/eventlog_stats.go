package pgstore

// Delivery statistics: one stream's aggregates and backlog, read at a bounded cost.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// statsMinuteSlots is the number of minute slots of a stream's rings; the hour slots follow them
// (migrations/eventlog/0005_stats.sql).
const statsMinuteSlots = 60

// StreamStats implements driver.StatsReader. The statistics come from the stream's rows of the stats
// table, which a trigger on the history keeps (migrations/eventlog/0005_stats.sql): at most 228
// rows, whatever the history holds. The backlog comes from the stream's row, its rows of the
// deliveries table above its cursor and its unnumbered events, read from the pending table's
// low-water mark up (the sequencer's own bound; the call raises the mark as Sequence does). Both
// statements go in one round trip when the DB sends batches. Attempts recorded before the migration
// that made the stats table are not counted.
func (l *EventLog) StreamStats(ctx context.Context, stream string, now time.Time) (driver.StreamStats, error) {
	if l == nil || l.db == nil {
		return driver.StreamStats{}, errZeroEventLog
	}
	var (
		out                  driver.StreamStats
		numbered, unnumbered int64
		oldest, pendOldest   *int64
		mark                 string
	)
	low := strconv.FormatUint(l.low.get(), 10)
	readStats := func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var (
				slot                         int16
				start, deliv, failed, abandn int64
				latency                      []int64
			)
			if err := rows.Scan(&slot, &start, &deliv, &failed, &abandn, &latency); err != nil {
				return err
			}
			w := driver.WindowStats{Delivered: int(deliv), Failed: int(failed), Abandoned: int(abandn)}
			copy(w.Latency[:], latency)
			span := time.Hour
			if slot < statsMinuteSlots {
				span = time.Minute
			}
			out.AddBucket(now, time.Unix(start, 0), span, w)
		}
		return rows.Err()
	}
	readBacklog := func(row pgx.Row) error {
		return row.Scan(&numbered, &oldest, &unnumbered, &pendOldest, &mark)
	}
	var err error
	if b, ok := l.db.(batcher); ok {
		var batch pgx.Batch
		batch.Queue(l.sql.streamStats, stream)
		batch.Queue(l.sql.streamBacklog, stream, low)
		br := b.SendBatch(ctx, &batch)
		rows, qerr := br.Query()
		if err = qerr; err == nil {
			err = readStats(rows)
		}
		if err == nil {
			err = readBacklog(br.QueryRow())
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	} else {
		rows, qerr := l.db.Query(ctx, l.sql.streamStats, stream)
		if err = qerr; err == nil {
			err = readStats(rows)
		}
		if err == nil {
			err = readBacklog(l.db.QueryRow(ctx, l.sql.streamBacklog, stream, low))
		}
	}
	if err != nil {
		return driver.StreamStats{}, fmt.Errorf("pgstore: event log stream stats: %w", err)
	}
	if xid, err := strconv.ParseUint(mark, 10, 64); err == nil {
		l.low.raise(xid)
	}
	out.Backlog = int(numbered + unnumbered)
	for _, c := range []*int64{oldest, pendOldest} {
		if c != nil && (out.Oldest.IsZero() || time.Unix(*c, 0).Before(out.Oldest)) {
			out.Oldest = time.Unix(*c, 0)
		}
	}
	return out, nil
}
