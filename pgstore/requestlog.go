package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/svcplatform/conventions/requestlog"
)

// DefaultRequestLogTable is the table a RequestLogStore uses when RequestLogStoreOptions.Table is
// empty.
const DefaultRequestLogTable = "request_log"

// RequestLogStoreOptions configures a RequestLogStore and its migration. A nil
// *RequestLogStoreOptions and the zero value mean the defaults.
type RequestLogStoreOptions struct {
	// Schema holds the table. Default "": the table name is unqualified and resolves through the
	// connection's search_path.
	Schema string
	// Table is the table's name. Default DefaultRequestLogTable.
	Table string
}

func reqlogResolve(opts *RequestLogStoreOptions) RequestLogStoreOptions {
	var o RequestLogStoreOptions
	if opts != nil {
		o = *opts
	}
	if o.Table == "" {
		o.Table = DefaultRequestLogTable
	}
	return o
}

var errZeroRequestLogStore error = &notBuiltError{"pgstore: RequestLogStore not built with NewRequestLogStore"}

// reqlogColumns are the columns of an entry as Get and List read them.
const reqlogColumns = "request_id, at, key_id, environment, method, route, status, code, idempotency_key, replayed, version, latency_us"

// RequestLogStore is a requestlog.Store on PostgreSQL, one row per request in the table Migrate
// creates (pass it &RequestLogStoreOptions{}: the request log is migrated only when named). Each
// method is one statement: Insert writes a whole batch in one round trip (a multi-row INSERT from
// arrays), skipping an entry whose owner and request ID are stored already; List reads one owner's
// entries newest first through an index of the owner and the time; DeleteBefore removes the oldest
// expired rows, at most its limit, skipping rows another replica's retention is deleting.
//
// Times are timestamptz, which keeps microseconds, as requestlog.Log records them. Text that
// PostgreSQL cannot store (a NUL byte, invalid UTF-8), which only an entry handed to Log.Record could
// hold, is stored with U+FFFD in its place rather than fail its batch.
//
// A RequestLogStore is safe for concurrent use when its DB is (a pool is; a pgx.Conn or pgx.Tx is
// not). It never closes the DB. Its zero value is not usable: its methods return an error that wraps
// ErrNotBuilt. Call NewRequestLogStore.
type RequestLogStore struct {
	db                        DB
	insert, get, list, delete string
}

var _ requestlog.Store = (*RequestLogStore)(nil)

// NewRequestLogStore returns a store on db with opts (nil means the defaults). Run Migrate with the
// same opts (or MigrationSQL's SQL) first.
func NewRequestLogStore(db DB, opts *RequestLogStoreOptions) (*RequestLogStore, error) {
	if db == nil {
		return nil, errNoDB("NewRequestLogStore")
	}
	o := reqlogResolve(opts)
	t := qualify(o.Schema, o.Table)
	return &RequestLogStore{
		db: db,
		insert: `INSERT INTO ` + t + ` (owner, ` + reqlogColumns + `)
SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[],
    $8::smallint[], $9::text[], $10::text[], $11::boolean[], $12::text[], $13::bigint[])
ON CONFLICT (owner, request_id) DO NOTHING`,
		get: `SELECT ` + reqlogColumns + ` FROM ` + t + ` WHERE owner = $1 AND request_id = $2`,
		// Each filter is off at its zero value. The cursor is the position of the entry it names
		// (none, when the retention removed it: an empty page).
		list: `SELECT ` + reqlogColumns + ` FROM ` + t + `
WHERE owner = $1
  AND ($2::int = 0 OR status = $2) AND ($3::int = 0 OR status / 100 = $3)
  AND ($4::text = '' OR code = $4) AND ($5::text = '' OR key_id = $5) AND ($6::text = '' OR route = $6)
  AND ($7::timestamptz IS NULL OR at >= $7) AND ($8::timestamptz IS NULL OR at < $8)
  AND ($9::text = '' OR (at, request_id) < (SELECT c.at, c.request_id FROM ` + t + ` c WHERE c.owner = $1 AND c.request_id = $9))
ORDER BY at DESC, request_id DESC
LIMIT $10`,
		// SKIP LOCKED: replicas pruning at once delete different rows instead of queueing on the same.
		// Any expired rows, in no order: the BRIN time index finds them without sorting.
		delete: `DELETE FROM ` + t + ` WHERE (owner, request_id) IN (
    SELECT owner, request_id FROM ` + t + ` WHERE at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	}, nil
}

// pgText returns s as PostgreSQL's text can hold it: valid UTF-8 without NUL.
func pgText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// Insert implements requestlog.Store.
func (s *RequestLogStore) Insert(ctx context.Context, entries []requestlog.Entry) error {
	if s == nil || s.db == nil {
		return errZeroRequestLogStore
	}
	if len(entries) == 0 {
		return ctx.Err()
	}
	n := len(entries)
	// One backing array for the text columns: 9 of them.
	texts := make([]string, 9*n)
	col := func(i int) []string { return texts[i*n : (i+1)*n : (i+1)*n] }
	owners, ids, keys, envs, methods, routes, codes, idemKeys, versions := col(0), col(1), col(2), col(3), col(4), col(5), col(6), col(7), col(8)
	ats := make([]time.Time, n)
	statuses := make([]int16, n)
	replayed := make([]bool, n)
	latencies := make([]int64, n)
	for i := range entries {
		e := &entries[i]
		owners[i], ids[i], keys[i], envs[i], methods[i] = pgText(e.Owner), pgText(e.RequestID), pgText(e.KeyID), pgText(e.Environment), pgText(e.Method)
		routes[i], codes[i], idemKeys[i], versions[i] = pgText(e.Route), pgText(e.Code), pgText(e.IdempotencyKey), pgText(e.Version)
		ats[i], statuses[i], replayed[i], latencies[i] = e.At, int16(min(max(e.Status, 0), 999)), e.Replayed, e.Latency.Microseconds()
	}
	if _, err := s.db.Exec(ctx, s.insert, owners, ids, ats, keys, envs, methods, routes, statuses, codes, idemKeys, replayed,
		versions, latencies); err != nil {
		return fmt.Errorf("pgstore: insert %d request log entries: %w", n, err)
	}
	return nil
}

// scanEntry reads one row of reqlogColumns.
func scanEntry(row pgx.Row, owner string) (requestlog.Entry, error) {
	e := requestlog.Entry{Owner: owner}
	var (
		status    int16
		latencyUS int64
	)
	if err := row.Scan(&e.RequestID, &e.At, &e.KeyID, &e.Environment, &e.Method, &e.Route, &status, &e.Code,
		&e.IdempotencyKey, &e.Replayed, &e.Version, &latencyUS); err != nil {
		return requestlog.Entry{}, err
	}
	e.At = e.At.UTC()
	e.Status, e.Latency = int(status), time.Duration(latencyUS)*time.Microsecond
	return e, nil
}

// Get implements requestlog.Store.
func (s *RequestLogStore) Get(ctx context.Context, owner, requestID string) (requestlog.Entry, error) {
	if s == nil || s.db == nil {
		return requestlog.Entry{}, errZeroRequestLogStore
	}
	e, err := scanEntry(s.db.QueryRow(ctx, s.get, pgText(owner), pgText(requestID)), owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return requestlog.Entry{}, requestlog.ErrNotFound
	}
	if err != nil {
		return requestlog.Entry{}, fmt.Errorf("pgstore: get request log entry: %w", err)
	}
	return e, nil
}

// reqlogNullTime maps the zero time (no bound) to NULL.
func reqlogNullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// List implements requestlog.Store.
func (s *RequestLogStore) List(ctx context.Context, q requestlog.Query) ([]requestlog.Entry, bool, error) {
	if s == nil || s.db == nil {
		return nil, false, errZeroRequestLogStore
	}
	limit := max(q.Limit, 1)
	rows, err := s.db.Query(ctx, s.list, pgText(q.Owner), int32(min(max(q.Status, 0), 999)), int32(min(max(q.StatusClass, 0), 9)),
		pgText(q.Code), pgText(q.KeyID), pgText(q.Route), reqlogNullTime(q.Since), reqlogNullTime(q.Until), pgText(q.After), int64(limit)+1)
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: list request log: %w", err)
	}
	defer rows.Close()
	var out []requestlog.Entry
	for rows.Next() {
		e, err := scanEntry(rows, q.Owner)
		if err != nil {
			return nil, false, fmt.Errorf("pgstore: list request log: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("pgstore: list request log: %w", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// DeleteBefore implements requestlog.Store.
func (s *RequestLogStore) DeleteBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	if s == nil || s.db == nil {
		return 0, errZeroRequestLogStore
	}
	if limit <= 0 {
		return 0, ctx.Err()
	}
	tag, err := s.db.Exec(ctx, s.delete, before, int64(limit))
	if err != nil {
		return 0, fmt.Errorf("pgstore: delete request log entries: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
