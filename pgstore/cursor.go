package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/svcplatform/conventions/webhook"
)

// DefaultCursorTable is the table a CursorStore uses when CursorStoreOptions.Table is empty.
const DefaultCursorTable = "webhook_cursors"

// CursorStoreOptions configures a CursorStore and its migration. A nil *CursorStoreOptions and the zero value
// mean the defaults.
type CursorStoreOptions struct {
	// Schema holds the table. Default "": the table name is unqualified and resolves through the
	// connection's search_path.
	Schema string
	// Table is the table's name. Default DefaultCursorTable.
	Table string
}

// cursorConfig is CursorStoreOptions with the defaults applied and the SQL built once.
type cursorConfig struct {
	CursorStoreOptions
	qualified string
	get       string
	lock      string
	insert    string
	update    string
}

func cursorResolve(opts *CursorStoreOptions) cursorConfig {
	var c cursorConfig
	if opts != nil {
		c.CursorStoreOptions = *opts
	}
	if c.Table == "" {
		c.Table = DefaultCursorTable
	}
	c.qualified = qualify(c.Schema, c.Table)
	c.get = "SELECT last_sequence FROM " + c.qualified + " WHERE stream = $1"
	c.lock = c.get + " FOR UPDATE"
	// A stream's first advance. A concurrent first advance blocks on the primary key until this one
	// commits, then finds last_sequence ≠ 0 and changes nothing: 0 rows, a conflict.
	c.insert = "INSERT INTO " + c.qualified + " AS c (stream, last_sequence) VALUES ($1, $2)" +
		" ON CONFLICT (stream) DO UPDATE SET last_sequence = EXCLUDED.last_sequence WHERE c.last_sequence = 0"
	// Compare-and-set. Under READ COMMITTED a concurrent update of the row makes this one wait and
	// re-check the WHERE clause against the committed row, so only one of two racers matches.
	c.update = "UPDATE " + c.qualified + " SET last_sequence = $3 WHERE stream = $1 AND last_sequence = $2"
	return c
}

// CursorStore is a webhook.CursorStore on PostgreSQL: one row per stream holding the last sequence
// processed. Its Advance is a compare-and-set, so replicas sharing the table never both move a cursor,
// and AdvanceTx does the same inside the caller's transaction, so the consumer's writes and the
// cursor commit together (ProcessInTx wraps that up for a webhook.Tracker).
//
// It is safe for concurrent use. It does not own db and never closes it. Create its table with
// Migrate. The zero value is not usable: its methods, and the ProcessFunc its ProcessInTx
// returns, return an error that wraps ErrNotBuilt. Build one with NewCursorStore.
type CursorStore struct {
	db  DB
	cfg cursorConfig
}

var _ webhook.CursorStore = (*CursorStore)(nil)

// NewCursorStore returns a store on db (a pool, a connection, or a transaction) with the table opts
// name; nil opts mean the defaults.
func NewCursorStore(db DB, opts *CursorStoreOptions) (*CursorStore, error) {
	if db == nil {
		return nil, errNoDB("NewCursorStore")
	}
	return &CursorStore{db: db, cfg: cursorResolve(opts)}, nil
}

// Get returns the stream's cursor, or 0 when it has none.
func (s *CursorStore) Get(ctx context.Context, stream string) (uint64, error) {
	if s == nil || s.db == nil {
		return 0, errZeroCursorStore
	}
	return s.get(ctx, s.db, s.cfg.get, stream)
}

func (s *CursorStore) get(ctx context.Context, db DB, sql, stream string) (uint64, error) {
	var last int64
	err := db.QueryRow(ctx, sql, stream).Scan(&last)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, cursorErr("get", err)
	case last < 0:
		return 0, fmt.Errorf("pgstore: cursor of stream %q is negative", stream)
	}
	return uint64(last), nil
}

// Advance moves the stream's cursor from from to to if it is at from now, and otherwise returns
// webhook.ErrCursorConflict; see webhook.CursorStore.
func (s *CursorStore) Advance(ctx context.Context, stream string, from, to uint64) error {
	if s == nil || s.db == nil {
		return errZeroCursorStore
	}
	return s.advance(ctx, s.db, stream, from, to)
}

// AdvanceTx is Advance inside tx: the move commits or rolls back with the rest of tx. A conflict
// detected by PostgreSQL itself (a serialization failure or deadlock under REPEATABLE READ or
// SERIALIZABLE) is reported as webhook.ErrCursorConflict too; tx is then aborted and must be rolled
// back.
//
// Advance is called by a webhook.Tracker, which only asks for moves forward (webhook.CursorStore);
// AdvanceTx is called by the caller's own code, so it checks: to ≤ from is webhook.ErrCursorBackward
// and to above webhook.MaxSequence is webhook.ErrCursorRange, and nothing is written.
func (s *CursorStore) AdvanceTx(ctx context.Context, tx pgx.Tx, stream string, from, to uint64) error {
	if s == nil || s.db == nil {
		return errZeroCursorStore
	}
	if tx == nil {
		return errors.New("pgstore: AdvanceTx needs a transaction")
	}
	switch {
	case to <= from:
		return webhook.ErrCursorBackward
	case to > webhook.MaxSequence:
		return webhook.ErrCursorRange
	}
	return s.advance(ctx, tx, stream, from, to)
}

// advance is the compare-and-set, for a move from < to ≤ webhook.MaxSequence.
func (s *CursorStore) advance(ctx context.Context, db DB, stream string, from, to uint64) error {
	var tag pgconn.CommandTag
	var err error
	if from == 0 {
		tag, err = db.Exec(ctx, s.cfg.insert, stream, int64(to))
	} else {
		tag, err = db.Exec(ctx, s.cfg.update, stream, int64(from), int64(to))
	}
	if err != nil {
		return cursorErr("advance", err)
	}
	if tag.RowsAffected() != 1 {
		return webhook.ErrCursorConflict
	}
	return nil
}

// ProcessInTx returns a webhook.ProcessFunc that runs fn and the cursor's advance in one transaction
// on the store's DB, for a webhook.Tracker built with TrackerOptions.ProcessAdvances: either the
// event's effects and the new cursor are both committed, or neither is. fn does its writes through tx
// and must not commit or roll it back.
//
// The transaction first locks the stream's cursor row and checks that it is still at the step's
// From, so a replica racing on the same event waits instead of doing the work, and then finds the
// event done (a conflict, which the Tracker turns into a duplicate). With every replica processing
// this way, each event's effects are committed exactly once.
func (s *CursorStore) ProcessInTx(fn func(ctx context.Context, tx pgx.Tx, step webhook.Step) error) webhook.ProcessFunc {
	return func(ctx context.Context, step webhook.Step) error {
		if s == nil || s.db == nil {
			return errZeroCursorStore
		}
		tx, err := s.db.Begin(ctx)
		if err != nil {
			return cursorErr("begin", err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		cur, err := s.get(ctx, tx, s.cfg.lock, step.Stream)
		if err != nil {
			return err
		}
		if cur != step.From {
			return fmt.Errorf("pgstore: cursor of stream %q is at %d, not %d: %w", step.Stream, cur, step.From, webhook.ErrCursorConflict)
		}
		if err := fn(ctx, tx, step); err != nil {
			return err
		}
		if err := s.AdvanceTx(ctx, tx, step.Stream, step.From, step.Event.Sequence); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return cursorErr("commit", err)
		}
		return nil
	}
}

// cursorErr wraps a driver error, translating PostgreSQL's own conflict reports into
// webhook.ErrCursorConflict so that the Tracker re-reads the cursor instead of failing the delivery.
func cursorErr(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01") {
		return fmt.Errorf("pgstore: cursor %s: %w (%s)", op, webhook.ErrCursorConflict, pgErr.Code)
	}
	return fmt.Errorf("pgstore: cursor %s: %w", op, err)
}
