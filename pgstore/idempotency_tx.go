package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svcplatform/conventions/idempotency"
)

// Transactor is the idempotency middleware's transactional mode on PostgreSQL
// (idempotency.Options.Transactor). For each request the middleware governs, it begins one READ
// COMMITTED transaction; the claim, the handler's own writes and the stored response all run in it,
// and the response reaches the client only after the commit. So:
//
//   - the transaction commits: the handler's writes and the response are stored together, and every
//     retry replays that response;
//   - it rolls back (the handler panicked, the commit failed, the process died, the connection
//     broke): nothing happened, no record is left, and a retry runs the handler again at once;
//     there is no lease to wait out and no window where the work is done but the response lost.
//
// The handler finds the transaction with TxFromContext and must do its writes through it (not through
// the pool, whose writes would commit on their own). A statement that fails aborts the whole
// transaction: use a savepoint (tx.Begin) around a statement that may fail and that the handler
// recovers from, or the request ends in a 503 with nothing committed.
//
// A duplicate that arrives while the first request's transaction is open gets 409 at once: the claim
// first takes a transaction-scoped advisory lock on the key (pg_try_advisory_xact_lock, 64 bits of a
// SHA-256 of table, scope and key), so it never queues behind the uncommitted row, holding a
// connection while it waits. Applications that take advisory locks of their own share that key space;
// a collision only makes one request answer 409.
//
// Each request holds one connection from the DB for as long as its handler runs; size the pool for
// the number of mutating requests in flight. Records written in transactional mode are ordinary rows
// of the idempotency table, so replicas in either mode, and DeleteExpired, share them.
//
// A Transactor is safe for concurrent use when its DB is (a pool is). Its zero value is not usable:
// call NewTransactor.
type Transactor struct {
	db    DB
	store *IdempotencyStore
}

var _ idempotency.Transactor = (*Transactor)(nil)

// NewTransactor returns the transactional mode on db (typically a *pgxpool.Pool), with the records in
// the idempotency table opts names (nil means the defaults, as for NewIdempotencyStore). It panics
// when db is nil.
func NewTransactor(db DB, opts *IdempotencyOptions) *Transactor {
	if db == nil {
		panic("pgstore: NewTransactor needs a DB")
	}
	return &Transactor{db: db, store: NewIdempotencyStore(db, opts)}
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

// InTx implements idempotency.Transactor: it begins a transaction, runs fn with a context carrying it
// (see TxFromContext) and a Store bound to it, and commits when fn returns nil. Otherwise, or when fn
// panics, it rolls back. An error of the commit means nothing was stored (or, when the connection
// broke during the commit, that the outcome is unknown: either way a retry is safe, since it replays
// what committed or runs what did not).
func (t *Transactor) InTx(ctx context.Context, fn func(ctx context.Context, store idempotency.Store) error) error {
	var (
		tx  pgx.Tx
		err error
	)
	// The claim's re-read relies on each statement seeing fresh data: pin READ COMMITTED even where
	// the server's default isolation is stricter.
	if b, ok := t.db.(idemTxBeginner); ok {
		tx, err = b.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	} else {
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
		return err
	}
	// A commit cancelled half-way has an unknown outcome; finish it even if the client left.
	if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("pgstore: idempotency transaction: commit: %w", err)
	}
	return nil
}

// withDB returns a copy of the store that runs on db, sharing the built SQL.
func (s *IdempotencyStore) withDB(db DB) *IdempotencyStore {
	c := *s
	c.db = db
	return &c
}

// idemTxStore is the Store InTx hands to the middleware: the ordinary statements on the transaction,
// with the claim that takes the key's advisory lock first.
type idemTxStore struct {
	*IdempotencyStore
	table string
}

// Claim implements idempotency.Store inside the transaction. A key whose advisory lock another open
// transaction holds is InFlight, with leaseUntil as the hint of when to retry.
func (s *idemTxStore) Claim(ctx context.Context, key idempotency.Key, fp idempotency.Fingerprint, now, leaseUntil, expiresAt time.Time) (idempotency.Claim, error) {
	lock := idemLockKey(s.table, key)
	return s.claim(ctx, s.sql.claimLocked, &lock, key, fp, now, leaseUntil, expiresAt)
}

// idemLockKey is the advisory lock key of a record: 64 bits of a SHA-256 over the table and the
// length-prefixed scope and key. Distinct records hash distinct inputs, and a client cannot aim a key
// at another's lock; a chance collision (2^-64) only answers one request 409.
func idemLockKey(table string, key idempotency.Key) int64 {
	h := sha256.New()
	var n [8]byte
	for _, part := range []string{table, key.Scope, key.Key} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	var sum [sha256.Size]byte
	return int64(binary.BigEndian.Uint64(h.Sum(sum[:0])))
}
