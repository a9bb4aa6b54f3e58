package pgstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// EventLog is a driver.Log on PostgreSQL: webhook events, their gap-free per-stream sequences and
// their delivery state, in the tables Migrate creates. Events and delivery state survive
// restarts, and any number of Dispatcher replicas can share one EventLog.
//
// It numbers events after they commit (driver.Sequencing). Append is one INSERT into the pending
// table and locks no shared row, so the appends of one stream — every order of a busy licensee —
// commit in parallel instead of one after the other; it returns the event with Sequence 0. Sequence
// then numbers committed pending events, oldest first, in one short statement: it takes the streams'
// numbering locks (transaction-scoped advisory locks, tried, never waited for), moves their events
// into the events table with the next numbers from each stream's counter row, and commits. Until then
// an event is invisible to Range, Claim and Status. A Sequence that dies before its commit rolls back
// whole: no number is lost or given twice. A Dispatcher on an EventLog runs a producer.Sequencer, so
// an application that runs a Dispatcher needs nothing more; call the Dispatcher's Wake after a commit
// to have the events numbered at once rather than at the sequencer's next poll.
//
// The transactional outbox: take the EventLog onto the caller's pgx.Tx (log.WithDB(tx), which copies
// no statement) and the event commits or rolls back with the business change that caused it, and is
// numbered only once it has committed.
//
// Each event keeps the trace context it was appended with (driver.StreamEvent's: the Publisher
// gives the publishing request's when it has Hooks), in the nullable traceparent and tracestate
// columns, and Claim hands it back in the Delivery, so that a delivery
// attempt on any replica, days later, links to the request that published the event. Backlog
// reports the undelivered events per stream, for a gauge. StreamStats reports one stream's delivery
// statistics — attempts by outcome and latency over the last hour, day and week, the day hour by
// hour, and its backlog —
// from aggregates a trigger on the history keeps (migrations/eventlog/0005_stats.sql), at a cost
// that does not grow with the history.
//
// An event row is written once, when it is numbered, and never rewritten: delivery state lives in
// the stream's row — a cursor below which every event is settled, the mark above which none was ever
// claimed, and the holder's lease — and, for the few events the cursor cannot describe (a failure
// waiting for its retry, a delivery handed back, one settled out of order), in a narrow row of the
// deliveries table that goes once the cursor passes it. Claim locks the streams that have something
// due with SELECT … FOR UPDATE SKIP LOCKED, so replicas never block on or take each other's streams,
// and a per-stream fencing token makes a stale holder's settlement fail. Claim, Settle and Cleanup
// read each stream from its cursor or watermark up, so their cost follows the work they do, not the
// backlog or the rows deleted before: the tables are built for churn and need no VACUUM to stay fast
// (migrations/eventlog/0002_delivery_cursors.sql gives the reasons). Cleanup deletes in bounded
// batches and advances each stream's pruned_through watermark, which Range reads in the same
// statement as the events, so a range never shows a hole. It never removes a pending event.
//
// Redeliver (driver.Redeliverer) queues settled events to be pushed again, as rows of a table of
// their own (migrations/eventlog/0004_redeliveries.sql): the rows below a stream's cursor are never
// rewritten, and Claim reads a stream's queue only when nothing of its normal stream is due. The
// lease of a redelivery carries a mark in its token, so that the settlements of normal deliveries
// run the statement they always did.
//
// Transactions must be READ COMMITTED (PostgreSQL's default). An EventLog is safe for concurrent use
// when its DB is (a pool is; a pgx.Conn or pgx.Tx is not). It never closes the DB. Its zero value is
// not usable: every method with an error result returns an error that wraps ErrNotBuilt (Settle one
// per settlement). Call NewEventLog.
type EventLog struct {
	db  DB
	cfg evlogConfig
	sql evlogSQL
	// beforeCommit, when set (by tests), runs inside Sequence's transaction after the numbering
	// statement and before the commit, with the runs the statement numbered.
	beforeCommit func(ctx context.Context, tx pgx.Tx, runs []driver.SequencedRun) error
	// low is the pending table's low-water mark, shared by the copies WithDB makes.
	low *lowWater
}

// lowWater is a transaction ID below which no row of the pending table waits, nor ever will: Sequence
// reads the table from there up (sequence.sql). It only rises. Zero: read from the start.
type lowWater struct {
	mu  sync.Mutex
	xid uint64
}

func (w *lowWater) get() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.xid
}

// raise moves the mark up to xid; a lower xid (from a Sequence that raced this one) changes nothing.
func (w *lowWater) raise(xid uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.xid = max(w.xid, xid)
}

var (
	_ driver.Log           = (*EventLog)(nil)
	_ driver.Settler       = (*EventLog)(nil)
	_ driver.Sequencing    = (*EventLog)(nil)
	_ driver.BatchAppender = (*EventLog)(nil)
	_ driver.Backlogger    = (*EventLog)(nil)
	_ driver.ByteRanger    = (*EventLog)(nil)
	_ driver.StatsReader   = (*EventLog)(nil)
	_ driver.Redeliverer   = (*EventLog)(nil)
)

// evlogSQL holds the statements, rendered once per table name from the files of sql/eventlog/.
type evlogSQL struct {
	append, appendBatch, sequence, lowWater, unsequenced, rangeQ, rangeBytes, claimStreams, claim, lockStreams, settle, release string
	status, attempts, backlog, cleanupPick, cleanupLock, cleanupDelete                                                          string
	streamStats, streamBacklog, redeliver, settleRedeliveries, releaseRedeliveries                                              string
}

// The event log's statements, in files by domain; each statement follows its "-- name: …" line, and
// {{events}}, {{streams}}, {{attempts}}, {{pending}}, {{deliveries}} and {{stats}} stand for the
// tables' quoted names.
var (
	//go:embed sql/eventlog/append.sql
	evlogAppendSQL string
	//go:embed sql/eventlog/sequence.sql
	evlogSequenceSQL string
	//go:embed sql/eventlog/range.sql
	evlogRangeSQL string
	//go:embed sql/eventlog/claim.sql
	evlogClaimSQL string
	//go:embed sql/eventlog/settle.sql
	evlogSettleSQL string
	//go:embed sql/eventlog/status.sql
	evlogStatusSQL string
	//go:embed sql/eventlog/attempts.sql
	evlogAttemptsSQL string
	//go:embed sql/eventlog/cleanup.sql
	evlogCleanupSQL string
	//go:embed sql/eventlog/stats.sql
	evlogStatsSQL string
	//go:embed sql/eventlog/redeliver.sql
	evlogRedeliverSQL string
)

// evlogStatement is one statement of sql/eventlog: its file (name and text), its name in the file,
// and where it goes.
type evlogStatement struct {
	file, text, name string
	dst              *string
}

// evlogStatements is the number of statements an EventLog holds.
const evlogStatements = 23

// statements pairs each of q's statements with its source; bounded picks the appends that check
// EventLogOptions.MaxStreamEvents.
func (q *evlogSQL) statements(bounded bool) [evlogStatements]evlogStatement {
	appendName, batchName := "append", "append_batch"
	if bounded {
		appendName, batchName = "append_bounded", "append_batch_bounded"
	}
	return [...]evlogStatement{
		{"append.sql", evlogAppendSQL, appendName, &q.append},
		{"append.sql", evlogAppendSQL, batchName, &q.appendBatch},
		{"sequence.sql", evlogSequenceSQL, "sequence", &q.sequence},
		{"sequence.sql", evlogSequenceSQL, "low_water", &q.lowWater},
		{"sequence.sql", evlogSequenceSQL, "unsequenced", &q.unsequenced},
		{"range.sql", evlogRangeSQL, "range", &q.rangeQ},
		{"range.sql", evlogRangeSQL, "range_bytes", &q.rangeBytes},
		{"claim.sql", evlogClaimSQL, "claim_streams", &q.claimStreams},
		{"claim.sql", evlogClaimSQL, "claim", &q.claim},
		{"claim.sql", evlogClaimSQL, "lock_streams", &q.lockStreams},
		{"claim.sql", evlogClaimSQL, "release", &q.release},
		{"settle.sql", evlogSettleSQL, "settle", &q.settle},
		{"status.sql", evlogStatusSQL, "status", &q.status},
		{"status.sql", evlogStatusSQL, "backlog", &q.backlog},
		{"attempts.sql", evlogAttemptsSQL, "attempts", &q.attempts},
		{"cleanup.sql", evlogCleanupSQL, "cleanup_pick", &q.cleanupPick},
		{"cleanup.sql", evlogCleanupSQL, "cleanup_lock", &q.cleanupLock},
		{"cleanup.sql", evlogCleanupSQL, "cleanup_delete", &q.cleanupDelete},
		{"stats.sql", evlogStatsSQL, "stream_stats", &q.streamStats},
		{"stats.sql", evlogStatsSQL, "stream_backlog", &q.streamBacklog},
		{"redeliver.sql", evlogRedeliverSQL, "redeliver", &q.redeliver},
		{"redeliver.sql", evlogRedeliverSQL, "settle_redeliveries", &q.settleRedeliveries},
		{"redeliver.sql", evlogRedeliverSQL, "release_redeliveries", &q.releaseRedeliveries},
	}
}

// NewEventLog returns an EventLog on db with the tables named by opts (nil means the defaults). Run
// Migrate with the same opts once first.
func NewEventLog(db DB, opts *EventLogOptions) (*EventLog, error) {
	if db == nil {
		return nil, errNoDB("NewEventLog")
	}
	o := evlogResolve(opts)
	if o.MaxStreamEvents < 0 {
		return nil, errors.New("pgstore: negative EventLogOptions.MaxStreamEvents")
	}
	l := &EventLog{db: db, cfg: o, low: &lowWater{}}
	if err := l.sql.render(&o); err != nil {
		return nil, err
	}
	return l, nil
}

// render fills q with the statements for o's tables. They share one string, measured first and then
// written, since a log is built per transaction by some (Publisher.WithLog on a pgx.Tx).
func (q *evlogSQL) render(o *evlogConfig) error {
	names := map[string]string{"events": o.events, "streams": o.streams, "attempts": o.attempts, "pending": o.pending,
		"deliveries": o.deliveries, "stats": o.stats, "redeliveries": o.redeliveries}
	stmts := q.statements(o.MaxStreamEvents > 0)
	var (
		texts [evlogStatements]string
		size  int
	)
	for i, st := range stmts {
		text, ok := namedSQL(st.text, st.name)
		if !ok {
			return fmt.Errorf("pgstore: NewEventLog: no statement %q in sql/eventlog/%s", st.name, st.file)
		}
		n, _, err := writeSQL(nil, text, "", names, true)
		if err != nil {
			return fmt.Errorf("pgstore: NewEventLog: sql/eventlog/%s, %s: %w", st.file, st.name, err)
		}
		size += n
		texts[i] = text
	}
	var (
		b    strings.Builder
		ends [evlogStatements]int
	)
	b.Grow(size)
	for i, text := range texts {
		_, _, _ = writeSQL(&b, text, "", names, true)
		ends[i] = b.Len()
	}
	all, start := b.String(), 0
	for i, st := range stmts {
		*st.dst, start = all[start:ends[i]], ends[i]
	}
	return nil
}

// WithDB returns a copy of the log that runs on db — typically the caller's pgx.Tx, for the
// transactional outbox — sharing l's statements, so it costs one small allocation. A nil db is a
// programming error and panics here, at the line that passed it, rather than at first use. On a zero
// EventLog, which has no statements to share, it returns another zero EventLog.
func (l *EventLog) WithDB(db DB) *EventLog {
	if db == nil {
		panic("pgstore: EventLog.WithDB(nil)")
	}
	if l == nil || l.db == nil {
		return &EventLog{}
	}
	cp := *l
	cp.db = db
	return &cp
}
