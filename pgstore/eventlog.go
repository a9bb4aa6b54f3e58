package pgstore

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/svcplatform/conventions/ids"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
)

// eventIDs names the events Append stores without an ID: "evt_" and 128 random bits, as the producer's
// own in-memory logs name theirs.
var eventIDs = ids.MustPrefix("evt")

// EventLog is a producer.Log on PostgreSQL: webhook events, their gap-free per-stream sequences and
// their delivery state, in the tables Migrate creates. Events and delivery state survive
// restarts, and any number of Dispatcher replicas can share one EventLog.
//
// It numbers events after they commit (producer.Sequencing). Append is one INSERT into the pending
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
// Each event keeps the trace context of the context it was appended in (producer.TraceContextFrom:
// the Publisher puts the publishing request's there when it has an Observer), in the nullable
// traceparent and tracestate columns, and Claim hands it back in Delivery.Trace, so that a delivery
// attempt on any replica, days later, links to the request that published the event. Backlog
// reports the undelivered events per stream, for a gauge.
//
// Claim leases due deliveries with SELECT … FOR UPDATE SKIP LOCKED, so replicas never block on or
// take each other's rows, and a per-row fencing token makes a stale holder's settlement fail.
// Cleanup deletes in bounded batches and advances each stream's pruned_through watermark, which Range
// reads in the same statement as the events, so a range never shows a hole. It never removes a
// pending event.
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
	beforeCommit func(ctx context.Context, tx pgx.Tx, runs []producer.SequencedRun) error
}

var (
	_ producer.Log           = (*EventLog)(nil)
	_ producer.Settler       = (*EventLog)(nil)
	_ producer.Sequencing    = (*EventLog)(nil)
	_ producer.BatchAppender = (*EventLog)(nil)
	_ producer.Backlogger    = (*EventLog)(nil)
	_ producer.ByteRanger    = (*EventLog)(nil)
)

// evlogSQL holds the statements, built once per table name.
type evlogSQL struct {
	append, appendBatch, sequence, unsequenced, rangeQ, rangeBytes, claim, settle, release, status, attempts, backlog string
	cleanupPick, cleanupLock, cleanupDelete                                                                           string
}

// sequenceLockClass is the first key of the numbering locks (pg_try_advisory_xact_lock(class,
// hashtext(events table, stream))). Two streams whose keys collide merely take turns.
const sequenceLockClass = 0x73657173 // "seqs"

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
	e, s, a := o.events, o.streams, o.attempts
	l := &EventLog{db: db, cfg: o, sql: evlogSQL{
		append: `INSERT INTO ` + o.pending + ` (stream, id, type, created, api_version, data, traceparent, tracestate)
VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''), NULLIF($8, ''))`,
		// The batch in its order (pos follows the rows as the SELECT yields them, ordered by n).
		// One trace context for the whole batch, as it comes from the context of the call.
		appendBatch: `INSERT INTO ` + o.pending + ` (stream, id, type, created, api_version, data, traceparent, tracestate)
SELECT stream, id, type, created, api_version, data, NULLIF($7, ''), NULLIF($8, '')
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bytea[])
     WITH ORDINALITY AS b(stream, id, type, created, api_version, data, n)
ORDER BY n`,
		// One statement numbers a batch. picked: the oldest pending events. held: their streams whose
		// numbering lock this transaction got (tried, never waited for: a stream another sequencer holds
		// is left to it). moved: those events, out of the pending table (a row another sequencer moved
		// since this statement's snapshot is skipped by the DELETE). c: each stream's counter, raised by
		// its count and locked until the commit. Then the events go in with consecutive numbers in
		// append order.
		sequence: `WITH picked AS MATERIALIZED (
    SELECT pos, stream FROM ` + o.pending + ` ORDER BY pos LIMIT $1),
held AS MATERIALIZED (
    SELECT d.stream FROM (SELECT DISTINCT stream FROM picked) d
    WHERE pg_try_advisory_xact_lock($2, hashtext($3 || d.stream))),
moved AS (
    DELETE FROM ` + o.pending + ` p USING picked JOIN held ON held.stream = picked.stream
    WHERE p.pos = picked.pos
    RETURNING p.pos, p.stream, p.id, p.type, p.created, p.api_version, p.data, p.traceparent, p.tracestate),
n AS (SELECT stream, count(*) AS k FROM moved GROUP BY stream),
c AS (
    INSERT INTO ` + s + ` AS c (stream, last_seq) SELECT stream, k FROM n ORDER BY stream
    ON CONFLICT (stream) DO UPDATE SET last_seq = c.last_seq + EXCLUDED.last_seq
    RETURNING c.stream, c.last_seq)
INSERT INTO ` + e + ` (stream, seq, id, type, created, api_version, data, next_attempt_at, traceparent, tracestate)
SELECT m.stream, c.last_seq - n.k + row_number() OVER (PARTITION BY m.stream ORDER BY m.pos),
       m.id, m.type, m.created, m.api_version, m.data, to_timestamp(m.created), m.traceparent, m.tracestate
FROM moved m JOIN n ON n.stream = m.stream JOIN c ON c.stream = m.stream
RETURNING stream, seq, id`,
		unsequenced: `SELECT count(*) FROM ` + o.pending,
		// Pending deliveries (the due index covers state = 0) and unnumbered events, per stream.
		backlog: `SELECT stream, sum(n)::bigint, min(oldest) FROM (
    SELECT stream, count(*) AS n, min(created) AS oldest FROM ` + e + ` WHERE state = 0 GROUP BY stream
    UNION ALL
    SELECT stream, count(*), min(created) FROM ` + o.pending + ` GROUP BY stream) b
GROUP BY stream
ORDER BY stream`,
		// One statement, one snapshot: the watermark and the events agree even while Cleanup runs.
		rangeQ: `SELECT c.pruned_through, e.seq, e.id, e.type, e.created, e.api_version, e.data
FROM ` + s + ` c
LEFT JOIN LATERAL (
    SELECT seq, id, type, created, api_version, data FROM ` + e + `
    WHERE stream = c.stream AND seq >= $2 AND seq <= $3
    ORDER BY seq LIMIT $4) e ON true
WHERE c.stream = $1
ORDER BY e.seq`,
		// The candidates: due deliveries of streams that nobody holds (no live lease), not skipped,
		// at most $5 of a stream (its lowest sequences). Then lock them, re-checked, and lease them.
		claim: `WITH cand AS (
    SELECT stream, seq FROM (
        SELECT e.stream, e.seq, e.next_attempt_at,
               row_number() OVER (PARTITION BY e.stream ORDER BY e.seq) AS rn
        FROM ` + e + ` e
        WHERE e.state = 0 AND e.next_attempt_at <= $1 AND (e.lease_until IS NULL OR e.lease_until <= $1)
          AND NOT (e.stream = ANY($4::text[]))
          AND NOT EXISTS (SELECT 1 FROM ` + e + ` h
                          WHERE h.stream = e.stream AND h.state = 0 AND h.lease_until > $1)) d
    WHERE rn <= $5
    ORDER BY next_attempt_at, stream, seq
    LIMIT $3),
due AS (
    SELECT e.stream, e.seq FROM ` + e + ` e JOIN cand ON e.stream = cand.stream AND e.seq = cand.seq
    WHERE e.state = 0 AND (e.lease_until IS NULL OR e.lease_until <= $1)
    FOR UPDATE OF e SKIP LOCKED)
UPDATE ` + e + ` e SET lease_until = $2, lease_token = e.lease_token + 1
FROM due WHERE e.stream = due.stream AND e.seq = due.seq
RETURNING e.stream, e.seq, e.lease_token, e.attempts, e.next_attempt_at,
          e.id, e.type, e.created, e.api_version, e.data,
          COALESCE(e.traceparent, ''), COALESCE(e.tracestate, '')`,
		// Settles many leased deliveries in one statement: the fenced UPDATE of each delivery's state
		// and the INSERT of its attempt into the history. A row whose lease is lost updates nothing
		// and records nothing; the ordinals that come back are the settlements that took.
		settle: `WITH m AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::boolean[], $5::timestamptz[],
                         $6::timestamptz[], $7::bigint[], $8::integer[], $9::text[], $10::text[], $11::text[],
                         $12::bigint[])
        WITH ORDINALITY AS m(stream, seq, token, ok, at, retry, latency_us, status_code, class, reason, response,
                             attempt_id, ord)),
u AS (
    UPDATE ` + e + ` e SET
        state = CASE WHEN m.ok THEN 1 WHEN m.retry IS NULL THEN 2 ELSE 0 END,
        attempts = e.attempts + CASE WHEN m.ok THEN 0 ELSE 1 END,
        delivered_at = CASE WHEN m.ok THEN m.at ELSE e.delivered_at END,
        last_attempt_at = m.at,
        next_attempt_at = CASE WHEN m.ok THEN NULL ELSE m.retry END,
        last_error = CASE WHEN m.ok THEN e.last_error ELSE m.reason END,
        lease_until = NULL
    FROM m
    WHERE e.stream = m.stream AND e.seq = m.seq AND e.lease_token = m.token AND e.state = 0
    RETURNING m.ord, e.id AS event_id, e.attempts AS failed, e.state AS state),
ins AS (
    INSERT INTO ` + a + ` (id, stream, seq, event_id, number, outcome, at, latency_us, status_code, class, reason,
                         response, retry_at)
    OVERRIDING SYSTEM VALUE -- tables made before random IDs have an identity column
    SELECT m.attempt_id, m.stream, m.seq, u.event_id, u.failed + CASE WHEN m.ok THEN 1 ELSE 0 END,
           CASE WHEN m.ok THEN 2 WHEN m.retry IS NULL THEN 3 ELSE 1 END,
           m.at, m.latency_us, m.status_code, m.class, m.reason, m.response, m.retry
    FROM u JOIN m ON m.ord = u.ord
    ORDER BY m.stream, m.seq)
SELECT ord FROM u`,
		release: `UPDATE ` + e + `
SET lease_until = NULL, next_attempt_at = $4
WHERE stream = $1 AND seq = $2 AND lease_token = $3 AND state = 0`,
		// Newest first by time, never by ID, which is random; the cursor is the position of the
		// attempt it names (none, when retention removed it: an empty page).
		attempts: `SELECT id, seq, event_id, number, outcome, at, latency_us, status_code, class, reason, response, retry_at
FROM ` + a + `
WHERE stream = $1 AND ($2::bigint = 0 OR seq = $2) AND ($3::smallint = 0 OR outcome = $3)
  AND ($4::bigint = 0 OR (at, seq, number) < (SELECT c.at, c.seq, c.number FROM ` + a + ` c WHERE c.stream = $1 AND c.id = $4))
ORDER BY at DESC, seq DESC, number DESC
LIMIT $5`,
		status: `SELECT state, attempts, next_attempt_at, lease_until, last_attempt_at, last_error, delivered_at
FROM ` + e + ` WHERE stream = $1 AND seq = $2`,
		cleanupPick: `WITH doomed AS (
    SELECT stream, seq FROM ` + e + ` WHERE created < $1
    ORDER BY created, stream, seq LIMIT $2
    FOR UPDATE SKIP LOCKED)
SELECT stream, max(seq) FROM doomed GROUP BY stream ORDER BY stream`,
		cleanupLock: `SELECT stream FROM ` + s + ` WHERE stream = ANY($1) ORDER BY stream FOR UPDATE`,
		cleanupDelete: `WITH m AS (SELECT * FROM unnest($1::text[], $2::bigint[]) AS m(stream, through)),
u AS (UPDATE ` + s + ` c SET pruned_through = GREATEST(c.pruned_through, m.through) FROM m WHERE c.stream = m.stream),
h AS (DELETE FROM ` + a + ` h USING m WHERE h.stream = m.stream AND h.seq <= m.through)
DELETE FROM ` + e + ` e USING m WHERE e.stream = m.stream AND e.seq <= m.through`,
		// rangeQ bounded by bytes as well: x is the range's first $4+1 events with their data's length
		// (octet_length reads a TOASTed value's header, not the value), numbered (rn) and added up
		// (run). The page is the prefix within the limit whose data fit in $5 — the first event
		// whatever its size — and the event right after it comes back without its data, marked
		// extra: it says that more follow.
		rangeBytes: `SELECT c.pruned_through, w.seq, ev.id, ev.type, ev.created, ev.api_version,
       CASE WHEN w.inc THEN ev.data END, NOT w.inc
FROM ` + s + ` c
LEFT JOIN LATERAL (
    SELECT x.seq, x.rn <= $4 AND (x.rn = 1 OR x.run <= $5) AS inc,
           x.rn >= 2 AND x.rn - 1 <= $4 AND (x.rn = 2 OR x.run - x.len <= $5) AS after
    FROM (SELECT y.seq, y.len, row_number() OVER w AS rn, sum(y.len) OVER w AS run
          FROM (SELECT seq, octet_length(data)::bigint AS len FROM ` + e + `
                WHERE stream = c.stream AND seq >= $2 AND seq <= $3
                ORDER BY seq LIMIT $4 + 1) y
          WINDOW w AS (ORDER BY y.seq)) x) w ON w.inc OR w.after
LEFT JOIN ` + e + ` ev ON ev.stream = c.stream AND ev.seq = w.seq
WHERE c.stream = $1
ORDER BY w.seq`,
	}}
	if o.MaxStreamEvents > 0 {
		// The bound, checked by the INSERT itself against committed state, taking no lock: the
		// stream's numbered events (its counter row) and its unnumbered ones (the pending index).
		held := func(stream string) string {
			return `COALESCE((SELECT c.last_seq - c.pruned_through FROM ` + s + ` c WHERE c.stream = ` + stream + `), 0)
    + (SELECT count(*) FROM ` + o.pending + ` p WHERE p.stream = ` + stream + `)`
		}
		l.sql.append = `INSERT INTO ` + o.pending + ` (stream, id, type, created, api_version, data, traceparent, tracestate)
SELECT $1::text, $2::text, $3::text, $4::bigint, $5::text, $6::bytea, NULLIF($7::text, ''), NULLIF($8::text, '')
WHERE ` + held("$1::text") + ` < $9::bigint`
		l.sql.appendBatch = `WITH b AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bytea[])
        WITH ORDINALITY AS b(stream, id, type, created, api_version, data, n)),
k AS (SELECT stream, count(*) AS k FROM b GROUP BY stream)
INSERT INTO ` + o.pending + ` (stream, id, type, created, api_version, data, traceparent, tracestate)
SELECT stream, id, type, created, api_version, data, NULLIF($7, ''), NULLIF($8, '')
FROM b
WHERE NOT EXISTS (SELECT 1 FROM k WHERE ` + held("k.stream") + ` + k.k > $9::bigint)
ORDER BY n`
	}
	return l, nil
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

// Append implements producer.Log: it stores the event unnumbered and returns it with Sequence 0
// (Sequence numbers it once it has committed). On a pgx.Tx it joins the caller's transaction.
func (l *EventLog) Append(ctx context.Context, stream string, ev webhook.Event) (webhook.Event, error) {
	if l == nil || l.db == nil {
		return webhook.Event{}, errZeroEventLog
	}
	if err := producer.CheckEvent(stream, ev); err != nil {
		return webhook.Event{}, err
	}
	if ev.ID == "" {
		ev.ID = eventIDs.New()
	}
	tc := producer.TraceContextFrom(ctx)
	args := []any{stream, ev.ID, ev.Type, ev.Created, ev.APIVersion, []byte(ev.Data), tc.TraceParent, tc.TraceState}
	if l.cfg.MaxStreamEvents > 0 {
		args = append(args, int64(l.cfg.MaxStreamEvents))
	}
	tag, err := l.db.Exec(ctx, l.sql.append, args...)
	if err != nil {
		return webhook.Event{}, fmt.Errorf("pgstore: event log append: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return webhook.Event{}, fmt.Errorf("pgstore: event log append: %w: stream %q keeps at most %d (EventLogOptions.MaxStreamEvents)",
			producer.ErrStreamFull, stream, l.cfg.MaxStreamEvents)
	}
	ev.Sequence = 0
	ev.Data = slices.Clone(ev.Data)
	return ev, nil
}

// AppendBatch implements producer.BatchAppender: one statement stores every event unnumbered, all or
// none, and returns them with Sequence 0. Sequence numbers them in the batch's order. On a pgx.Tx it
// joins the caller's transaction.
func (l *EventLog) AppendBatch(ctx context.Context, events []producer.StreamEvent) ([]webhook.Event, error) {
	if l == nil || l.db == nil {
		return nil, errZeroEventLog
	}
	if err := producer.CheckBatch(events); err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return nil, ctx.Err()
	}
	var (
		out                       = make([]webhook.Event, len(events))
		streams, ids, types, vers = make([]string, len(events)), make([]string, len(events)), make([]string, len(events)), make([]string, len(events))
		created                   = make([]int64, len(events))
		datas                     = make([][]byte, len(events))
	)
	for i, se := range events {
		ev := se.Event
		if ev.ID == "" {
			ev.ID = eventIDs.New()
		}
		ev.Sequence = 0
		ev.Data = slices.Clone(ev.Data)
		out[i] = ev
		streams[i], ids[i], types[i], vers[i], created[i], datas[i] = se.Stream, ev.ID, ev.Type, ev.APIVersion, ev.Created, ev.Data
	}
	tc := producer.TraceContextFrom(ctx)
	args := []any{streams, ids, types, created, vers, datas, tc.TraceParent, tc.TraceState}
	if l.cfg.MaxStreamEvents > 0 {
		args = append(args, int64(l.cfg.MaxStreamEvents))
	}
	tag, err := l.db.Exec(ctx, l.sql.appendBatch, args...)
	if err == nil && tag.RowsAffected() != int64(len(events)) {
		return nil, fmt.Errorf("pgstore: event log append: %w: a stream of the batch keeps at most %d (EventLogOptions.MaxStreamEvents)",
			producer.ErrStreamFull, l.cfg.MaxStreamEvents)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: event log append: %w", err)
	}
	return out, nil
}

// Sequence implements producer.Sequencing: one statement, its own transaction, that numbers at most
// limit of the oldest committed pending events, of the streams no other sequencer is numbering at the
// moment. The runs come back ordered by stream. Call it on a log built on a pool (the Dispatcher's
// Sequencer does); on a pgx.Tx the statement runs inside that transaction, whose commit then decides,
// and the streams stay locked until it ends.
func (l *EventLog) Sequence(ctx context.Context, limit int) ([]producer.SequencedRun, error) {
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
func evlogRuns(got []evlogNumbered) []producer.SequencedRun {
	if len(got) == 0 {
		return nil
	}
	slices.SortFunc(got, func(a, b evlogNumbered) int {
		return cmp.Or(cmp.Compare(a.stream, b.stream), cmp.Compare(a.seq, b.seq))
	})
	var runs []producer.SequencedRun
	for i, n := range got {
		if i == 0 || n.stream != got[i-1].stream {
			runs = append(runs, producer.SequencedRun{Stream: n.stream, First: uint64(n.seq)})
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

// Backlog implements producer.Backlogger: one aggregate statement over the pending deliveries and
// the unnumbered events. It reads every undelivered row, so call it at a metrics collector's pace.
func (l *EventLog) Backlog(ctx context.Context) ([]producer.StreamBacklog, error) {
	if l == nil || l.db == nil {
		return nil, errZeroEventLog
	}
	rows, err := l.db.Query(ctx, l.sql.backlog)
	if err != nil {
		return nil, fmt.Errorf("pgstore: event log backlog: %w", err)
	}
	defer rows.Close()
	var out []producer.StreamBacklog
	for rows.Next() {
		var (
			b          producer.StreamBacklog
			n, created int64
		)
		if err := rows.Scan(&b.Stream, &n, &created); err != nil {
			return nil, fmt.Errorf("pgstore: event log backlog: %w", err)
		}
		b.Events, b.Oldest = int(n), time.Unix(created, 0)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: event log backlog: %w", err)
	}
	return out, nil
}

// evlogInt clamps a sequence to bigint: sequences never reach 2⁶³, but a client's "to" may.
func evlogInt(n uint64) int64 { return int64(min(n, math.MaxInt64)) }

// Range implements producer.Log. Rows are decoded from their raw values into two buffers (one for
// the IDs, chunks for the data), with type and API version interned, so that a page of a thousand
// events costs a handful of allocations instead of several per event.
func (l *EventLog) Range(ctx context.Context, stream string, from, to uint64, limit int) ([]webhook.Event, bool, error) {
	if l == nil || l.db == nil {
		return nil, false, errZeroEventLog
	}
	if err := producer.CheckRange(from, to, limit); err != nil {
		return nil, false, err
	}
	if from > math.MaxInt64 {
		return nil, false, ctx.Err()
	}
	return l.readRange(ctx, l.sql.rangeQ, stream, from, to, limit, int64(limit)+1)
}

// RangeBytes implements producer.ByteRanger: one statement, like Range, that reads the data of the
// events it returns only, adding their lengths up in the database.
func (l *EventLog) RangeBytes(ctx context.Context, stream string, from, to uint64, limit, maxBytes int) ([]webhook.Event, bool, error) {
	if l == nil || l.db == nil {
		return nil, false, errZeroEventLog
	}
	if err := producer.CheckRangeBytes(from, to, limit, maxBytes); err != nil {
		return nil, false, err
	}
	if from > math.MaxInt64 {
		return nil, false, ctx.Err()
	}
	return l.readRange(ctx, l.sql.rangeBytes, stream, from, to, limit, int64(limit), int64(maxBytes))
}

// readRange runs a range statement ($1 stream, $2 from, $3 to, then extra) and decodes its rows:
// rangeQ's seven columns, where a row past the limit says that more follow, or rangeBytes' eight,
// whose last marks that row.
func (l *EventLog) readRange(ctx context.Context, sql, stream string, from, to uint64, limit int, extra ...any) ([]webhook.Event, bool, error) {
	rows, err := l.db.Query(ctx, sql, append([]any{stream, int64(from), evlogInt(to)}, extra...)...)
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: event log range: %w", err)
	}
	defer rows.Close()
	var (
		out     = make([]webhook.Event, 0, min(uint64(limit)+1, to-from+1, 1024))
		idEnds  []int
		ids     []byte
		data    evlogArena
		strs    = make(map[string]string)
		pruned  int64
		scanErr error
		after   bool // rangeBytes' row after the page: more follow
	)
	intern := func(b []byte) string {
		if s, ok := strs[string(b)]; ok {
			return s
		}
		s := string(b)
		strs[s] = s
		return s
	}
	fds := rows.FieldDescriptions()
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != len(fds) || (len(raw) != 7 && len(raw) != 8) {
			return nil, false, errors.New("pgstore: event log range: unexpected columns")
		}
		if pruned, scanErr = evlogRawInt(raw[0], fds[0].Format); scanErr != nil {
			break
		}
		if raw[1] == nil {
			continue // the stream exists but has nothing in the range
		}
		if len(raw) == 8 && len(raw[7]) == 1 && (raw[7][0] == 1 || raw[7][0] == 't') {
			after = true // bool is one byte in binary (1) and in text ('t')
			continue
		}
		var ev webhook.Event
		seq, err1 := evlogRawInt(raw[1], fds[1].Format)
		created, err2 := evlogRawInt(raw[4], fds[4].Format)
		ev.Data, scanErr = data.bytea(raw[6], fds[6].Format)
		if scanErr = errors.Join(err1, err2, scanErr); scanErr != nil {
			break
		}
		// text columns arrive as their UTF-8 bytes in the text and the binary format alike.
		ev.Sequence, ev.Created = uint64(seq), created
		ev.Type, ev.APIVersion = intern(raw[3]), intern(raw[5])
		ids = append(ids, raw[2]...)
		idEnds = append(idEnds, len(ids))
		out = append(out, ev)
	}
	if err := errors.Join(scanErr, rows.Err()); err != nil {
		return nil, false, fmt.Errorf("pgstore: event log range: %w", err)
	}
	if from <= uint64(pruned) {
		return nil, false, &producer.PrunedError{Stream: stream, FirstRetained: uint64(pruned) + 1}
	}
	all, start := string(ids), 0
	for i, end := range idEnds {
		out[i].ID, start = all[start:end], end
	}
	more := after || len(out) > limit
	if len(out) > limit {
		out = out[:limit]
	}
	return out, more, nil
}

// evlogRawInt decodes a bigint in either wire format.
func evlogRawInt(b []byte, format int16) (int64, error) {
	if format == pgx.BinaryFormatCode {
		if len(b) != 8 {
			return 0, errors.New("bigint of the wrong size")
		}
		return int64(binary.BigEndian.Uint64(b)), nil
	}
	return strconv.ParseInt(string(b), 10, 64)
}

// evlogArena hands out byte slices from shared chunks, each capped so an append cannot spill into
// its neighbour.
type evlogArena struct{ buf []byte }

const evlogChunk = 64 << 10

// bytea decodes a bytea in either wire format (text is "\x" and hex digits) into the arena.
func (a *evlogArena) bytea(b []byte, format int16) ([]byte, error) {
	n := len(b)
	if format != pgx.BinaryFormatCode {
		if len(b) < 2 || b[0] != '\\' || b[1] != 'x' {
			return nil, errors.New("bytea in an unexpected text form")
		}
		b, n = b[2:], (len(b)-2)/2
	}
	if cap(a.buf)-len(a.buf) < n {
		a.buf = make([]byte, 0, max(evlogChunk, n))
	}
	start := len(a.buf)
	if format == pgx.BinaryFormatCode {
		a.buf = append(a.buf, b...)
	} else {
		var err error
		if a.buf, err = hex.AppendDecode(a.buf, b); err != nil {
			return nil, err
		}
	}
	return a.buf[start:len(a.buf):len(a.buf)], nil
}

// Claim implements producer.Log.
func (l *EventLog) Claim(ctx context.Context, req producer.ClaimRequest) ([]producer.Delivery, error) {
	if l == nil || l.db == nil {
		return nil, errZeroEventLog
	}
	if req.Limit < 1 {
		return nil, ctx.Err()
	}
	per := int64(math.MaxInt32)
	if req.PerStream > 0 {
		per = int64(req.PerStream)
	}
	skip := req.Skip
	if skip == nil {
		skip = []string{}
	}
	rows, err := l.db.Query(ctx, l.sql.claim, req.Now, req.LeaseUntil, int64(req.Limit), skip, per)
	if err != nil {
		return nil, fmt.Errorf("pgstore: event log claim: %w", err)
	}
	type claimed struct {
		d    producer.Delivery
		next time.Time
	}
	var got []claimed
	for rows.Next() {
		var (
			c          claimed
			seq, token int64
			attempts   int32
			data       []byte
		)
		if err := rows.Scan(&c.d.Stream, &seq, &token, &attempts, &c.next,
			&c.d.Event.ID, &c.d.Event.Type, &c.d.Event.Created, &c.d.Event.APIVersion, &data,
			&c.d.Trace.TraceParent, &c.d.Trace.TraceState); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgstore: event log claim: %w", err)
		}
		c.d.Sequence, c.d.Token, c.d.Attempts = uint64(seq), uint64(token), int(attempts)
		c.d.Event.Sequence, c.d.Event.Data = uint64(seq), data
		c.d.LeaseUntil = req.LeaseUntil
		got = append(got, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: event log claim: %w", err)
	}
	// UPDATE … RETURNING has no order of its own.
	slices.SortFunc(got, func(a, b claimed) int {
		if c := a.next.Compare(b.next); c != 0 {
			return c
		}
		if c := cmp.Compare(a.d.Stream, b.d.Stream); c != 0 {
			return c
		}
		return cmp.Compare(a.d.Sequence, b.d.Sequence)
	})
	out := make([]producer.Delivery, len(got))
	for i, c := range got {
		out[i] = c.d
	}
	return out, nil
}

// settleOne runs one fenced UPDATE and maps "no row" to ErrLeaseLost.
func (l *EventLog) settleOne(ctx context.Context, op, sql string, lease producer.Lease, args ...any) error {
	if lease.Sequence > math.MaxInt64 || lease.Token > math.MaxInt64 {
		return producer.ErrLeaseLost
	}
	tag, err := l.db.Exec(ctx, sql, append([]any{lease.Stream, int64(lease.Sequence), int64(lease.Token)}, args...)...)
	if err != nil {
		return fmt.Errorf("pgstore: event log %s: %w", op, err)
	}
	if tag.RowsAffected() == 0 {
		return producer.ErrLeaseLost
	}
	return nil
}

// Delivered implements producer.Log.
func (l *EventLog) Delivered(ctx context.Context, lease producer.Lease, a producer.Attempt) error {
	return l.Settle(ctx, []producer.Settlement{{Lease: lease, Delivered: true, Attempt: a}})[0]
}

// Failed implements producer.Log.
func (l *EventLog) Failed(ctx context.Context, lease producer.Lease, a producer.Attempt) error {
	return l.Settle(ctx, []producer.Settlement{{Lease: lease, Attempt: a}})[0]
}

// Settle implements producer.Settler: every settlement's state update and history row in one
// statement, one round trip and one commit.
func (l *EventLog) Settle(ctx context.Context, ss []producer.Settlement) []error {
	if l == nil || l.db == nil {
		errs := make([]error, len(ss))
		for i := range errs {
			errs[i] = errZeroEventLog
		}
		return errs
	}
	errs := make([]error, len(ss))
	n := len(ss)
	var (
		streams   = make([]string, 0, n)
		seqs      = make([]int64, 0, n)
		tokens    = make([]int64, 0, n)
		oks       = make([]bool, 0, n)
		ats       = make([]time.Time, 0, n)
		retries   = make([]*time.Time, 0, n)
		latencies = make([]int64, 0, n)
		codes     = make([]int32, 0, n)
		classes   = make([]string, 0, n)
		reasons   = make([]string, 0, n)
		responses = make([]string, 0, n)
		attempts  = make([]int64, 0, n)
		index     = make([]int, 0, n) // ordinal-1 → position in ss
	)
	for i, s := range ss {
		errs[i] = producer.ErrLeaseLost
		if s.Lease.Sequence > math.MaxInt64 || s.Lease.Token > math.MaxInt64 || s.Lease.Token == 0 {
			continue
		}
		var retry *time.Time
		if !s.Delivered && !s.Attempt.RetryAt.IsZero() {
			r := s.Attempt.RetryAt
			retry = &r
		}
		a := s.Attempt
		streams, seqs, tokens = append(streams, s.Lease.Stream), append(seqs, int64(s.Lease.Sequence)), append(tokens, int64(s.Lease.Token))
		oks, ats, retries = append(oks, s.Delivered), append(ats, a.At), append(retries, retry)
		latencies, codes = append(latencies, a.Latency.Microseconds()), append(codes, int32(min(max(a.StatusCode, 0), math.MaxInt32)))
		classes, reasons = append(classes, evlogText(a.Class, 64)), append(reasons, evlogText(a.Reason, 1024))
		responses = append(responses, evlogText(a.Response, producer.MaxResponseSnippet))
		// A random ID, not the table's counter, which would tell each tenant the others' volume. A
		// collision fails the statement, and the dispatcher records again under new IDs.
		attempts = append(attempts, int64(randomUint63()))
		index = append(index, i)
	}
	if len(index) == 0 {
		return errs
	}
	rows, err := l.db.Query(ctx, l.sql.settle, streams, seqs, tokens, oks, ats, retries, latencies, codes,
		classes, reasons, responses, attempts)
	if err == nil {
		for rows.Next() {
			var ord int64
			if err = rows.Scan(&ord); err != nil {
				break
			}
			if ord >= 1 && int(ord) <= len(index) {
				errs[index[ord-1]] = nil
			}
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		err = fmt.Errorf("pgstore: event log settle: %w", err)
		for _, i := range index {
			errs[i] = err
		}
	}
	return errs
}

// evlogText makes s storable in a text column: valid UTF-8 without NUL bytes (PostgreSQL refuses
// them), at most max bytes, cut at a character boundary.
func evlogText(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Attempts implements producer.Log.
func (l *EventLog) Attempts(ctx context.Context, q producer.AttemptQuery) ([]producer.AttemptRecord, bool, error) {
	if l == nil || l.db == nil {
		return nil, false, errZeroEventLog
	}
	if err := producer.CheckAttemptQuery(q); err != nil {
		return nil, false, err
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
	var out []producer.AttemptRecord
	for rows.Next() {
		var (
			r                  producer.AttemptRecord
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
		r.Outcome, r.Latency, r.StatusCode = producer.Outcome(outcome), time.Duration(latencyUS)*time.Microsecond, int(code)
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

// Release implements producer.Log.
func (l *EventLog) Release(ctx context.Context, lease producer.Lease, retryAt time.Time) error {
	if l == nil || l.db == nil {
		return errZeroEventLog
	}
	return l.settleOne(ctx, "release", l.sql.release, lease, retryAt)
}

// Status implements producer.Log.
func (l *EventLog) Status(ctx context.Context, stream string, seq uint64) (producer.DeliveryStatus, error) {
	if l == nil || l.db == nil {
		return producer.DeliveryStatus{}, errZeroEventLog
	}
	if seq > math.MaxInt64 {
		return producer.DeliveryStatus{}, producer.ErrNotFound
	}
	var (
		st                                    producer.DeliveryStatus
		state                                 int16
		attempts                              int32
		next, lease, lastAttempt, deliveredAt *time.Time
	)
	err := l.db.QueryRow(ctx, l.sql.status, stream, int64(seq)).
		Scan(&state, &attempts, &next, &lease, &lastAttempt, &st.LastError, &deliveredAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return producer.DeliveryStatus{}, producer.ErrNotFound
	}
	if err != nil {
		return producer.DeliveryStatus{}, fmt.Errorf("pgstore: event log status: %w", err)
	}
	st.State, st.Attempts = producer.State(state), int(attempts)
	st.NextAttempt, st.LeaseUntil = evlogTime(next), evlogTime(lease)
	st.LastAttempt, st.DeliveredAt = evlogTime(lastAttempt), evlogTime(deliveredAt)
	return st, nil
}

// evlogTime turns a nullable timestamptz into a time, NULL into the zero time.
func evlogTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// Cleanup implements producer.Log. Cleanups of one log run one at a time (an advisory lock): they are
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
	rows, err := tx.Query(ctx, l.sql.cleanupPick, producer.CutoffUnix(before), int64(limit))
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
