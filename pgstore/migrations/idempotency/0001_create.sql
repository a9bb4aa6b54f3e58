-- The idempotency records (IdempotencyStore), for the defaults:
--
--   CREATE SEQUENCE "idempotency_keys_token_seq";
--   CREATE TABLE "idempotency_keys" (
--       scope       text        NOT NULL,  -- credential scope (licensee + environment)
--       key         text        NOT NULL,  -- the client's Idempotency-Key
--       fingerprint bytea       NOT NULL,  -- SHA-256 of method, path, query and body
--       token       bigint      NOT NULL DEFAULT nextval(…), -- fencing token
--       completed   boolean     NOT NULL DEFAULT false,
--       lease_until timestamptz NOT NULL,  -- in flight: the owner's lease
--       suspected   boolean     NOT NULL DEFAULT false, -- a claim found the lease ended and extended it once
--       expires_at  timestamptz NOT NULL,  -- retention: the row is dead from here on
--       status      integer,               -- the stored response, once completed
--       header      jsonb,
--       body        bytea,
--       PRIMARY KEY (scope, key)
--   );
--   CREATE INDEX "idempotency_keys_expires_at_idx" ON "idempotency_keys" (expires_at);
--
-- Every claim that writes a row (a new key, or a take-over) draws a new token from the sequence, so
-- a token is never handed out twice, even after a row is released or removed, and no two keys share
-- one. Times are timestamptz: PostgreSQL keeps microseconds, so the store compares leases and
-- retention to the microsecond.
--
-- Migration 1 also adopts the table as the unversioned migrations of earlier versions left it: IF
-- NOT EXISTS throughout, and the DO block brings an earlier table up to date. The suspected column
-- came with the two-step take-over; a table made before it gets it from the ALTER TABLE, a change
-- of the catalog only (a constant default rewrites no rows). ALTER TABLE and CREATE INDEX wait for
-- every open transaction that wrote to the table, ALTER SEQUENCE for every one that drew a token (a
-- request in transactional mode holds its transaction open while its handler runs), and every claim
-- queues behind them while they wait; so the DO block runs them only when there is something to do,
-- and adopting a table that is up to date takes no lock on it.
CREATE SEQUENCE IF NOT EXISTS {{seq}};
CREATE TABLE IF NOT EXISTS {{table}} (
    scope       text        NOT NULL,
    key         text        NOT NULL,
    fingerprint bytea       NOT NULL,
    token       bigint      NOT NULL DEFAULT nextval({{seq_lit}}),
    completed   boolean     NOT NULL DEFAULT false,
    lease_until timestamptz NOT NULL,
    suspected   boolean     NOT NULL DEFAULT false,
    expires_at  timestamptz NOT NULL,
    status      integer,
    header      jsonb,
    body        bytea,
    PRIMARY KEY (scope, key)
);
DO {{do}} BEGIN
    IF pg_get_serial_sequence({{table_lit}}, 'token') IS NULL THEN
        ALTER SEQUENCE {{seq}} OWNED BY {{table}}.token;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = {{table_lit}}::regclass
                   AND attname = 'suspected' AND NOT attisdropped) THEN
        ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS suspected boolean NOT NULL DEFAULT false;
    END IF;
    IF to_regclass({{expires_idx_lit}}) IS NULL THEN
        CREATE INDEX IF NOT EXISTS {{expires_idx}} ON {{table}} (expires_at);
    END IF;
END {{do}};
