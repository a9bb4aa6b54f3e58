-- The schema of the unversioned migrations, as deployed before versioned ones: the SQL that
-- pgstore.Migrate(ctx, db, "") ran, generated from that code (commit ce1ea95) by concatenating
-- IdempotencyMigration, EventLogMigration, EndpointStoreMigration, CursorMigration,
-- PinStoreMigration and CredentialMigration with nil options. Names are unqualified: a test runs it
-- with its own schema as the search_path. Do not edit: it stands for databases in service.
CREATE SEQUENCE IF NOT EXISTS "idempotency_keys_token_seq";
CREATE TABLE IF NOT EXISTS "idempotency_keys" (
    scope       text        NOT NULL,
    key         text        NOT NULL,
    fingerprint bytea       NOT NULL,
    token       bigint      NOT NULL DEFAULT nextval('"idempotency_keys_token_seq"'),
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
    IF pg_get_serial_sequence('"idempotency_keys"', 'token') IS NULL THEN
        ALTER SEQUENCE "idempotency_keys_token_seq" OWNED BY "idempotency_keys".token;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '"idempotency_keys"'::regclass
                   AND attname = 'suspected' AND NOT attisdropped) THEN
        ALTER TABLE "idempotency_keys" ADD COLUMN IF NOT EXISTS suspected boolean NOT NULL DEFAULT false;
    END IF;
    IF to_regclass('"idempotency_keys_expires_at_idx"') IS NULL THEN
        CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at_idx" ON "idempotency_keys" (expires_at);
    END IF;
END $idem$;
CREATE TABLE IF NOT EXISTS "webhook_events_streams" (
    stream         text   PRIMARY KEY,
    last_seq       bigint NOT NULL,
    pruned_through bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS "webhook_events" (
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
CREATE INDEX IF NOT EXISTS "webhook_events_due_idx" ON "webhook_events" (next_attempt_at, stream, seq) WHERE state = 0;
CREATE INDEX IF NOT EXISTS "webhook_events_created_idx" ON "webhook_events" (created, stream, seq);
CREATE INDEX IF NOT EXISTS "webhook_events_held_idx" ON "webhook_events" (stream, lease_until) WHERE state = 0 AND lease_until IS NOT NULL;
CREATE TABLE IF NOT EXISTS "webhook_events_attempts" (
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
CREATE INDEX IF NOT EXISTS "webhook_events_attempts_order_idx" ON "webhook_events_attempts" (stream, at, seq, number);
CREATE INDEX IF NOT EXISTS "webhook_events_attempts_event_idx" ON "webhook_events_attempts" (stream, seq, id);
CREATE TABLE IF NOT EXISTS "webhook_events_pending" (
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
    IF (SELECT count(*) FROM pg_attribute WHERE attrelid = '"webhook_events"'::regclass
        AND attname IN ('traceparent', 'tracestate') AND NOT attisdropped) < 2 THEN
        ALTER TABLE "webhook_events" ADD COLUMN IF NOT EXISTS traceparent text, ADD COLUMN IF NOT EXISTS tracestate text;
    END IF;
    IF (SELECT count(*) FROM pg_attribute WHERE attrelid = '"webhook_events_pending"'::regclass
        AND attname IN ('traceparent', 'tracestate') AND NOT attisdropped) < 2 THEN
        ALTER TABLE "webhook_events_pending" ADD COLUMN IF NOT EXISTS traceparent text, ADD COLUMN IF NOT EXISTS tracestate text;
    END IF;
END $evlog$;
CREATE TABLE IF NOT EXISTS "webhook_endpoints" (
    id          text COLLATE "C" PRIMARY KEY,
    owner       text COLLATE "C" NOT NULL,
    url         text   NOT NULL,
    secrets     text[] NOT NULL,
    api_version text   NOT NULL DEFAULT '',
    sealed_secrets bytea
);
CREATE INDEX IF NOT EXISTS "webhook_endpoints_owner_idx" ON "webhook_endpoints" (owner, id);
DO $ep$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = '"webhook_endpoints"'::regclass
                   AND attname = 'sealed_secrets' AND NOT attisdropped) THEN
        ALTER TABLE "webhook_endpoints" ADD COLUMN IF NOT EXISTS sealed_secrets bytea;
    END IF;
END $ep$;
CREATE TABLE IF NOT EXISTS "webhook_cursors" (
    stream        text   PRIMARY KEY,
    last_sequence bigint NOT NULL CHECK (last_sequence >= 0)
);
CREATE TABLE IF NOT EXISTS "version_pins" (
    licensee  text COLLATE "C" PRIMARY KEY,
    version   text        NOT NULL,
    pinned_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS "version_pins_version_idx" ON "version_pins" (version, licensee);
CREATE TABLE IF NOT EXISTS "sandbox_credentials" (
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
CREATE INDEX IF NOT EXISTS "sandbox_credentials_licensee_idx" ON "sandbox_credentials" (licensee, environment);
