package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svcplatform/conventions/idempotency/driver"
)

// DefaultIdempotencyTable is the table an IdempotencyStore uses when IdempotencyStoreOptions.Table is empty.
const DefaultIdempotencyTable = "idempotency_keys"

// IdempotencyStoreOptions configures an IdempotencyStore and its migration. A nil *IdempotencyStoreOptions and
// the zero value mean the defaults.
type IdempotencyStoreOptions struct {
	// Schema holds the table. Default "": the table name is unqualified and resolves through the
	// connection's search_path.
	Schema string
	// Table is the table's name. Default DefaultIdempotencyTable.
	Table string
}

// idemConfig is IdempotencyStoreOptions with the defaults applied and the names quoted.
type idemConfig struct {
	IdempotencyStoreOptions
	qualified  string // the table
	seq        string // the token sequence
	seqLiteral string // the token sequence as a string literal, for nextval
}

func idemResolve(opts *IdempotencyStoreOptions) idemConfig {
	var o idemConfig
	if opts != nil {
		o.IdempotencyStoreOptions = *opts
	}
	if o.Table == "" {
		o.Table = DefaultIdempotencyTable
	}
	o.qualified = qualify(o.Schema, o.Table)
	o.seq = qualify(o.Schema, o.Table+"_token_seq")
	o.seqLiteral = quoteLiteral(o.seq)
	return o
}

// idemMaxAttempts bounds Claim's retries. A retry happens only when another transaction changed the
// row between the statement's snapshot and its row lock, so each one follows real progress elsewhere;
// the bound turns a pathological storm into an error (a 503) instead of a spin.
const idemMaxAttempts = 16

// ErrClaimContention is returned by IdempotencyStore.Claim when the key's row kept changing under
// it for every attempt. The middleware answers 503 with Retry-After; the handler does not run.
var ErrClaimContention = errors.New("pgstore: idempotency claim kept racing concurrent changes")

// IdempotencyStore is an driver.Store on PostgreSQL, one row per (scope, key) in the table that
// Migrate creates. Replicas that share the database share the records.
//
// Claim is one statement, one round trip, whatever it finds. Its parts, combined in a CTE:
//
//	INSERT … SELECT … WHERE NOT EXISTS (the row) ON CONFLICT (scope, key) DO NOTHING RETURNING token
//	UPDATE … SET token = CASE take-over THEN nextval(…) …, suspected = NOT take-over, …
//	         WHERE the row is dead (retention over), or in flight under an ended lease with the same
//	         fingerprint … RETURNING token, suspected
//	SELECT the row, when neither wrote
//
// An ended lease is not taken over at once: its owner may only have been cut off from the database
// for longer than the lease. The first claim that finds it marks the row suspected and extends its
// lease by one lease (InFlight, no new token); only a claim after that extra lease takes the row over
// under a new token. Renew clears the mark, and a row whose retention ended is taken regardless.
//
// The decision to run a handler, and the decision to mark, comes only from a write that succeeded (the
// unique index for a new key; for a mark or a take-over, the row lock, under which PostgreSQL
// re-checks the UPDATE's condition, and recomputes its new values, on the newest row version), never
// from a read followed by a write: of racing claims on a lapsed lease exactly one marks it, and of
// racing claims on a suspected one exactly one takes it over. A replay or an in-flight answer is a
// plain index read: no row lock, no WAL, no new token. When the read's snapshot turns out older than
// the row a racing transaction just committed, Claim runs the statement again (bounded; see
// ErrClaimContention). Complete, Renew and Release are single UPDATE/DELETE statements that match only
// the fencing token's in-flight row.
//
// Retention: expired rows are invisible to the store at once; RunCleanup, which the application
// starts once per process, deletes them in short, bounded batches (DeleteExpired is one batch). There
// is no per-scope quota (no driver.ErrQuotaExceeded) on PostgreSQL, on purpose: enforcing one
// costs every claim either a count of the scope's live rows (an index range scan of up to the quota,
// per request) or an update of a per-scope counter row, which serializes every claim of a scope on
// one hot row. The capacity at stake is disk, bounded by retention and RunCleanup, not memory shared
// with other tenants; a tenant that sends too many mutating requests is a case for per-tenant rate
// limiting in front of the handler.
//
// Every method honours its context's deadline and cancellation, also against a stalled server or
// network (pgx interrupts the connection), so the middleware's StoreTimeout holds.
//
// Times are stored as timestamptz, to the microsecond; fencing tokens come from a sequence, so they
// increase and are never reused. Scopes and keys are text, so they must be valid UTF-8 without NUL
// bytes (the middleware's keys are visible ASCII and its default scopes hex); others are refused with
// an error. The store works on a pool, a connection or a transaction; for the
// middleware's transactional mode, where the claim and the stored response commit with the
// handler's own writes, use Transactor. Transactions must be READ COMMITTED (PostgreSQL's default).
//
// An IdempotencyStore is safe for concurrent use when its DB is (a pool is; a pgx.Conn or pgx.Tx is
// not). It never closes the DB. Its zero value is not usable: its methods (RunCleanup included)
// return an error that wraps ErrNotBuilt. Call NewIdempotencyStore.
type IdempotencyStore struct {
	db  DB
	cfg idemConfig
	sql idemSQL
}

var _ driver.Store = (*IdempotencyStore)(nil)

// idemSQL holds the statements, built once per table name.
type idemSQL struct {
	claim, claimLocked, complete, renew, remark, release, lookup, deleteExpired string
}

// Row kinds of the claim statements. The numbers are written into the SQL of idemBuildSQL.
const (
	idemKindClaimed   = 1 // ins inserted, or upd took the row over: Claimed
	idemKindRow       = 2 // neither wrote: the row as the statement's snapshot saw it
	idemKindMarked    = 3 // upd marked a lapsed lease suspected and extended it: InFlight
	idemKindBusySame  = 4 // transactional: a request with this fingerprint holds the key
	idemKindBusyOther = 5 // transactional: a request with another fingerprint holds the key
)

func idemBuildSQL(cfg idemConfig) idemSQL {
	t := cfg.qualified
	// The claim: $1 scope, $2 key, $3 fingerprint, $4 now, $5 lease_until, $6 expires_at.
	//   - ins inserts the row when the statement's snapshot has none (a row committed meanwhile makes
	//     it DO NOTHING, after waiting for the inserting transaction to end);
	//   - upd writes an existing row whose retention is over, or whose lease ended with the same
	//     fingerprint. It takes the row over (new token, not suspected) when the retention is over or
	//     the row was already suspected, and otherwise only marks it (same token, suspected, lease
	//     extended to $5). PostgreSQL re-checks the WHERE on the newest row version after locking it
	//     and computes the SET from that version, so of racing claims only the first marks, the others
	//     find the extended lease live; and of racing take-overs only the first wins. A mark or a
	//     take-over is thus never decided by a read;
	//   - otherwise the last SELECT reads the row, with no lock and no write: a replay or an
	//     in-flight answer is a plain index read.
	// The read sees the statement's snapshot, which can be older than the version ins or upd met;
	// Claim checks that the answer is consistent and runs the statement again when it is not.
	// A new token is drawn only for a row taken (CASE evaluates nextval only on that branch), so marks
	// and replays never touch the sequence. A mark keeps the retention the owner's claim set.
	const claim = `WITH %[7]sins AS (
	INSERT INTO %[1]s (scope, key, fingerprint, lease_until, expires_at)
	SELECT $1, $2, $3::bytea, $5::timestamptz, $6::timestamptz %[3]s
	WHERE %[4]s NOT EXISTS (SELECT 1 FROM %[1]s WHERE scope = $1 AND key = $2)
	ON CONFLICT (scope, key) DO NOTHING
	RETURNING token
), upd AS (
	UPDATE %[1]s AS r
	SET token = CASE WHEN r.expires_at <= $4 OR r.suspected THEN nextval(%[2]s) ELSE r.token END,
		expires_at = CASE WHEN r.expires_at <= $4 OR r.suspected THEN $6::timestamptz ELSE r.expires_at END,
		suspected = r.expires_at > $4 AND NOT r.suspected,
		fingerprint = $3, completed = false, lease_until = $5, status = NULL, header = NULL, body = NULL
	WHERE r.scope = $1 AND r.key = $2 %[5]s
		AND (r.expires_at <= $4 OR (NOT r.completed AND r.lease_until <= $4 AND r.fingerprint = $3))
	RETURNING r.token, r.suspected
)
SELECT 1, token, NULL::bytea, NULL::boolean, NULL::timestamptz, NULL::timestamptz, NULL::integer, NULL::jsonb, NULL::bytea FROM ins
UNION ALL
SELECT CASE WHEN suspected THEN 3 ELSE 1 END, token, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM upd
UNION ALL
SELECT 2, r.token, r.fingerprint, r.completed, r.lease_until, r.expires_at, r.status, r.header, r.body
FROM %[1]s AS r
WHERE r.scope = $1 AND r.key = $2 AND NOT EXISTS (SELECT 1 FROM ins) AND NOT EXISTS (SELECT 1 FROM upd)
%[6]s`
	plain := fmt.Sprintf(claim, t, cfg.seqLiteral, "", "", "", "", "")
	// The transactional claim first tries two transaction-scoped advisory locks: $8 on (key,
	// fingerprint), then $7 on the key, and writes only when it holds both. A request that owns a key
	// in transactional mode therefore holds both locks until its transaction ends, so a duplicate
	// answers at once instead of queueing behind the uncommitted row (holding a connection while it
	// waits), and knows what it is: when $8 is taken, a request with its own fingerprint holds the
	// key (InFlight: 409; or that request just lost to another, see Transactor); when $8 was free but
	// $7 is taken, the holder has another fingerprint (422).
	// CASE tries $7 only when $8 was granted, and MATERIALIZED runs the locks once per statement.
	locked := fmt.Sprintf(claim, t, cfg.seqLiteral, "FROM lk", "lk.busy = 0 AND", "AND (SELECT busy FROM lk) = 0",
		"UNION ALL\nSELECT busy, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM lk WHERE busy <> 0",
		`lk AS MATERIALIZED (SELECT CASE WHEN NOT pg_try_advisory_xact_lock($8) THEN 4
	WHEN NOT pg_try_advisory_xact_lock($7) THEN 5 ELSE 0 END AS busy
), `)
	return idemSQL{
		claim:       plain,
		claimLocked: locked,
		complete: `UPDATE ` + t + ` SET completed = true, status = $4, header = $5, body = $6, expires_at = $7
WHERE scope = $1 AND key = $2 AND token = $3 AND NOT completed`,
		// A renewal proves the owner alive: it clears a mark, so a later lapse needs a new one.
		renew: `UPDATE ` + t + ` SET lease_until = $4, suspected = false
WHERE scope = $1 AND key = $2 AND token = $3 AND NOT completed`,
		// The transactional claim's mark, made again outside a transaction that rolled back: it
		// re-checks everything the claim's UPDATE did, under the row lock, for the token it marked.
		remark: `UPDATE ` + t + ` SET suspected = true, lease_until = $5
WHERE scope = $1 AND key = $2 AND token = $3 AND NOT completed AND NOT suspected AND lease_until <= $4 AND expires_at > $4`,
		release: `DELETE FROM ` + t + ` WHERE scope = $1 AND key = $2 AND token = $3 AND NOT completed`,
		lookup: `SELECT fingerprint, token, completed, lease_until, expires_at, status, header, body
FROM ` + t + ` WHERE scope = $1 AND key = $2 AND expires_at > $3`,
		// SKIP LOCKED: a row some claim is deciding on right now is left for the next batch.
		deleteExpired: `DELETE FROM ` + t + ` WHERE (scope, key) IN (
	SELECT scope, key FROM ` + t + ` WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	}
}

// NewIdempotencyStore returns a store on db, which the caller owns (a *pgxpool.Pool, *pgx.Conn or
// pgx.Tx). The table must exist: run Migrate with the same opts (or MigrationSQL's SQL) first. It
// fails when db is nil.
func NewIdempotencyStore(db DB, opts *IdempotencyStoreOptions) (*IdempotencyStore, error) {
	if db == nil {
		return nil, errNoDB("NewIdempotencyStore")
	}
	cfg := idemResolve(opts)
	return &IdempotencyStore{db: db, cfg: cfg, sql: idemBuildSQL(cfg)}, nil
}

// idemRow is one row the claim statement returns.
type idemRow struct {
	kind       int32
	token      *int64
	fp         []byte
	completed  *bool
	leaseUntil *time.Time
	expiresAt  *time.Time
	status     *int32
	header     []byte
	body       []byte
}

// Claim implements driver.Store in one statement (see IdempotencyStore).
func (s *IdempotencyStore) Claim(ctx context.Context, key driver.Key, fp driver.Fingerprint, now, leaseUntil, expiresAt time.Time) (driver.Claim, error) {
	if s == nil || s.db == nil {
		return driver.Claim{}, errZeroIdempotencyStore
	}
	c, _, err := s.claim(ctx, s.sql.claim, nil, key, fp, now, leaseUntil, expiresAt)
	return c, err
}

// claim runs a claim statement until its answer is consistent. locks, when not nil, are the advisory
// lock keys of the transactional variant: the key's, then the fingerprint's. marked is the token of
// the row the claim marked suspected, 0 when it did not mark one.
func (s *IdempotencyStore) claim(ctx context.Context, sql string, locks *[2]int64, key driver.Key, fp driver.Fingerprint, now, leaseUntil, expiresAt time.Time) (c driver.Claim, marked int64, err error) {
	args := []any{key.Scope, key.Key, fp[:], now, leaseUntil, expiresAt}
	if locks != nil {
		args = append(args, locks[0], locks[1])
	}
	// PostgreSQL keeps microseconds; compare the re-read row the way the statement compared it.
	pgNow := now.Truncate(time.Microsecond)
	for range idemMaxAttempts {
		c, marked, settled, busy, err := s.claimOnce(ctx, sql, args, fp, pgNow, leaseUntil)
		switch {
		case err != nil:
			return driver.Claim{}, 0, err
		case settled:
			return c, marked, nil
		case busy == idemKindBusySame:
			// The transactional variant: an open transaction of a request with this fingerprint holds
			// the key, and no committed row answers for it. That row is uncommitted, so its lease is
			// not visible: the lease this claim asked for is the retry hint.
			return driver.Claim{Status: driver.InFlight, Fingerprint: fp, LeaseUntil: leaseUntil}, 0, nil
		case busy == idemKindBusyOther:
			// The holder's fingerprint differs from ours but is not visible either: report one that
			// merely differs, which is all the caller needs to answer 422.
			return driver.Claim{Status: driver.InFlight, Fingerprint: idemOtherFingerprint(fp), LeaseUntil: leaseUntil}, 0, nil
		}
		// Otherwise the row another transaction just committed is newer than our snapshot: again.
	}
	return driver.Claim{}, 0, ErrClaimContention
}

// idemOtherFingerprint returns a fingerprint that differs from fp (its first byte inverted), for a
// record whose real fingerprint is known to differ but cannot be read.
func idemOtherFingerprint(fp driver.Fingerprint) driver.Fingerprint {
	fp[0] = ^fp[0]
	return fp
}

// claimOnce runs the claim statement once. It returns settled with the answer when a row decides
// it, and busy (a kind) when the transactional variant found the key's advisory locks taken. The
// statement returns at most two rows: the claim, the mark or the row it read, and the busy marker. A
// committed row that answers (a stored response to replay, a live lease, another fingerprint) wins
// over the marker, so concurrent replays in transactional mode never answer 409 to each other.
func (s *IdempotencyStore) claimOnce(ctx context.Context, sql string, args []any, fp driver.Fingerprint, now, leaseUntil time.Time) (c driver.Claim, marked int64, settled bool, busy int32, err error) {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return c, 0, false, 0, fmt.Errorf("pgstore: idempotency claim: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r idemRow
		if err := rows.Scan(&r.kind, &r.token, &r.fp, &r.completed, &r.leaseUntil, &r.expiresAt, &r.status, &r.header, &r.body); err != nil {
			return c, 0, false, 0, fmt.Errorf("pgstore: idempotency claim: %w", err)
		}
		if r.kind == idemKindBusySame || r.kind == idemKindBusyOther {
			busy = r.kind
			continue
		}
		if settled {
			continue
		}
		if c, settled, err = idemDecide(r, fp, now, leaseUntil); err != nil {
			return driver.Claim{}, 0, false, 0, err
		}
		if r.kind == idemKindMarked {
			marked = *r.token
		}
	}
	if err := rows.Err(); err != nil {
		return driver.Claim{}, 0, false, 0, fmt.Errorf("pgstore: idempotency claim: %w", err)
	}
	return c, marked, settled, busy, nil
}

// idemDecide turns a claim row into a Claim. settled is false when the row read is one the upsert
// would have written (so it changed under the statement) and the statement must run again.
func idemDecide(r idemRow, fp driver.Fingerprint, now, leaseUntil time.Time) (c driver.Claim, settled bool, err error) {
	switch r.kind {
	case idemKindClaimed, idemKindMarked:
		if r.token == nil || *r.token <= 0 {
			return c, false, errors.New("pgstore: idempotency claim: no token returned")
		}
		if r.kind == idemKindMarked {
			// The owner keeps its token; the caller only learns the extra lease's end.
			return driver.Claim{Status: driver.InFlight, Fingerprint: fp, LeaseUntil: leaseUntil}, true, nil
		}
		return driver.Claim{Status: driver.Claimed, Token: uint64(*r.token), Fingerprint: fp, LeaseUntil: leaseUntil}, true, nil
	case idemKindRow:
	default:
		return c, false, fmt.Errorf("pgstore: idempotency claim: unexpected row kind %d", r.kind)
	}
	if r.completed == nil || r.leaseUntil == nil || r.expiresAt == nil || len(r.fp) != len(c.Fingerprint) {
		return c, false, errors.New("pgstore: idempotency claim: malformed row")
	}
	if !r.expiresAt.After(now) {
		return c, false, nil
	}
	copy(c.Fingerprint[:], r.fp)
	c.LeaseUntil = *r.leaseUntil
	if c.Fingerprint != fp {
		c.Status = driver.InFlight
		if *r.completed {
			c.Status = driver.Completed
		}
		return c, true, nil
	}
	if *r.completed {
		resp, err := idemResponse(r.status, r.header, r.body)
		if err != nil {
			return c, false, err
		}
		c.Status, c.Response = driver.Completed, resp
		return c, true, nil
	}
	if !r.leaseUntil.After(now) {
		return c, false, nil
	}
	c.Status = driver.InFlight
	return c, true, nil
}

func idemResponse(status *int32, header, body []byte) (*driver.Response, error) {
	if status == nil {
		return nil, errors.New("pgstore: idempotency: completed row without a status")
	}
	resp := &driver.Response{Status: int(*status), Body: body}
	if header != nil {
		if err := json.Unmarshal(header, &resp.Header); err != nil {
			return nil, fmt.Errorf("pgstore: idempotency: decode stored header: %w", err)
		}
	}
	return resp, nil
}

// Renew implements driver.Store.
func (s *IdempotencyStore) Renew(ctx context.Context, key driver.Key, token uint64, leaseUntil time.Time) error {
	if s == nil || s.db == nil {
		return errZeroIdempotencyStore
	}
	return s.exec(ctx, "renew", s.sql.renew, key.Scope, key.Key, int64(token), leaseUntil)
}

// Complete implements driver.Store: one UPDATE that matches only the token's in-flight row.
func (s *IdempotencyStore) Complete(ctx context.Context, key driver.Key, token uint64, resp driver.Response, expiresAt time.Time) error {
	if s == nil || s.db == nil {
		return errZeroIdempotencyStore
	}
	var header []byte // NULL keeps a nil header nil
	if resp.Header != nil {
		var err error
		if header, err = json.Marshal(resp.Header); err != nil {
			return fmt.Errorf("pgstore: idempotency complete: encode header: %w", err)
		}
	}
	return s.exec(ctx, "complete", s.sql.complete, key.Scope, key.Key, int64(token), int32(resp.Status), header, resp.Body, expiresAt)
}

// Release implements driver.Store.
func (s *IdempotencyStore) Release(ctx context.Context, key driver.Key, token uint64) error {
	if s == nil || s.db == nil {
		return errZeroIdempotencyStore
	}
	return s.exec(ctx, "release", s.sql.release, key.Scope, key.Key, int64(token))
}

// exec runs a statement guarded by the token: no row changed means the token lost the key.
func (s *IdempotencyStore) exec(ctx context.Context, op, sql string, args ...any) error {
	tag, err := s.db.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("pgstore: idempotency %s: %w", op, err)
	}
	if tag.RowsAffected() == 0 {
		return driver.ErrLeaseLost
	}
	return nil
}

// Lookup implements driver.Store.
func (s *IdempotencyStore) Lookup(ctx context.Context, key driver.Key, now time.Time) (driver.Record, error) {
	if s == nil || s.db == nil {
		return driver.Record{}, errZeroIdempotencyStore
	}
	var (
		fp                    []byte
		token                 int64
		completed             bool
		leaseUntil, expiresAt time.Time
		status                *int32
		header, body          []byte
	)
	err := s.db.QueryRow(ctx, s.sql.lookup, key.Scope, key.Key, now).
		Scan(&fp, &token, &completed, &leaseUntil, &expiresAt, &status, &header, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Record{}, driver.ErrNotFound
	}
	if err != nil {
		return driver.Record{}, fmt.Errorf("pgstore: idempotency lookup: %w", err)
	}
	rec := driver.Record{Status: driver.InFlight, Token: uint64(token), LeaseUntil: leaseUntil, ExpiresAt: expiresAt}
	if len(fp) != len(rec.Fingerprint) {
		return driver.Record{}, errors.New("pgstore: idempotency lookup: stored fingerprint has the wrong length")
	}
	copy(rec.Fingerprint[:], fp)
	if completed {
		rec.Status = driver.Completed
		if rec.Response, err = idemResponse(status, header, body); err != nil {
			return driver.Record{}, err
		}
	}
	return rec, nil
}

// DeleteExpired removes up to limit rows whose retention ended at or before now and reports how many
// it removed: one batch of RunCleanup, for applications that schedule retention themselves (repeat
// while it returns limit to drain a backlog). Bounding the batch keeps each DELETE short, so it never
// holds many row locks or a long transaction. Expired rows are already invisible to the store; this
// only frees the space. limit must be positive.
func (s *IdempotencyStore) DeleteExpired(ctx context.Context, now time.Time, limit int) (int64, error) {
	if s == nil || s.db == nil {
		return 0, errZeroIdempotencyStore
	}
	if limit <= 0 {
		return 0, fmt.Errorf("pgstore: DeleteExpired limit must be positive, got %d", limit)
	}
	tag, err := s.db.Exec(ctx, s.sql.deleteExpired, now, limit)
	if err != nil {
		return 0, fmt.Errorf("pgstore: idempotency delete expired: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Backend reports "postgresql", for idempotency's Hooks (driver.Backender).
func (s *IdempotencyStore) Backend() string { return "postgresql" }
