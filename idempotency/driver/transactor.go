package driver

import (
	"context"
	"errors"
)

// Transactor runs work in one database transaction, for the middleware's transactional mode
// (idempotency.Options.Transactor): the claim, the handler's own writes and the stored response
// commit together or not at all. A crash anywhere before the commit leaves nothing behind (no record,
// no side effect), so a retry simply runs again, and no lease is needed: the transaction's lock on
// the record keeps concurrent claims of the same key waiting (or answering InFlight, as the Store
// decides) until it ends.
//
// pgstore provides one for PostgreSQL. The handler finds the transaction in its request context,
// where InTx put it (each Transactor documents how). The middleware calls InTx with a context that a
// client's disconnect does not cancel: the request finishes and commits, and a retry replays it.
//
// A Transactor tells the handler's failures from its own: when the handler's statements left the
// transaction unable to commit, its error (from InTx or from its Store's Complete) wraps
// ErrTxAborted, which the middleware answers with the opaque 500 and the key left free; any other
// error is the store's, answered 503 with Retry-After.
type Transactor interface {
	// InTx begins a transaction and calls fn with a context that carries it and a Store bound to it.
	// When fn returns nil, InTx commits and returns the commit's error; otherwise it rolls back and
	// returns fn's error. If fn panics, InTx must roll back (a deferred Rollback does) and let the
	// panic continue. The store is used by fn's goroutine only.
	InTx(ctx context.Context, fn func(ctx context.Context, store Store) error) error
}

// ErrTxAborted is what a Transactor's error wraps (from InTx, or from its Store's Complete) when the
// handler's own database work failed inside the transaction — one of its statements failed and left
// the transaction aborted, or its writes broke a constraint checked at the commit — so that nothing
// could be committed. It tells that failure from the Transactor's own (a claim, completion or commit
// that the database could not carry out), which the middleware answers 503 "retry". The same
// request would fail the same way, so the middleware answers the handler's failure with the opaque
// 500 instead (apierror.Internal: the request_id, no detail) and, since nothing was committed,
// leaves the key free for a corrected request.
var ErrTxAborted = errors.New("idempotency: the handler's work aborted its transaction")
