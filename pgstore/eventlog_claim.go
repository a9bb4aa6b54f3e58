package pgstore

// Deliveries: leases (Claim), their settlement with the history row (Settle, Delivered, Failed,
// Release), and the delivery state (Status, Backlog).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// Claim implements driver.Log.
func (l *EventLog) Claim(ctx context.Context, req driver.ClaimRequest) ([]driver.Delivery, error) {
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
		d    driver.Delivery
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
			&c.d.TraceParent, &c.d.TraceState); err != nil {
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
	out := make([]driver.Delivery, len(got))
	for i, c := range got {
		out[i] = c.d
	}
	return out, nil
}

// settleOne runs one fenced UPDATE and maps "no row" to ErrLeaseLost.
func (l *EventLog) settleOne(ctx context.Context, op, sql string, lease driver.Lease, args ...any) error {
	if lease.Sequence > math.MaxInt64 || lease.Token > math.MaxInt64 {
		return driver.ErrLeaseLost
	}
	tag, err := l.db.Exec(ctx, sql, append([]any{lease.Stream, int64(lease.Sequence), int64(lease.Token)}, args...)...)
	if err != nil {
		return fmt.Errorf("pgstore: event log %s: %w", op, err)
	}
	if tag.RowsAffected() == 0 {
		return driver.ErrLeaseLost
	}
	return nil
}

// Delivered implements driver.Log.
func (l *EventLog) Delivered(ctx context.Context, lease driver.Lease, a driver.Attempt) error {
	return l.Settle(ctx, []driver.Settlement{{Lease: lease, Delivered: true, Attempt: a}})[0]
}

// Failed implements driver.Log.
func (l *EventLog) Failed(ctx context.Context, lease driver.Lease, a driver.Attempt) error {
	return l.Settle(ctx, []driver.Settlement{{Lease: lease, Attempt: a}})[0]
}

// Settle implements driver.Settler: every settlement's state update and history row in one
// statement, one round trip and one commit.
func (l *EventLog) Settle(ctx context.Context, ss []driver.Settlement) []error {
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
		errs[i] = driver.ErrLeaseLost
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
		responses = append(responses, evlogText(a.Response, maxResponseSnippet))
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

// Release implements driver.Log.
func (l *EventLog) Release(ctx context.Context, lease driver.Lease, retryAt time.Time) error {
	if l == nil || l.db == nil {
		return errZeroEventLog
	}
	return l.settleOne(ctx, "release", l.sql.release, lease, retryAt)
}

// Status implements driver.Log.
func (l *EventLog) Status(ctx context.Context, stream string, seq uint64) (driver.DeliveryStatus, error) {
	if l == nil || l.db == nil {
		return driver.DeliveryStatus{}, errZeroEventLog
	}
	if seq > math.MaxInt64 {
		return driver.DeliveryStatus{}, driver.ErrNotFound
	}
	var (
		st                                    driver.DeliveryStatus
		state                                 int16
		attempts                              int32
		next, lease, lastAttempt, deliveredAt *time.Time
	)
	err := l.db.QueryRow(ctx, l.sql.status, stream, int64(seq)).
		Scan(&state, &attempts, &next, &lease, &lastAttempt, &st.LastError, &deliveredAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.DeliveryStatus{}, driver.ErrNotFound
	}
	if err != nil {
		return driver.DeliveryStatus{}, fmt.Errorf("pgstore: event log status: %w", err)
	}
	st.State, st.Attempts = driver.State(state), int(attempts)
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

// Backlog implements driver.Backlogger: one aggregate statement over the pending deliveries and
// the unnumbered events. It reads every undelivered row, so call it at a metrics collector's pace.
func (l *EventLog) Backlog(ctx context.Context) ([]driver.Backlog, error) {
	if l == nil || l.db == nil {
		return nil, errZeroEventLog
	}
	rows, err := l.db.Query(ctx, l.sql.backlog)
	if err != nil {
		return nil, fmt.Errorf("pgstore: event log backlog: %w", err)
	}
	defer rows.Close()
	var out []driver.Backlog
	for rows.Next() {
		var (
			b          driver.Backlog
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

// maxResponseSnippet bounds a stored attempt's response, as the driver contract says of
// driver.Attempt.Response.
const maxResponseSnippet = 256
