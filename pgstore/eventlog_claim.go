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

// Claim implements driver.Log, in short transactions of two statements: the first locks streams
// with something due that nobody holds (skipping those another replica has locked), the second, whose
// snapshot follows the locks, leases their due deliveries under a new token per stream (claim.sql
// says how). It reads the streams table and, for each stream it locked, the few rows above its cursor:
// its cost follows the number of endpoints and the claim's size, not the backlog. A round locks about
// twice the streams that PerStream deliveries each would fill the claim with (claimStreams at least);
// when they hold fewer, another round takes twice as many more, up to claimRounds.
func (l *EventLog) Claim(ctx context.Context, req driver.ClaimRequest) ([]driver.Delivery, error) {
	if l == nil || l.db == nil {
		return nil, errZeroEventLog
	}
	if req.Limit < 1 {
		return nil, ctx.Err()
	}
	per := math.MaxInt32
	if req.PerStream > 0 {
		per = req.PerStream
	}
	skip := req.Skip
	if skip == nil {
		skip = []string{}
	}
	var out []claimedDelivery
	for round := 0; round < claimRounds && len(out) < req.Limit; round++ {
		left := req.Limit - len(out)
		streams := min(left, max(2*((left+per-1)/per), claimStreams<<round))
		got, locked, err := l.claimRound(ctx, req, skip, per, left, streams)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
		if locked < streams {
			break // no other stream has anything due
		}
	}
	// The rounds' deliveries, in the order of one claim.
	slices.SortStableFunc(out, func(a, b claimedDelivery) int {
		return cmp.Or(a.due.Compare(b.due), cmp.Compare(a.d.Stream, b.d.Stream), cmp.Compare(a.d.Sequence, b.d.Sequence))
	})
	ds := make([]driver.Delivery, len(out))
	for i, c := range out {
		ds[i] = c.d
	}
	return ds, nil
}

// claimRounds bounds the transactions of one Claim, and claimStreams is the fewest streams its first
// round locks, doubled at each round after: streams that hold only a delivery or two each still fill
// a claim in a few rounds.
const (
	claimRounds  = 6
	claimStreams = 16
)

// claimedDelivery is a delivery a claim round leased, with the time it was due.
type claimedDelivery struct {
	d   driver.Delivery
	due time.Time
}

// claimRound is one transaction of Claim: it locks at most streams streams and leases at most limit
// of their deliveries. It returns them and how many streams it locked.
func (l *EventLog) claimRound(ctx context.Context, req driver.ClaimRequest, skip []string, per, limit, streams int) ([]claimedDelivery, int, error) {
	fail := func(err error) ([]claimedDelivery, int, error) {
		return nil, 0, fmt.Errorf("pgstore: event log claim: %w", err)
	}
	tx, err := l.db.Begin(ctx)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, l.sql.claimStreams, req.Now, skip, int64(streams))
	if err != nil {
		return fail(err)
	}
	locked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fail(err)
	}
	if len(locked) == 0 {
		return nil, 0, tx.Commit(ctx)
	}
	// Each stream's share of the limit, twice over, is read of it (PerStream at most): enough to fill
	// the claim when the streams have as much due, a short claim (and another round) when not.
	share := min(per, 2*((limit+len(locked)-1)/len(locked)))
	// Due by creation: created is whole seconds, so due by now is created ≤ now's second.
	rows, err = tx.Query(ctx, l.sql.claim, locked, req.Now, int64(share), req.Now.Unix(), req.LeaseUntil, int64(limit))
	if err != nil {
		return fail(err)
	}
	var out []claimedDelivery
	for rows.Next() {
		var (
			c          claimedDelivery
			seq, token int64
			attempts   int32
			data       []byte
		)
		if err := rows.Scan(&c.d.Stream, &seq, &token, &attempts, &c.due,
			&c.d.Event.ID, &c.d.Event.Type, &c.d.Event.Created, &c.d.Event.APIVersion, &data,
			&c.d.TraceParent, &c.d.TraceState, &c.d.Redelivery); err != nil {
			rows.Close()
			return fail(err)
		}
		c.d.Sequence, c.d.Token, c.d.Attempts = uint64(seq), uint64(token), int(attempts)
		if c.d.Redelivery {
			c.d.Token |= redeliveryToken
		}
		c.d.Event.Sequence, c.d.Event.Data = uint64(seq), data
		c.d.LeaseUntil = req.LeaseUntil
		out = append(out, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	return out, len(locked), nil
}

// batcher is what a DB offers to send several statements in one round trip, as one implicit
// transaction: *pgxpool.Pool, *pgx.Conn and pgx.Tx all do.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// lockedQuery runs sql after lock_streams has locked streams, in one transaction: one round trip when
// the DB sends batches, an explicit transaction otherwise. It returns the ordinals sql returns.
func (l *EventLog) lockedQuery(ctx context.Context, streams []string, sql string, args ...any) ([]int64, error) {
	ords, err := l.lockedQueries(ctx, streams, lockedStatement{sql, args})
	if err != nil {
		return nil, err
	}
	return ords[0], nil
}

// lockedStatement is a statement of lockedQueries and its arguments.
type lockedStatement struct {
	sql  string
	args []any
}

// lockedQueries is lockedQuery for several statements, run one after the other in the same
// transaction (and round trip); it returns the ordinals of each.
func (l *EventLog) lockedQueries(ctx context.Context, streams []string, stmts ...lockedStatement) ([][]int64, error) {
	out := make([][]int64, len(stmts))
	if b, ok := l.db.(batcher); ok {
		var batch pgx.Batch
		batch.Queue(l.sql.lockStreams, streams)
		for _, st := range stmts {
			batch.Queue(st.sql, st.args...)
		}
		br := b.SendBatch(ctx, &batch)
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, err
		}
		for i := range stmts {
			rows, err := br.Query()
			if err != nil {
				_ = br.Close()
				return nil, err
			}
			if out[i], err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
				_ = br.Close()
				return nil, err
			}
		}
		return out, br.Close()
	}
	tx, err := l.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, l.sql.lockStreams, streams); err != nil {
		return nil, err
	}
	for i, st := range stmts {
		rows, err := tx.Query(ctx, st.sql, st.args...)
		if err != nil {
			return nil, err
		}
		if out[i], err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return nil, err
		}
	}
	return out, tx.Commit(ctx)
}

// distinctStreams returns the streams of ss, sorted, each once.
func distinctStreams(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return slices.Compact(out)
}

// Delivered implements driver.Log.
func (l *EventLog) Delivered(ctx context.Context, lease driver.Lease, a driver.Attempt) error {
	return l.Settle(ctx, []driver.Settlement{{Lease: lease, Delivered: true, Attempt: a}})[0]
}

// Failed implements driver.Log.
func (l *EventLog) Failed(ctx context.Context, lease driver.Lease, a driver.Attempt) error {
	return l.Settle(ctx, []driver.Settlement{{Lease: lease, Attempt: a}})[0]
}

// Settle implements driver.Settler: every settlement's delivery state and history row in one
// statement, one round trip and one commit (releases in a statement of their own).
func (l *EventLog) Settle(ctx context.Context, ss []driver.Settlement) []error {
	if l == nil || l.db == nil {
		errs := make([]error, len(ss))
		for i := range errs {
			errs[i] = errZeroEventLog
		}
		return errs
	}
	errs := make([]error, len(ss))
	var (
		rel    []int // the releases, made by a statement of their own
		redo   []int // the settlements of redeliveries (eventlog_redeliver.go)
		settle []int // the settlements of normal deliveries
	)
	for i, s := range ss {
		switch {
		case s.Release:
			rel = append(rel, i)
		case s.Lease.Token&redeliveryToken != 0:
			redo = append(redo, i)
		default:
			settle = append(settle, i)
		}
	}
	if len(rel) > 0 {
		l.releaseAll(ctx, ss, rel, errs)
		if len(rel) == len(ss) {
			return errs
		}
	}
	args, index := settleArgs(ss, settle, 0, errs)
	if len(redo) > 0 {
		l.settleWithRedeliveries(ctx, ss, redo, errs, index, args)
		return errs
	}
	if len(index) == 0 {
		return errs
	}
	ords, err := l.lockedQuery(ctx, distinctStreams(args[0].([]string)), l.sql.settle, args...)
	settled(errs, index, ords, err, "settle")
	return errs
}

// settleArgs returns the arguments of the settle statements ($1 to $13 of settle.sql and of
// redeliver.sql's settle_redeliveries) for the settlements ss[i], i in idx, each lease's token with
// the bits of mask cleared, and index, which maps each ordinal-1 to its position in ss. Each of them
// is ErrLeaseLost in errs until the statement says it took; one that names no valid delivery is left
// out.
func settleArgs(ss []driver.Settlement, idx []int, mask uint64, errs []error) (args []any, index []int) {
	n := len(idx)
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
		holds     = make([]*time.Time, 0, n)
	)
	index = make([]int, 0, n)
	for _, i := range idx {
		s := ss[i]
		errs[i] = driver.ErrLeaseLost
		token := s.Lease.Token &^ mask
		if s.Lease.Sequence > math.MaxInt64 || token > math.MaxInt64 || token == 0 {
			continue
		}
		var retry *time.Time
		if !s.Delivered && !s.Attempt.RetryAt.IsZero() {
			r := s.Attempt.RetryAt
			retry = &r
		}
		a := s.Attempt
		streams, seqs, tokens = append(streams, s.Lease.Stream), append(seqs, int64(s.Lease.Sequence)), append(tokens, int64(token))
		oks, ats, retries = append(oks, s.Delivered), append(ats, a.At), append(retries, retry)
		latencies, codes = append(latencies, a.Latency.Microseconds()), append(codes, int32(min(max(a.StatusCode, 0), math.MaxInt32)))
		classes, reasons = append(classes, evlogText(a.Class, 64)), append(reasons, evlogText(a.Reason, 1024))
		responses = append(responses, evlogText(a.Response, maxResponseSnippet))
		// A random ID, not the table's counter, which would tell each tenant the others' volume. A
		// collision fails the statement, and the dispatcher records again under new IDs.
		attempts = append(attempts, int64(randomUint63()))
		holds = append(holds, holdOf(s))
		index = append(index, i)
	}
	return []any{streams, seqs, tokens, oks, ats, retries, latencies, codes, classes, reasons, responses, attempts, holds}, index
}

// holdOf is a settlement's hold as a parameter: NULL for none.
func holdOf(s driver.Settlement) *time.Time {
	if s.Hold.IsZero() {
		return nil
	}
	h := s.Hold
	return &h
}

// settled sets the errors of a lockedQuery's settlements: errs[index[k]] is nil for each ordinal k+1
// the statement returned (the others stay ErrLeaseLost), or err, for every one, when it failed.
func settled(errs []error, index []int, ords []int64, err error, op string) {
	if err != nil {
		err = fmt.Errorf("pgstore: event log %s: %w", op, err)
		for _, i := range index {
			errs[i] = err
		}
		return
	}
	for _, ord := range ords {
		if ord >= 1 && int(ord) <= len(index) {
			errs[index[ord-1]] = nil
		}
	}
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

// Release implements driver.Log: the delivery becomes a row of the deliveries table, due at retryAt.
func (l *EventLog) Release(ctx context.Context, lease driver.Lease, retryAt time.Time) error {
	if l == nil || l.db == nil {
		return errZeroEventLog
	}
	errs := []error{nil}
	l.releaseAll(ctx, []driver.Settlement{{Lease: lease, Release: true, Attempt: driver.Attempt{RetryAt: retryAt}}}, []int{0}, errs)
	return errs[0]
}

// releaseAll makes the releases ss[i] for i in idx in one statement, and sets their errs.
func (l *EventLog) releaseAll(ctx context.Context, ss []driver.Settlement, idx []int, errs []error) {
	var (
		streams = make([]string, 0, len(idx))
		seqs    = make([]int64, 0, len(idx))
		tokens  = make([]int64, 0, len(idx))
		dues    = make([]time.Time, 0, len(idx))
		holds   = make([]*time.Time, 0, len(idx))
		index   = make([]int, 0, len(idx)) // ordinal-1 → position in ss
		redo    []int                      // the releases of redeliveries (eventlog_redeliver.go)
	)
	for _, i := range idx {
		lease := ss[i].Lease
		if lease.Token&redeliveryToken != 0 {
			redo = append(redo, i)
			continue
		}
		errs[i] = driver.ErrLeaseLost
		if lease.Sequence > math.MaxInt64 || lease.Token > math.MaxInt64 || lease.Token == 0 {
			continue
		}
		streams, seqs, tokens = append(streams, lease.Stream), append(seqs, int64(lease.Sequence)), append(tokens, int64(lease.Token))
		dues, holds, index = append(dues, ss[i].Attempt.RetryAt), append(holds, holdOf(ss[i])), append(index, i)
	}
	if len(redo) > 0 {
		l.releaseWithRedeliveries(ctx, ss, redo, errs, index, []any{streams, seqs, tokens, dues, holds})
		return
	}
	if len(index) == 0 {
		return
	}
	ords, err := l.lockedQuery(ctx, distinctStreams(streams), l.sql.release, streams, seqs, tokens, dues, holds)
	settled(errs, index, ords, err, "release")
}

// Status implements driver.Log: from the event's row of the deliveries table when it has one, from
// its history when the stream's cursor has passed it, and otherwise pending since its creation.
func (l *EventLog) Status(ctx context.Context, stream string, seq uint64) (driver.DeliveryStatus, error) {
	if l == nil || l.db == nil {
		return driver.DeliveryStatus{}, errZeroEventLog
	}
	if seq > math.MaxInt64 {
		return driver.DeliveryStatus{}, driver.ErrNotFound
	}
	var (
		st                driver.DeliveryStatus
		created           int64
		passed, leased    bool
		leaseUntil        *time.Time
		streamToken       int64
		rowState          *int16
		rowAttempts       *int32
		rowNext, rowLast  *time.Time
		rowToken          *int64
		rowError          *string
		rowDelivered      *time.Time
		hFailed           *int64
		hLast, hDelivered *time.Time
		hError            *string
		hAbandoned        *bool
	)
	err := l.db.QueryRow(ctx, l.sql.status, stream, int64(seq)).Scan(&created, &passed, &leased, &leaseUntil, &streamToken,
		&rowState, &rowAttempts, &rowNext, &rowToken, &rowLast, &rowError, &rowDelivered,
		&hFailed, &hLast, &hError, &hDelivered, &hAbandoned)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.DeliveryStatus{}, driver.ErrNotFound
	}
	if err != nil {
		return driver.DeliveryStatus{}, fmt.Errorf("pgstore: event log status: %w", err)
	}
	switch {
	case rowState != nil:
		st.State, st.Attempts = driver.State(*rowState), int(*rowAttempts)
		st.LastAttempt, st.DeliveredAt, st.LastError = evlogTime(rowLast), evlogTime(rowDelivered), *rowError
		if st.State == driver.Pending {
			st.NextAttempt = evlogTime(rowNext)
			if *rowToken != 0 && *rowToken == streamToken && leaseUntil != nil {
				st.LeaseUntil = *leaseUntil
			}
		}
	case passed:
		st.State = driver.Delivered
		if hAbandoned != nil && *hAbandoned {
			st.State = driver.Abandoned
		}
		if hFailed != nil {
			st.Attempts = int(*hFailed)
		}
		if hError != nil {
			st.LastError = *hError
		}
		st.LastAttempt, st.DeliveredAt = evlogTime(hLast), evlogTime(hDelivered)
	default:
		st.State, st.NextAttempt = driver.Pending, time.Unix(created, 0)
		if leased && leaseUntil != nil {
			st.LeaseUntil = *leaseUntil
		}
	}
	return st, nil
}

// evlogTime turns a nullable timestamptz into a time, NULL into the zero time.
func evlogTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// Backlog implements driver.Backlogger: one statement over the streams' cursors, their rows of the
// deliveries table and the unnumbered events. A stream's Oldest is the creation of its lowest
// undelivered event. It reads every unnumbered event, so call it at a metrics collector's pace.
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
