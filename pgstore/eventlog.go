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
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
)

// EventLog is a producer.Log on PostgreSQL: webhook events, their gap-free per-stream sequences and
// their delivery state, in the tables EventLogMigration creates. Events and delivery state survive
// restarts, and any number of Dispatcher replicas can share one EventLog.
//
// Append is one statement: an INSERT … ON CONFLICT DO UPDATE that bumps the stream's counter row,
// feeding the event INSERT in the same statement. The counter row stays locked until the transaction
// ends, so appends to one stream commit in sequence order and a rolled-back append leaves no gap
// (the number is handed out again; nobody ever saw it). Appends to different streams do not wait for
// each other.
//
// The transactional outbox: build an EventLog on the caller's pgx.Tx (NewEventLog(tx, opts), which is
// cheap) and the event commits or rolls back with the business change that caused it. Keep such
// transactions short: the next append to the same stream waits for them. A transaction that appends
// to several streams should do so in a fixed order (sorted by endpoint ID, say): two transactions
// taking the same counter rows in opposite orders deadlock, and PostgreSQL aborts one of them.
//
// Claim leases due deliveries with SELECT … FOR UPDATE SKIP LOCKED, so replicas never block on or
// take each other's rows, and a per-row fencing token makes a stale holder's settlement fail.
// Cleanup deletes in bounded batches and advances each stream's pruned_through watermark, which Range
// reads in the same statement as the events, so a range never shows a hole.
//
// Transactions must be READ COMMITTED (PostgreSQL's default). An EventLog is safe for concurrent use
// when its DB is (a pool is; a pgx.Conn or pgx.Tx is not). It never closes the DB. Its zero value is
// not usable: call NewEventLog.
type EventLog struct {
	db  DB
	cfg evlogConfig
	sql evlogSQL
}

var _ producer.Log = (*EventLog)(nil)

// evlogSQL holds the statements, built once per table name.
type evlogSQL struct {
	append, rangeQ, claim, delivered, failed, release, status string
	cleanupPick, cleanupLock, cleanupDelete                   string
}

// NewEventLog returns an EventLog on db with the tables named by opts (nil means the defaults). Run
// MigrateEventLog once first.
func NewEventLog(db DB, opts *EventLogOptions) *EventLog {
	o := evlogResolve(opts)
	e, s := o.events, o.streams
	return &EventLog{db: db, cfg: o, sql: evlogSQL{
		append: `WITH c AS (
    INSERT INTO ` + s + ` AS c (stream, last_seq) VALUES ($1, 1)
    ON CONFLICT (stream) DO UPDATE SET last_seq = c.last_seq + 1
    RETURNING last_seq)
INSERT INTO ` + e + ` (stream, seq, id, type, created, api_version, data, next_attempt_at)
SELECT $1, c.last_seq, $2, $3, $4, $5, $6, $7 FROM c
RETURNING seq`,
		// One statement, one snapshot: the watermark and the events agree even while Cleanup runs.
		rangeQ: `SELECT c.pruned_through, e.seq, e.id, e.type, e.created, e.api_version, e.data
FROM ` + s + ` c
LEFT JOIN LATERAL (
    SELECT seq, id, type, created, api_version, data FROM ` + e + `
    WHERE stream = c.stream AND seq >= $2 AND seq <= $3
    ORDER BY seq LIMIT $4) e ON true
WHERE c.stream = $1
ORDER BY e.seq`,
		claim: `WITH due AS (
    SELECT stream, seq FROM ` + e + `
    WHERE state = 0 AND next_attempt_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)
    ORDER BY next_attempt_at, stream, seq
    LIMIT $3
    FOR UPDATE SKIP LOCKED)
UPDATE ` + e + ` e SET lease_until = $2, lease_token = e.lease_token + 1
FROM due WHERE e.stream = due.stream AND e.seq = due.seq
RETURNING e.stream, e.seq, e.lease_token, e.attempts, e.next_attempt_at,
          e.id, e.type, e.created, e.api_version, e.data`,
		delivered: `UPDATE ` + e + `
SET state = 1, delivered_at = $4, last_attempt_at = $4, lease_until = NULL, next_attempt_at = NULL
WHERE stream = $1 AND seq = $2 AND lease_token = $3 AND state = 0`,
		failed: `UPDATE ` + e + `
SET attempts = attempts + 1, last_attempt_at = $4, next_attempt_at = $5, last_error = $6, lease_until = NULL,
    state = CASE WHEN $5::timestamptz IS NULL THEN 2 ELSE 0 END
WHERE stream = $1 AND seq = $2 AND lease_token = $3 AND state = 0`,
		release: `UPDATE ` + e + `
SET lease_until = NULL, next_attempt_at = $4
WHERE stream = $1 AND seq = $2 AND lease_token = $3 AND state = 0`,
		status: `SELECT state, attempts, next_attempt_at, lease_until, last_attempt_at, last_error, delivered_at
FROM ` + e + ` WHERE stream = $1 AND seq = $2`,
		cleanupPick: `WITH doomed AS (
    SELECT stream, seq FROM ` + e + ` WHERE created < $1
    ORDER BY created, stream, seq LIMIT $2
    FOR UPDATE SKIP LOCKED)
SELECT stream, max(seq) FROM doomed GROUP BY stream ORDER BY stream`,
		cleanupLock: `SELECT stream FROM ` + s + ` WHERE stream = ANY($1) ORDER BY stream FOR UPDATE`,
		cleanupDelete: `WITH m AS (SELECT * FROM unnest($1::text[], $2::bigint[]) AS m(stream, through)),
u AS (UPDATE ` + s + ` c SET pruned_through = GREATEST(c.pruned_through, m.through) FROM m WHERE c.stream = m.stream)
DELETE FROM ` + e + ` e USING m WHERE e.stream = m.stream AND e.seq <= m.through`,
	}}
}

// Append implements producer.Log. On a pgx.Tx it joins the caller's transaction.
func (l *EventLog) Append(ctx context.Context, stream string, ev webhook.Event) (webhook.Event, error) {
	if err := producer.CheckEvent(stream, ev); err != nil {
		return webhook.Event{}, err
	}
	if ev.ID == "" {
		ev.ID = randid.New("evt_")
	}
	var seq int64
	err := l.db.QueryRow(ctx, l.sql.append, stream, ev.ID, ev.Type, ev.Created, ev.APIVersion, []byte(ev.Data),
		time.Unix(ev.Created, 0)).Scan(&seq)
	if err != nil {
		return webhook.Event{}, fmt.Errorf("pgstore: event log append: %w", err)
	}
	ev.Sequence = uint64(seq)
	ev.Data = slices.Clone(ev.Data)
	return ev, nil
}

// evlogInt clamps a sequence to bigint: sequences never reach 2⁶³, but a client's "to" may.
func evlogInt(n uint64) int64 { return int64(min(n, math.MaxInt64)) }

// Range implements producer.Log. Rows are decoded from their raw values into two buffers (one for
// the IDs, chunks for the data), with type and API version interned, so that a page of a thousand
// events costs a handful of allocations instead of several per event.
func (l *EventLog) Range(ctx context.Context, stream string, from, to uint64, limit int) ([]webhook.Event, bool, error) {
	if err := producer.CheckRange(from, to, limit); err != nil {
		return nil, false, err
	}
	if from > math.MaxInt64 {
		return nil, false, ctx.Err()
	}
	rows, err := l.db.Query(ctx, l.sql.rangeQ, stream, int64(from), evlogInt(to), int64(limit)+1)
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
		if len(raw) != 7 || len(fds) != 7 {
			return nil, false, errors.New("pgstore: event log range: unexpected columns")
		}
		if pruned, scanErr = evlogRawInt(raw[0], fds[0].Format); scanErr != nil {
			break
		}
		if raw[1] == nil {
			continue // the stream exists but has nothing in the range
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
	more := len(out) > limit
	if more {
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
func (l *EventLog) Claim(ctx context.Context, now, leaseUntil time.Time, limit int) ([]producer.Delivery, error) {
	if limit < 1 {
		return nil, ctx.Err()
	}
	rows, err := l.db.Query(ctx, l.sql.claim, now, leaseUntil, int64(limit))
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
			&c.d.Event.ID, &c.d.Event.Type, &c.d.Event.Created, &c.d.Event.APIVersion, &data); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgstore: event log claim: %w", err)
		}
		c.d.Sequence, c.d.Token, c.d.Attempts = uint64(seq), uint64(token), int(attempts)
		c.d.Event.Sequence, c.d.Event.Data = uint64(seq), data
		c.d.LeaseUntil = leaseUntil
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

// settle runs one fenced UPDATE and maps "no row" to ErrLeaseLost.
func (l *EventLog) settle(ctx context.Context, op, sql string, lease producer.Lease, args ...any) error {
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
func (l *EventLog) Delivered(ctx context.Context, lease producer.Lease, at time.Time) error {
	return l.settle(ctx, "delivered", l.sql.delivered, lease, at)
}

// Failed implements producer.Log.
func (l *EventLog) Failed(ctx context.Context, lease producer.Lease, f producer.Failure) error {
	var retry *time.Time
	if !f.RetryAt.IsZero() {
		retry = &f.RetryAt
	}
	return l.settle(ctx, "failed", l.sql.failed, lease, f.At, retry, f.Reason)
}

// Release implements producer.Log.
func (l *EventLog) Release(ctx context.Context, lease producer.Lease, retryAt time.Time) error {
	return l.settle(ctx, "release", l.sql.release, lease, retryAt)
}

// Status implements producer.Log.
func (l *EventLog) Status(ctx context.Context, stream string, seq uint64) (producer.DeliveryStatus, error) {
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
