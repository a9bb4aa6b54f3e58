-- The webhook event log (EventLog): per-stream counters, the events with their delivery state, the
-- delivery history, and the appended events that wait for their number. For the defaults:
--
--   CREATE TABLE "webhook_events_streams" (
--       stream         text   PRIMARY KEY,       -- the webhook endpoint ID
--       last_seq       bigint NOT NULL,          -- the newest sequence handed out
--       pruned_through bigint NOT NULL DEFAULT 0 -- retention removed every sequence up to here
--   );
--   CREATE TABLE "webhook_events" (
--       stream          text        NOT NULL,
--       seq             bigint      NOT NULL,
--       id              text        NOT NULL,     -- evt_…
--       type            text        NOT NULL,
--       created         bigint      NOT NULL,     -- unix seconds, as in the envelope
--       api_version     text        NOT NULL,
--       data            bytea       NOT NULL,     -- the JSON exactly as appended
--       state           smallint    NOT NULL DEFAULT 0, -- 0 pending, 1 delivered, 2 abandoned
--       attempts        integer     NOT NULL DEFAULT 0, -- failed attempts
--       next_attempt_at timestamptz,
--       lease_until     timestamptz,
--       lease_token     bigint      NOT NULL DEFAULT 0, -- fencing token, +1 per claim
--       last_attempt_at timestamptz,
--       last_error      text        NOT NULL DEFAULT '',
--       delivered_at    timestamptz,
--       traceparent     text,         -- W3C trace context of the publishing request; NULL: none
--       tracestate      text,
--       PRIMARY KEY (stream, seq)
--   );
--   CREATE INDEX "webhook_events_due_idx" ON "webhook_events" (next_attempt_at, stream, seq) WHERE state = 0;
--   CREATE INDEX "webhook_events_created_idx" ON "webhook_events" (created, stream, seq);
--   -- the streams someone holds: Claim skips them, so that an endpoint has one holder at a time
--   CREATE INDEX "webhook_events_held_idx" ON "webhook_events" (stream, lease_until)
--       WHERE state = 0 AND lease_until IS NOT NULL;
--   CREATE TABLE "webhook_events_attempts" (  -- the delivery history
--       id          bigint      PRIMARY KEY,  -- random, never a counter's: the history's cursor
--       stream      text        NOT NULL,
--       seq         bigint      NOT NULL,
--       event_id    text        NOT NULL,
--       number      integer     NOT NULL,     -- 1 for the event's first attempt
--       outcome     smallint    NOT NULL,     -- 1 failed, 2 delivered, 3 abandoned
--       at          timestamptz NOT NULL,
--       latency_us  bigint      NOT NULL,
--       status_code integer     NOT NULL,     -- 0: no response
--       class       text        NOT NULL,     -- producer.Class…; '' for a success
--       reason      text        NOT NULL,
--       response    text        NOT NULL,     -- the start of the answer, at most 256 bytes
--       retry_at    timestamptz
--   );
--   -- the history's order, newest first: by time, never by the random ID
--   CREATE INDEX "webhook_events_attempts_order_idx" ON "webhook_events_attempts" (stream, at, seq, number);
--   CREATE INDEX "webhook_events_attempts_event_idx" ON "webhook_events_attempts" (stream, seq, id);
--   CREATE TABLE "webhook_events_pending" (  -- appended, committed, not yet numbered
--       pos         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- append order
--       stream      text   NOT NULL,
--       id          text   NOT NULL,
--       type        text   NOT NULL,
--       created     bigint NOT NULL,
--       api_version text   NOT NULL,
--       data        bytea  NOT NULL,
--       traceparent text,
--       tracestate  text
--   );
--
-- Append inserts into the pending table only: no shared row is locked in the appending transaction,
-- so appends to one stream commit in parallel. Sequence then moves committed pending events into the
-- events table, numbering them from the stream's counter row, in one statement. Sequences come from
-- the counter row, never from a SEQUENCE: a sequence's values are handed out outside the
-- transaction, so a rollback would leave a gap. (pos does come from one, and may have gaps; it only
-- orders.) Counter rows are never deleted, so retention never lets a sequence be reused.
--
-- Attempt IDs are random (a counter would tell each tenant how many attempts went to the others),
-- and the history is ordered by time.
--
-- Migration 1 also adopts the tables as the unversioned migrations of earlier versions left them:
-- IF NOT EXISTS throughout, and the DO block brings earlier tables up to date. Tables made before
-- trace context was stored get its columns. A history table made before random IDs keeps its
-- identity column, which the inserts override, and its (stream, id) index, which nothing reads any
-- more; the order index is built on it, holding off the recording of attempts while it builds (one
-- retention's worth of history at most). ALTER TABLE takes the table's strongest lock and CREATE
-- INDEX a lock that every write conflicts with; each waits for every open transaction that touched
-- the table (an outbox transaction holds the pending table), and every append and claim would queue
-- behind it: so they run only when something is missing, and adopting tables that are up to date
-- takes no lock on them.
CREATE TABLE IF NOT EXISTS {{streams}} (
    stream         text   PRIMARY KEY,
    last_seq       bigint NOT NULL,
    pruned_through bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS {{events}} (
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
CREATE TABLE IF NOT EXISTS {{attempts}} (
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
CREATE TABLE IF NOT EXISTS {{pending}} (
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
DO {{do}} BEGIN
    IF to_regclass({{due_idx_lit}}) IS NULL THEN
        CREATE INDEX IF NOT EXISTS {{due_idx}} ON {{events}} (next_attempt_at, stream, seq) WHERE state = 0;
    END IF;
    IF to_regclass({{created_idx_lit}}) IS NULL THEN
        CREATE INDEX IF NOT EXISTS {{created_idx}} ON {{events}} (created, stream, seq);
    END IF;
    IF to_regclass({{held_idx_lit}}) IS NULL THEN
        CREATE INDEX IF NOT EXISTS {{held_idx}} ON {{events}} (stream, lease_until) WHERE state = 0 AND lease_until IS NOT NULL;
    END IF;
    IF to_regclass({{attempts_order_idx_lit}}) IS NULL THEN
        CREATE INDEX IF NOT EXISTS {{attempts_order_idx}} ON {{attempts}} (stream, at, seq, number);
    END IF;
    IF to_regclass({{attempts_event_idx_lit}}) IS NULL THEN
        CREATE INDEX IF NOT EXISTS {{attempts_event_idx}} ON {{attempts}} (stream, seq, id);
    END IF;
    IF (SELECT count(*) FROM pg_attribute WHERE attrelid = {{events_lit}}::regclass
        AND attname IN ('traceparent', 'tracestate') AND NOT attisdropped) < 2 THEN
        ALTER TABLE {{events}} ADD COLUMN IF NOT EXISTS traceparent text, ADD COLUMN IF NOT EXISTS tracestate text;
    END IF;
    IF (SELECT count(*) FROM pg_attribute WHERE attrelid = {{pending_lit}}::regclass
        AND attname IN ('traceparent', 'tracestate') AND NOT attisdropped) < 2 THEN
        ALTER TABLE {{pending}} ADD COLUMN IF NOT EXISTS traceparent text, ADD COLUMN IF NOT EXISTS tracestate text;
    END IF;
END {{do}};
