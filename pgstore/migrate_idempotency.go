package pgstore

import (
	"context"
	"fmt"
	"strings"
)

// DefaultIdempotencyTable is the table an IdempotencyStore uses when IdempotencyOptions.Table is empty.
const DefaultIdempotencyTable = "idempotency_keys"

// IdempotencyMigration returns the SQL that creates the idempotency table (and its schema, when one is
// configured) for opts; nil opts mean the defaults. It is idempotent (IF NOT EXISTS throughout), so it
// can run at every start or be copied into a migration tool's files.
//
// The table, for the defaults:
//
//	CREATE SEQUENCE IF NOT EXISTS "idempotency_keys_token_seq";
//	CREATE TABLE IF NOT EXISTS "idempotency_keys" (
//	    scope       text        NOT NULL,  -- credential scope (licensee + environment)
//	    key         text        NOT NULL,  -- the client's Idempotency-Key
//	    fingerprint bytea       NOT NULL,  -- SHA-256 of method, path, query and body
//	    token       bigint      NOT NULL DEFAULT nextval('"idempotency_keys_token_seq"'), -- fencing token
//	    completed   boolean     NOT NULL DEFAULT false,
//	    lease_until timestamptz NOT NULL,  -- in flight: the owner's lease
//	    expires_at  timestamptz NOT NULL,  -- retention: the row is dead from here on
//	    status      integer,               -- the stored response, once completed
//	    header      jsonb,
//	    body        bytea,
//	    PRIMARY KEY (scope, key)
//	);
//	ALTER SEQUENCE "idempotency_keys_token_seq" OWNED BY "idempotency_keys".token;
//	CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at_idx" ON "idempotency_keys" (expires_at);
//
// Every claim that writes a row (a new key, or a take-over) draws a new token from the sequence, so a
// token is never handed out twice, even after a row is released or removed, and no two keys share
// one. Times are timestamptz: PostgreSQL keeps microseconds, so the store compares leases and
// retention to the microsecond.
func IdempotencyMigration(opts *IdempotencyOptions) string {
	o := idemResolve(opts)
	var b strings.Builder
	if o.Schema != "" {
		fmt.Fprintf(&b, "CREATE SCHEMA IF NOT EXISTS %s;\n", quoteIdent(o.Schema))
	}
	fmt.Fprintf(&b, `CREATE SEQUENCE IF NOT EXISTS %[2]s;
CREATE TABLE IF NOT EXISTS %[1]s (
    scope       text        NOT NULL,
    key         text        NOT NULL,
    fingerprint bytea       NOT NULL,
    token       bigint      NOT NULL DEFAULT nextval(%[3]s),
    completed   boolean     NOT NULL DEFAULT false,
    lease_until timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    status      integer,
    header      jsonb,
    body        bytea,
    PRIMARY KEY (scope, key)
);
ALTER SEQUENCE %[2]s OWNED BY %[1]s.token;
CREATE INDEX IF NOT EXISTS %[4]s ON %[1]s (expires_at);
`, o.qualified, o.seq, o.seqLiteral, quoteIdent(o.Table+"_expires_at_idx"))
	return b.String()
}

// MigrateIdempotency creates the idempotency table for opts if it does not exist (see
// IdempotencyMigration). It runs in one transaction under an advisory lock, so replicas that start
// together do not race each other's CREATE statements.
func MigrateIdempotency(ctx context.Context, db DB, opts *IdempotencyOptions) error {
	o := idemResolve(opts)
	return migrate(ctx, db, "idempotency", "pgstore.idempotency.migrate\x00"+o.qualified, IdempotencyMigration(opts))
}
