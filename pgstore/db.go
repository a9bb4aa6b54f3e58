package pgstore

import (
	"context"

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

// quoteIdent quotes a schema or table name for use in SQL.
func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }
