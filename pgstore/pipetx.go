package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svcplatform/conventions/idempotency/driver"
)

// pipeTx is the transaction of the Transactor's requests on a pool: a pgx.Tx on one connection that
// saves round trips by sending the statements whose answer nobody waits for — BEGIN, SAVEPOINT,
// RELEASE SAVEPOINT, ROLLBACK TO SAVEPOINT and the stored response's completion — in one pipeline
// with the next statement that has an answer, or with the COMMIT. A request that claims its key, writes
// its order in a savepoint and commits its response takes four round trips instead of eight.
//
// The semantics are PostgreSQL's own: the queued statements run before the next one, in order, in the
// same transaction; when one fails, the pipeline stops there, the error is the next statement's, and
// the transaction is aborted as if it had run alone. A savepoint rolled back before its SAVEPOINT was
// sent costs nothing.
//
// The escape hatches keep that promise. Conn and LargeObjects send what is queued before they hand
// out the connection, and from then on the transaction queues nothing (SAVEPOINT and RELEASE go at
// once), so whatever runs on that connection, now or later, runs inside the transaction and the
// savepoint it is in, as on any pgx.Tx. LargeObjects works inside the transaction. Prepare sends
// what is queued first, and a statement it prepares lasts as long as the transaction: it is
// deallocated when the transaction ends, so the pool's next user never inherits it.
//
// pipeTx is not safe for concurrent use, like any pgx.Tx.
type pipeTx struct {
	conn *pgxpool.Conn
	// ctx is the context the transaction began under: Conn and LargeObjects, which take none, send
	// what is queued under it.
	ctx      context.Context
	pending  []queued
	begun    bool // BEGIN reached the server
	closed   bool
	eager    bool  // the connection was handed out (Conn, LargeObjects): nothing is queued any more
	deferred error // what failed when Conn or LargeObjects sent the queue: the next statement's error
	nextSave int
	prepared []string          // statements Prepare created, deallocated when the transaction ends
	lo       *pgx.LargeObjects // LargeObjects' answer, once made
}

var _ pgx.Tx = (*pipeTx)(nil)

// queued is a statement waiting for the next round trip.
type queued struct {
	sql    string
	args   []any
	mapErr func(error) error // translates the statement's error, when set
	save   string            // the savepoint this SAVEPOINT statement creates, or ""
}

// beginPipeTx acquires a connection and queues BEGIN: nothing is sent yet.
func beginPipeTx(ctx context.Context, pool *pgxpool.Pool, begin string) (*pipeTx, error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &pipeTx{conn: c, ctx: ctx, pending: []queued{{sql: begin}}}, nil
}

// usable returns why no statement may run on the transaction now, if anything does: it ended, or
// sending the queue for Conn or LargeObjects failed (that error is returned once, as the next
// statement's would have been).
func (t *pipeTx) usable() error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	if err := t.deferred; err != nil {
		t.deferred = nil
		return err
	}
	return nil
}

// flushWith sends the queued statements and then sql in one pipeline, and returns the batch results
// positioned at sql's result. The caller must close them.
func (t *pipeTx) flushWith(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	for _, q := range t.pending {
		b.Queue(q.sql, q.args...)
	}
	b.Queue(sql, args...)
	pending := t.pending
	t.pending = nil
	br := t.conn.SendBatch(ctx, b)
	for _, q := range pending {
		_, err := br.Exec()
		if err != nil && q.mapErr != nil {
			err = q.mapErr(err)
		}
		if err != nil {
			_ = br.Close()
			return nil, err
		}
		t.begun = true
	}
	return br, nil
}

// Exec implements pgx.Tx.
func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if len(t.pending) == 0 && !t.closed && t.deferred == nil {
		return t.conn.Exec(ctx, sql, args...)
	}
	br, err := t.flushWith(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query implements pgx.Tx.
func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if len(t.pending) == 0 && !t.closed && t.deferred == nil {
		return t.conn.Query(ctx, sql, args...)
	}
	br, err := t.flushWith(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow implements pgx.Tx.
func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return &pipeRow{rows: rows, err: err}
}

// SendBatch implements pgx.Tx: the queued statements go first, in the same pipeline.
func (t *pipeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := t.flush(ctx); err != nil {
		return errBatch{err}
	}
	return t.conn.SendBatch(ctx, b)
}

// CopyFrom implements pgx.Tx.
func (t *pipeTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.flush(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, cols, src)
}

// Prepare implements pgx.Tx: after what is queued, in the transaction (in an aborted one it fails
// like any statement). A statement it creates is deallocated when the transaction ends; one the
// connection already had (pgx's Prepare is idempotent) stays. A statement named by its own SQL
// (name == sql) is pgx's cache-like use, which cannot clash with another statement, and stays too.
func (t *pipeTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if name == sql || name == "" {
		if err := t.flush(ctx); err != nil {
			return nil, err
		}
		return t.conn.Conn().Prepare(ctx, name, sql)
	}
	// Whether the connection has the name already travels with what is queued.
	var had bool
	if err := t.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = $1)", name).Scan(&had); err != nil {
		return nil, err
	}
	sd, err := t.conn.Conn().Prepare(ctx, name, sql)
	if err == nil && !had && !slices.Contains(t.prepared, name) {
		t.prepared = append(t.prepared, name)
	}
	return sd, err
}

// LargeObjects implements pgx.Tx: the large objects API inside the transaction (and the savepoint it
// is in). Like Conn, it sends what is queued first and makes the transaction queue nothing more. If
// the connection is broken so that not even that can be sent, it panics with the error, since
// pgx.Tx gives it no error result; the middleware handles that as a handler panic (rolled back, key
// released).
func (t *pipeTx) LargeObjects() pgx.LargeObjects {
	t.handOut()
	if t.lo == nil {
		// pgx makes a LargeObjects only from a transaction of its own. A handle on this connection
		// whose "begin" is an empty statement is one: it sends nothing but that (no BEGIN, so no
		// transaction is nested), works in an aborted transaction too, and is never ended (this
		// transaction's Commit and Rollback end the real one).
		h, err := t.conn.Conn().BeginTx(context.WithoutCancel(t.ctx), pgx.TxOptions{BeginQuery: ";"})
		if err != nil {
			panic(fmt.Errorf("pgstore: LargeObjects: %w", err))
		}
		lo := h.LargeObjects()
		t.lo = &lo
	}
	return *t.lo
}

// Conn implements pgx.Tx: the transaction's connection, after what is queued was sent, and from then
// on the transaction queues nothing: whatever runs on it runs inside the transaction, in order.
func (t *pipeTx) Conn() *pgx.Conn {
	t.handOut()
	return t.conn.Conn()
}

// handOut sends what is queued and makes the transaction eager: Conn's and LargeObjects' callers
// bypass the queue, so nothing may wait in it while they can use the connection. A failure is the
// next statement's error.
func (t *pipeTx) handOut() {
	if t.closed || t.eager {
		return
	}
	t.eager = true
	if err := t.flush(t.ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		t.deferred = err
	}
}

// flush sends what is queued on its own, when something is.
func (t *pipeTx) flush(ctx context.Context) error {
	if len(t.pending) == 0 {
		return t.usable()
	}
	br, err := t.flushWith(ctx, "SELECT 1", nil)
	if err != nil {
		return err
	}
	_, err = br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// queue adds a statement to the next round trip, or runs it at once once the transaction is eager.
func (t *pipeTx) queue(ctx context.Context, q queued) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	if !t.eager {
		t.pending = append(t.pending, q)
		return nil
	}
	_, err := t.Exec(ctx, q.sql, q.args...)
	if err != nil && q.mapErr != nil {
		err = q.mapErr(err)
	}
	return err
}

// Begin implements pgx.Tx: a savepoint, queued.
func (t *pipeTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	t.nextSave++
	name := "sp_" + strconv.Itoa(t.nextSave)
	if err := t.queue(ctx, queued{sql: "SAVEPOINT " + name, save: name}); err != nil {
		return nil, err
	}
	return &pipeSavepoint{tx: t, name: name}, nil
}

// Commit implements pgx.Tx: the queued statements and COMMIT in one round trip. When one of them
// failed, nothing is committed and the error says why.
func (t *pipeTx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	if !t.begun && len(t.pending) == 1 && t.deferred == nil {
		// Only BEGIN is queued: nothing was ever sent, so there is nothing to commit.
		t.end(ctx, false)
		return nil
	}
	if err := t.deferred; err != nil {
		// Sending the queue for Conn or LargeObjects failed and nobody saw it: commit nothing.
		t.deferred = nil
		_ = t.Rollback(ctx)
		return err
	}
	br, err := t.flushWith(ctx, "COMMIT", nil)
	if err != nil {
		t.end(ctx, true)
		return err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback
	}
	t.end(ctx, err != nil)
	return err
}

// Rollback implements pgx.Tx. A transaction whose BEGIN was never sent rolls back without a round trip.
func (t *pipeTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	if !t.begun {
		t.end(ctx, false)
		return nil
	}
	t.pending = nil
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	t.end(ctx, err != nil)
	return err
}

// end closes the transaction and gives the connection back, without the statements Prepare created;
// a connection whose state is unknown is closed rather than reused (the pool also drops one left
// inside a transaction).
func (t *pipeTx) end(ctx context.Context, broken bool) {
	t.closed = true
	t.pending = nil
	t.deferred = nil
	for _, name := range t.prepared {
		if broken {
			break
		}
		broken = t.conn.Conn().Deallocate(ctx, name) != nil
	}
	t.prepared = nil
	if broken {
		_ = t.conn.Conn().Close(context.Background())
	}
	t.conn.Release()
}

// pipeSavepoint is a pipeTx savepoint: pgx.Tx's nested transaction.
type pipeSavepoint struct {
	tx     *pipeTx
	name   string
	closed bool
}

var _ pgx.Tx = (*pipeSavepoint)(nil)

func (s *pipeSavepoint) Begin(ctx context.Context) (pgx.Tx, error) {
	if s.closed {
		return nil, pgx.ErrTxClosed
	}
	return s.tx.Begin(ctx)
}

// Commit releases the savepoint, queued.
func (s *pipeSavepoint) Commit(ctx context.Context) error {
	if s.closed {
		return pgx.ErrTxClosed
	}
	s.closed = true
	if s.dropUnsent() {
		return nil
	}
	return s.tx.queue(ctx, queued{sql: "RELEASE SAVEPOINT " + s.name})
}

// Rollback rolls back to the savepoint and queues its release; free when the SAVEPOINT was never sent.
func (s *pipeSavepoint) Rollback(ctx context.Context) error {
	if s.closed {
		return pgx.ErrTxClosed
	}
	s.closed = true
	if s.dropUnsent() {
		return nil
	}
	// At once, not queued: rolling back to a savepoint usually follows a failed statement, and in an
	// aborted transaction the server parses nothing but transaction control, so the next statement
	// could not travel in the same pipeline. This path is the exception; it may cost its round trip.
	if _, err := s.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+s.name); err != nil {
		return err
	}
	return s.tx.queue(ctx, queued{sql: "RELEASE SAVEPOINT " + s.name})
}

// dropUnsent removes the savepoint's SAVEPOINT, and everything queued after it (its nested
// savepoints' statements), when it has not reached the server: then the savepoint never existed there.
func (s *pipeSavepoint) dropUnsent() bool {
	for i, q := range s.tx.pending {
		if q.save == s.name {
			s.tx.pending = s.tx.pending[:i]
			return true
		}
	}
	return false
}

func (s *pipeSavepoint) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if s.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	return s.tx.Exec(ctx, sql, args...)
}

func (s *pipeSavepoint) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if s.closed {
		return nil, pgx.ErrTxClosed
	}
	return s.tx.Query(ctx, sql, args...)
}

func (s *pipeSavepoint) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if s.closed {
		return &pipeRow{err: pgx.ErrTxClosed}
	}
	return s.tx.QueryRow(ctx, sql, args...)
}

func (s *pipeSavepoint) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if s.closed {
		return errBatch{pgx.ErrTxClosed}
	}
	return s.tx.SendBatch(ctx, b)
}

func (s *pipeSavepoint) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if s.closed {
		return 0, pgx.ErrTxClosed
	}
	return s.tx.CopyFrom(ctx, table, cols, src)
}

func (s *pipeSavepoint) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if s.closed {
		return nil, pgx.ErrTxClosed
	}
	return s.tx.Prepare(ctx, name, sql)
}

func (s *pipeSavepoint) LargeObjects() pgx.LargeObjects { return s.tx.LargeObjects() }

func (s *pipeSavepoint) Conn() *pgx.Conn { return s.tx.Conn() }

// batchRows are the rows of a pipelined query; closing them closes the pipeline.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

// pipeRow is QueryRow's answer, with pgx's rules: ErrNoRows when there is none.
type pipeRow struct {
	rows pgx.Rows
	err  error
}

func (r *pipeRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// errBatch is the BatchResults of a batch that could not be sent.
type errBatch struct{ err error }

func (e errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, e.err }
func (e errBatch) Query() (pgx.Rows, error)         { return nil, e.err }
func (e errBatch) QueryRow() pgx.Row                { return &pipeRow{err: e.err} }
func (e errBatch) Close() error                     { return e.err }
func (e errBatch) Tx() pgx.Tx                       { return nil }

// pipelinedCompletion wraps the completion UPDATE so that it fails on the server when it matches no
// row: a division by the number of rows it changed. The COMMIT pipelined behind it then rolls back
// instead of committing the handler's writes without their stored response, and the error is
// driver.ErrLeaseLost, as an immediate completion's would be. (Within the transaction that
// claimed the key the row is always there; this makes that a guarantee.)
func pipelinedCompletion(update string) string {
	return "WITH u AS (" + update + " RETURNING 1) SELECT 1 / (SELECT count(*) FROM u)::int"
}

// completionLost maps the wrapped completion's division by zero to driver.ErrLeaseLost.
func completionLost(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "22012" {
		return fmt.Errorf("pgstore: idempotency complete: %w", driver.ErrLeaseLost)
	}
	return err
}
