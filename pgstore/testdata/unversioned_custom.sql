-- The schema of the unversioned migrations, as deployed before versioned ones, for other table
-- names and an event log with MaxStreamEvents (its migration then also made the pending table's
-- stream index): generated from that code (commit ce1ea95) by concatenating the six *Migration
-- functions with these options:
--   IdempotencyOptions{Table: "idempotency_keys_sandbox"}
--   EventLogOptions{Table: "Order Events", MaxStreamEvents: 1000}
--   EndpointStoreOptions{Table: "hooks"}
--   CursorOptions{Table: "consumer_cursors"}
--   PinStoreOptions{Table: "pins"}
--   CredentialOptions{Table: "api_keys"}
-- Names are unqualified: a test runs it with its own schema as the search_path. Do not edit: it
-- stands for databases in service.
CREATE SEQUENCE IF NOT EXISTS "idempotency_keys_sandbox_token_seq";
CREATE TABLE IF NOT EXISTS "idempotency_keys_sandbox" (
    scope       text        NOT NULL,
    key         text        NOT NULL,
    fingerprint bytea       NOT NULL,
    token       bigint      NOT NULL DEFAULT nextval('"idempotency_keys_sandbox_token_seq"'),
    completed   boolean     NOT NULL DEFAULT false,
    lease_until timestamptz NOT NULL,
    suspected   boolean     NOT NULL DEFAULT false,
    expires_at  timestamptz NOT NULL,
    status      integer,
    header      jsonb,
    body        bytea,
    PRIMARY KEY (scope, key)
);
DO $idem$ BEGIN
    IF pg_get_serial_sequence('"idempotency_keys_sandbox"', 'token') IS NULL THEN
        ALTER SEQUENCE "idempotency_keys_sandbox_token_seq" OWNED BY "idempotency_keys_sandbox".token;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '"idempotency_keys_sandbox"'::regclass
                   AND attname = 'suspected' AND NOT attisdropped) THEN
        ALTER TABLE "idempotency_keys_sandbox" ADD COLUMN IF NOT EXISTS suspected boolean NOT NULL DEFAULT false;
    END IF;
    IF to_regclass('"idempotency_keys_sandbox_expires_at_idx"') IS NULL THEN
        CREATE INDEX IF NOT EXISTS "idempotency_keys_sandbox_expires_at_idx" ON "idempotency_keys_sandbox" (expires_at);
    END IF;
END $idem$;
CREATE TABLE IF NOT EXISTS "Order Events_streams" (
    stream         text   PRIMARY KEY,
    last_seq       bigint NOT NULL,
    pruned_through bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS "Order Events" (
    stream          text        NOT NULL,
    seq             bigint      NOT NULL,
    id              text        NOT NULL,
    type            text        NOT NULL,
    created         bigint      NOT NULL,
    api_version     text        NOT NULL,
    data            bytea       NOT NULL,
    state           smallint    NOT NULL DEFAULT 0,
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    lease_until     timestamptz,
    lease_token     bigint      NOT NULL DEFAULT 0,
    last_attempt_at timestamptz,
    last_error      text        NOT NULL DEFAULT '',
    delivered_at    timestamptz,
    traceparent     text,
    tracestate      text,
    PRIMARY KEY (stream, seq)
);
CREATE INDEX IF NOT EXISTS "Order Events_due_idx" ON "Order Events" (next_attempt_at, stream, seq) WHERE state = 0;
CREATE INDEX IF NOT EXISTS "Order Events_created_idx" ON "Order Events" (created, stream, seq);
CREATE INDEX IF NOT EXISTS "Order Events_held_idx" ON "Order Events" (stream, lease_until) WHERE state = 0 AND lease_until IS NOT NULL;
CREATE TABLE IF NOT EXISTS "Order Events_attempts" (
    id          bigint      PRIMARY KEY,
    stream      text        NOT NULL,
    seq         bigint      NOT NULL,
    event_id    text        NOT NULL,
    number      integer     NOT NULL,
    outcome     smallint    NOT NULL,
    at          timestamptz NOT NULL,
    latency_us  bigint      NOT NULL,
    status_code integer     NOT NULL,
    class       text        NOT NULL,
    reason      text        NOT NULL,
    response    text        NOT NULL,
    retry_at    timestamptz
);
CREATE INDEX IF NOT EXISTS "Order Events_attempts_order_idx" ON "Order Events_attempts" (stream, at, seq, number);
CREATE INDEX IF NOT EXISTS "Order Events_attempts_event_idx" ON "Order Events_attempts" (stream, seq, id);
CREATE TABLE IF NOT EXISTS "Order Events_pending" (
    pos         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream      text   NOT NULL,
    id          text   NOT NULL,
    type        text   NOT NULL,
    created     bigint NOT NULL,
    api_version text   NOT NULL,
    data        bytea  NOT NULL,
    traceparent text,
    tracestate  text
);
DO $evlog$ BEGIN
    IF (SELECT count(*) FROM pg_attribute WHERE attrelid = '"Order Events"'::regclass
        AND attname IN ('traceparent', 'tracestate') AND NOT attisdropped) < 2 THEN
        ALTER TABLE "Order Events" ADD COLUMN IF NOT EXISTS traceparent text, ADD COLUMN IF NOT EXISTS tracestate text;
    END IF;
    IF (SELECT count(*) FROM pg_attribute WHERE attrelid = '"Order Events_pending"'::regclass
        AND attname IN ('traceparent', 'tracestate') AND NOT attisdropped) < 2 THEN
        ALTER TABLE "Order Events_pending" ADD COLUMN IF NOT EXISTS traceparent text, ADD COLUMN IF NOT EXISTS tracestate text;
    END IF;
END $evlog$;
CREATE INDEX IF NOT EXISTS "Order Events_pending_stream_idx" ON "Order Events_pending" (stream);
CREATE TABLE IF NOT EXISTS "hooks" (
    id          text COLLATE "C" PRIMARY KEY,
    owner       text COLLATE "C" NOT NULL,
    url         text   NOT NULL,
    secrets     text[] NOT NULL,
    api_version text   NOT NULL DEFAULT '',
    sealed_secrets bytea
);
CREATE INDEX IF NOT EXISTS "hooks_owner_idx" ON "hooks" (owner, id);
DO $ep$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = '"hooks"'::regclass
                   AND attname = 'sealed_secrets' AND NOT attisdropped) THEN
        ALTER TABLE "hooks" ADD COLUMN IF NOT EXISTS sealed_secrets bytea;
    END IF;
END $ep$;
CREATE TABLE IF NOT EXISTS "consumer_cursors" (
    stream        text   PRIMARY KEY,
    last_sequence bigint NOT NULL CHECK (last_sequence >= 0)
);
CREATE TABLE IF NOT EXISTS "pins" (
    licensee  text COLLATE "C" PRIMARY KEY,
    version   text        NOT NULL,
    pinned_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS "pins_version_idx" ON "pins" (version, licensee);
CREATE TABLE IF NOT EXISTS "api_keys" (
    id          text        PRIMARY KEY,
    hash        bytea       NOT NULL UNIQUE,
    licensee    text        NOT NULL,
    environment text        NOT NULL,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz,
    revoked_at  timestamptz,
    CHECK (octet_length(hash) = 32),
    CHECK (environment IN ('sandbox', 'live'))
);
CREATE INDEX IF NOT EXISTS "api_keys_licensee_idx" ON "api_keys" (licensee, environment);
