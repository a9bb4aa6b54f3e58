package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the stores need from PostgreSQL. *pgxpool.Pool, *pgx.Conn and pgx.Tx all satisfy it, so a
// store can run on a pool or inside a transaction the caller already holds.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// errNoDB is a constructor's refusal of a nil DB.
func errNoDB(ctor string) error { return fmt.Errorf("pgstore: %s needs a DB", ctor) }

// ErrNotBuilt: a store used without its constructor (the zero CredentialStore, CursorStore,
// EndpointStore, EventLog, IdempotencyStore, PinStore, PortalStore, RequestLogStore or Transactor, or
// a nil pointer to one), which has no DB. Every method with an error result returns an error that matches it with errors.Is and
// names the type.
var ErrNotBuilt = errors.New("pgstore: not built with its constructor")

// notBuiltError is ErrNotBuilt for one type: its message names the type and its constructor.
type notBuiltError struct{ msg string }

func (e *notBuiltError) Error() string        { return e.msg }
func (e *notBuiltError) Is(target error) bool { return target == ErrNotBuilt }

var (
	errZeroCredentialStore  error = &notBuiltError{"pgstore: CredentialStore not built with NewCredentialStore"}
	errZeroCursorStore      error = &notBuiltError{"pgstore: CursorStore not built with NewCursorStore"}
	errZeroEndpointStore    error = &notBuiltError{"pgstore: EndpointStore not built with NewEndpointStore"}
	errZeroEventLog         error = &notBuiltError{"pgstore: EventLog not built with NewEventLog"}
	errZeroIdempotencyStore error = &notBuiltError{"pgstore: IdempotencyStore not built with NewIdempotencyStore"}
	errZeroPinStore         error = &notBuiltError{"pgstore: PinStore not built with NewPinStore"}
	errZeroPortalStore      error = &notBuiltError{"pgstore: PortalStore not built with NewPortalStore"}
	errZeroTransactor       error = &notBuiltError{"pgstore: Transactor not built with NewTransactor"}
)

// quoteIdent quotes a schema or table name for use in SQL.
func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// qualify returns table's quoted name, qualified by schema when schema is not empty.
func qualify(schema, table string) string {
	if schema == "" {
		return quoteIdent(table)
	}
	return quoteIdent(schema) + "." + quoteIdent(table)
}

// lockKey names a transaction-scoped advisory lock.
func lockKey(name string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return int64(h.Sum64())
}
