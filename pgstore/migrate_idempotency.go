package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// DefaultIdempotencyTable is the table an IdempotencyStore uses when IdempotencyOptions.Table is empty.
const DefaultIdempotencyTable = "idempotency_keys"

// IdempotencyMigration returns the SQL that creates the idempotency table (and its schema, when one is
// configured) for opts; nil opts mean the defaults. It is idempotent (IF NOT EXISTS and catalog checks throughout), so it
// can run at every start or be copied into a migration tool's files, and it brings tables made by
// earlier versions up to date.
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
//	    suspected   boolean     NOT NULL DEFAULT false, -- a claim found the lease ended and extended it once
//	    expires_at  timestamptz NOT NULL,  -- retention: the row is dead from here on
//	    status      integer,               -- the stored response, once completed
//	    header      jsonb,
//	    body        bytea,
//	    PRIMARY KEY (scope, key)
//	);
//	DO $idem$ BEGIN
//	    IF pg_get_serial_sequence('"idempotency_keys"', 'token') IS NULL THEN
//	        ALTER SEQUENCE "idempotency_keys_token_seq" OWNED BY "idempotency_keys".token;
//	    END IF;
//	    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '"idempotency_keys"'::regclass
//	                   AND attname = 'suspected' AND NOT attisdropped) THEN
//	        ALTER TABLE "idempotency_keys" ADD COLUMN IF NOT EXISTS suspected boolean NOT NULL DEFAULT false;
//	    END IF;
//	    IF to_regclass('"idempotency_keys_expires_at_idx"') IS NULL THEN
//	        CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at_idx" ON "idempotency_keys" (expires_at);
//	    END IF;
//	END $idem$;
//
// The suspected column came with the two-step take-over (see IdempotencyStore); tables made before it
// get it from the ALTER TABLE, a change of the catalog only (a constant default rewrites no rows).
// ALTER TABLE and CREATE INDEX wait for every open transaction that wrote to the table, ALTER
// SEQUENCE for every one that drew a token (a request in transactional mode holds its transaction
// open while its handler runs), and every claim queues behind them while they wait; so the DO block
// runs them only when there is something to do, and a migration at every start takes no lock on a
// table that is up to date. While replicas of an earlier version still run, they take ended leases
// over at once and do not clear marks, as before.
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
    suspected   boolean     NOT NULL DEFAULT false,
    expires_at  timestamptz NOT NULL,
    status      integer,
    header      jsonb,
    body        bytea,
    PRIMARY KEY (scope, key)
);
`, o.qualified, o.seq, o.seqLiteral)
	index := quoteIdent(o.Table + "_expires_at_idx")
	body := fmt.Sprintf(` BEGIN
    IF pg_get_serial_sequence(%[2]s, 'token') IS NULL THEN
        ALTER SEQUENCE %[5]s OWNED BY %[1]s.token;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = %[2]s::regclass
                   AND attname = 'suspected' AND NOT attisdropped) THEN
        ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS suspected boolean NOT NULL DEFAULT false;
    END IF;
    IF to_regclass(%[4]s) IS NULL THEN
        CREATE INDEX IF NOT EXISTS %[3]s ON %[1]s (expires_at);
    END IF;
END `, o.qualified, idemLiteral(o.qualified), index, idemLiteral(qualify(o.Schema, o.Table+"_expires_at_idx")), o.seq)
	tag := idemDollarTag(body)
	fmt.Fprintf(&b, "DO %s%s%s;\n", tag, body, tag)
	return b.String()
}

// idemDollarTag returns a dollar-quote tag that does not occur in body, which holds identifiers the
// user chose.
func idemDollarTag(body string) string {
	tag := "$idem$"
	for i := 0; strings.Contains(body, tag); i++ {
		tag = "$idem" + strconv.Itoa(i) + "$"
	}
	return tag
}

// MigrateIdempotency creates the idempotency table for opts if it does not exist (see
// IdempotencyMigration). It runs in one transaction under an advisory lock, so replicas that start
// together do not race each other's CREATE statements.
func MigrateIdempotency(ctx context.Context, db DB, opts *IdempotencyOptions) error {
	o := idemResolve(opts)
	return migrate(ctx, db, "idempotency", "pgstore.idempotency.migrate\x00"+o.qualified, IdempotencyMigration(opts))
}
