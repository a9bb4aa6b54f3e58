package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svcplatform/conventions/idempotency/driver"
)

// Transactor is the idempotency middleware's transactional mode on PostgreSQL
// (idempotency.Options.Transactor). For each request the middleware governs, it begins one READ
// COMMITTED transaction; the claim, the handler's own writes and the stored response all run in it,
// and the response reaches the client only after the commit. So:
//
//   - the transaction commits: the handler's writes and the response are stored together, and every
//     retry replays that response;
//   - it rolls back (the handler panicked, its SQL failed, the commit failed, the process died, the
//     connection broke): nothing happened, no record is left, and a retry runs the handler again
//     at once; there is no lease to wait out and no window where the work is done but the response
//     lost.
//
// A client that disconnects mid-handler does not roll the request back: the middleware runs the
// transaction under a context its disconnect does not cancel, so the handler finishes, the commit
// stores its writes and response together, and the retry replays the response.
//
// The handler finds the transaction with TxFromContext and must do its writes through it (not through
// the pool, whose writes would commit on their own). A statement that fails aborts the whole
// transaction: use a savepoint (tx.Begin) around a statement that may fail and that the handler
// recovers from. Otherwise the handler's failure — a statement of its own left the transaction
// aborted (the server's transaction status says so when the response is about to be stored), or its
// writes broke a constraint checked at the commit — rolls everything back and InTx's error wraps
// driver.ErrTxAborted: the client gets the opaque 500 and the key stays free, so a corrected
// request with the same key runs. A failure of the library's own statements or of the connection is
// the store's: 503 with Retry-After.
//
// A duplicate that arrives while the first request's transaction is open answers at once, without
// queueing behind the uncommitted row (holding a connection while it waits). The claim first tries
// two transaction-scoped advisory locks (pg_try_advisory_xact_lock), one on the key and the request's
// fingerprint, then one on the key (64 bits of a SHA-256 over the table, scope and key, and the
// fingerprint), and writes only when it holds both, until its transaction ends. So a duplicate with
// the same payload finds the first lock taken and gets 409; one with another payload gets the first
// lock but not the second, and gets 422, as it would once the first request committed. Its Claim
// reports a Fingerprint that is not the record's (uncommitted, so not visible) but merely differs
// from the caller's. A committed record always answers before the locks do. One race answers 409
// where 422 or a claim would be right: a request that lost also holds the lock on its own fingerprint
// until its (short) transaction ends, so another request with that payload arriving meanwhile, with
// no committed record to answer it, gets 409; its retry gets the right answer. Applications that take
// advisory locks of their own share that key space; a collision only makes one request answer 409 or
// 422.
//
// The claim marks and takes over ended leases as IdempotencyStore.Claim does (rows that replicas in
// store mode left behind). A mark outlives the transaction: when fn returns an error, InTx rolls back
// and then makes the mark again in a statement of its own, so that retries can take the key over
// after the extra lease even though the middleware rolls back every request it answers 409.
//
// On a *pgxpool.Pool the transaction is pipelined: BEGIN travels with the claim, a savepoint with the
// first statement in it, and the stored response with the COMMIT, so a request costs two round trips
// plus its handler's own statements (TestIdempotencyRoundTrips pins it). The semantics are
// PostgreSQL's: a failure of anything queued is the error of the statement it travelled with, and a
// completion that would match no row fails the commit instead of committing without it. The
// transaction is a pgx.Tx in every respect, escape hatches included: Conn and LargeObjects send what
// is queued before they hand out the connection, and the transaction queues nothing after that, so
// work done through them runs inside the transaction (and the savepoint it is in) and is rolled
// back with it; a statement Prepare creates is deallocated when the transaction ends, so the pool's
// next user never inherits it. A SET is PostgreSQL's: rolled back with the transaction, kept on the
// pooled connection when it commits; use SET LOCAL for a setting of the request's own.
//
// Each request holds one connection from the DB for as long as its handler runs; size the pool for
// the number of mutating requests in flight. Records written in transactional mode are ordinary rows
// of the idempotency table, so replicas in either mode, and DeleteExpired, share them.
//
// A Transactor is safe for concurrent use when its DB is (a pool is). Its zero value is not usable:
// its InTx returns an error that wraps ErrNotBuilt without calling fn. Call NewTransactor.
type Transactor struct {
	db    DB
	store *IdempotencyStore
}

var _ driver.Transactor = (*Transactor)(nil)

// NewTransactor returns the transactional mode on db (typically a *pgxpool.Pool), with the records in
// the idempotency table opts names (nil means the defaults, as for NewIdempotencyStore). A nil db is
// an error.
func NewTransactor(db DB, opts *IdempotencyStoreOptions) (*Transactor, error) {
	if db == nil {
		return nil, errNoDB("NewTransactor")
	}
	store, err := NewIdempotencyStore(db, opts)
	if err != nil {
		return nil, err
	}
	return &Transactor{db: db, store: store}, nil
}

// idemTxKey is the context key of the request's transaction.
type idemTxKey struct{}

// TxFromContext returns the transaction that Transactor began for the request whose context ctx is
// (or derives from), and false outside transactional mode. The transaction is the handler's to use
// and not to end: the middleware commits or rolls it back. It is not safe for concurrent use.
func TxFromContext(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := ctx.Value(idemTxKey{}).(pgx.Tx)
	return tx, ok
}

// idemTxBeginner is what pools and connections offer to choose the isolation level.
type idemTxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// InTx implements driver.Transactor: it begins a transaction, runs fn with a context carrying it
// (see TxFromContext) and a Store bound to it, and commits when fn returns nil. Otherwise, or when fn
// panics, it rolls back. An error of the commit means nothing was stored (or, when the connection
// broke during the commit, that the outcome is unknown: either way a retry is safe, since it replays
// what committed or runs what did not).
func (t *Transactor) InTx(ctx context.Context, fn func(ctx context.Context, store driver.Store) error) error {
	if t == nil || t.db == nil {
		return errZeroTransactor
	}
	var (
		tx  pgx.Tx
		err error
	)
	// The claim's re-read relies on each statement seeing fresh data: pin READ COMMITTED even where
	// the server's default isolation is stricter.
	switch db := t.db.(type) {
	case *pgxpool.Pool:
		// On a pool, BEGIN travels with the claim, and the completion with the COMMIT (pipeTx).
		tx, err = beginPipeTx(ctx, db, "BEGIN ISOLATION LEVEL READ COMMITTED")
	case idemTxBeginner:
		tx, err = db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	default:
		tx, err = t.db.Begin(ctx)
	}
	if err != nil {
		return fmt.Errorf("pgstore: idempotency transaction: begin: %w", err)
	}
	// Rolls back on every path but a successful commit, a panic in fn included; the client may have
	// gone, but the rollback must still reach the server.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	store := &idemTxStore{IdempotencyStore: t.store.withDB(tx), table: t.store.cfg.qualified}
	if err := fn(context.WithValue(ctx, idemTxKey{}, tx), store); err != nil {
		if store.mark != nil {
			// The claim marked a lapsed lease, a write the rollback undoes; and the middleware rolls
			// back every request it does not run, so in this mode no claim would ever get past the
			// mark. Make it again on its own after the rollback, which releases the row lock and the
			// connection (this never holds two). If that fails, the next claim marks instead.
			_ = tx.Rollback(context.WithoutCancel(ctx))
			_, _ = t.db.Exec(ctx, t.store.sql.remark, store.mark...)
		}
		return err
	}
	// A commit cancelled half-way has an unknown outcome; finish it even if the client left.
	if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
		if handlerAbortedCommit(err) {
			return fmt.Errorf("pgstore: idempotency transaction: commit: %w: %w", driver.ErrTxAborted, err)
		}
		return fmt.Errorf("pgstore: idempotency transaction: commit: %w", err)
	}
	return nil
}

// handlerAbortedCommit reports whether a failed COMMIT failed because of fn's own work rather than
// the database's or the network's: the server answered that the transaction had been aborted
// before (a statement failed and fn went on), or that a constraint checked at the commit (a
// deferred one) is broken. The library's own statements never defer a constraint, and one that
// failed returned its error to fn. A serialization failure or a deadlock (class 40) is not fn's: a
// retry may succeed.
func handlerAbortedCommit(err error) bool {
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && strings.HasPrefix(pe.Code, "23") // integrity_constraint_violation
}

// txAborted reports whether tx's transaction is aborted on the server — a statement failed in it
// and no ROLLBACK TO SAVEPOINT followed — as the server's last ReadyForQuery said.
func txAborted(tx DB) bool {
	var conn *pgx.Conn
	switch tx := tx.(type) {
	case *pipeTx: // not tx.Conn(), which would send the queue and end the pipelining
		conn = tx.conn.Conn()
	case *pipeSavepoint: // a Transactor built on a request's own transaction
		conn = tx.tx.conn.Conn()
	case pgx.Tx:
		conn = tx.Conn()
	}
	return conn != nil && conn.PgConn().TxStatus() == 'E'
}

// withDB returns a copy of the store that runs on db, sharing the built SQL.
func (s *IdempotencyStore) withDB(db DB) *IdempotencyStore {
	c := *s
	c.db = db
	return &c
}

// idemTxStore is the Store InTx hands to the middleware: the ordinary statements on the transaction,
// with the claim that takes the key's advisory locks first.
type idemTxStore struct {
	*IdempotencyStore
	table string
	mark  []any // the arguments of the remark statement, once a claim marked a row
}

// Claim implements driver.Store inside the transaction. A key whose advisory locks another open
// transaction holds is InFlight, with leaseUntil as the hint of when to retry, and with a Fingerprint
// other than fp when the holder's request has another fingerprint.
func (s *idemTxStore) Claim(ctx context.Context, key driver.Key, fp driver.Fingerprint, now, leaseUntil, expiresAt time.Time) (driver.Claim, error) {
	locks := [2]int64{idemLockKey(s.table, key, nil), idemLockKey(s.table, key, fp[:])}
	c, marked, err := s.claim(ctx, s.sql.claimLocked, &locks, key, fp, now, leaseUntil, expiresAt)
	if marked != 0 {
		s.mark = []any{key.Scope, key.Key, marked, now, leaseUntil}
	}
	return c, err
}

// Complete implements driver.Store inside the transaction. On a pipelined transaction the
// completion waits to travel with the COMMIT, in one round trip; a completion that matches no row then
// fails on the server and the commit rolls back (see pipelinedCompletion). Elsewhere it runs at once.
//
// The claim succeeded and only the handler has used the transaction since, so a transaction found
// aborted here was aborted by the handler's own statements: Complete then sends nothing and returns
// an error wrapping driver.ErrTxAborted (the middleware answers the opaque 500 and the rollback
// leaves the key free) instead of a statement that would fail as the store's own.
func (s *idemTxStore) Complete(ctx context.Context, key driver.Key, token uint64, resp driver.Response, expiresAt time.Time) error {
	if txAborted(s.db) {
		return fmt.Errorf("pgstore: idempotency complete: %w", driver.ErrTxAborted)
	}
	pt, ok := s.db.(*pipeTx)
	if !ok {
		return s.IdempotencyStore.Complete(ctx, key, token, resp, expiresAt)
	}
	var header []byte
	if resp.Header != nil {
		var err error
		if header, err = json.Marshal(resp.Header); err != nil {
			return fmt.Errorf("pgstore: idempotency complete: encode header: %w", err)
		}
	}
	return pt.queue(ctx, queued{sql: pipelinedCompletion(s.sql.complete), mapErr: completionLost,
		args: []any{key.Scope, key.Key, int64(token), int32(resp.Status), header, resp.Body, expiresAt}})
}

// idemLockKey is an advisory lock key of a record: 64 bits of a SHA-256 over the table and the
// length-prefixed scope and key, followed by fp for the lock on the key and a fingerprint (nil for
// the key's own). Distinct records (and the two locks of one) hash distinct inputs, and a client cannot aim a key at another's lock; a chance
// collision (2^-64) only gives one request a 409 or a 422.
func idemLockKey(table string, key driver.Key, fp []byte) int64 {
	h := sha256.New()
	var n [8]byte
	for _, part := range []string{table, key.Scope, key.Key} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	h.Write(fp) // fixed length, after length-prefixed parts: no ambiguity
	var sum [sha256.Size]byte
	return int64(binary.BigEndian.Uint64(h.Sum(sum[:0])))
}
