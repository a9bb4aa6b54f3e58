-- Delivery state moves off the events: an event row is written once, when it is numbered, and never
-- again until retention removes it. For the defaults, after this migration:
--
--   CREATE TABLE "webhook_events_streams" (  -- one row per endpoint, rewritten by every claim and settlement
--       stream         text   PRIMARY KEY,
--       last_seq       bigint NOT NULL,          -- the newest sequence handed out
--       pruned_through bigint NOT NULL DEFAULT 0, -- retention removed every sequence up to here
--       acked          bigint NOT NULL DEFAULT 0, -- every sequence up to here is delivered or abandoned
--       fresh          bigint NOT NULL DEFAULT 0, -- no sequence above here was ever claimed
--       next_due       timestamptz,   -- nothing of the stream is due before this; NULL: nothing waits
--       lease_until    timestamptz,   -- the stream's holder: until when
--       lease_token    bigint  NOT NULL DEFAULT 0, -- fencing token, +1 per claim
--       held           integer NOT NULL DEFAULT 0, -- deliveries claimed under the lease, not yet settled
--       first_created  bigint          -- no retained event was created before this (unix seconds)
--   ) WITH (fillfactor = 50);
--   CREATE TABLE "webhook_events" ( stream, seq, id, type, created, api_version, data,
--       traceparent, tracestate, PRIMARY KEY (stream, seq) );  -- immutable
--   CREATE TABLE "webhook_events_deliveries" (  -- the exceptions: only events that are not simply next
--       stream          text        NOT NULL,
--       seq             bigint      NOT NULL,
--       state           smallint    NOT NULL,     -- 0 pending, 1 delivered, 2 abandoned
--       attempts        integer     NOT NULL DEFAULT 0, -- failed attempts
--       next_attempt_at timestamptz,              -- pending: when it is due
--       lease_token     bigint      NOT NULL DEFAULT 0, -- the claim that holds it; 0: none
--       last_attempt_at timestamptz,
--       last_error      text        NOT NULL DEFAULT '',
--       delivered_at    timestamptz,
--       PRIMARY KEY (stream, seq)
--   ) WITH (fillfactor = 70);
--
-- Why this shape: a delivery queue is a table of churn, and the library must not depend on
-- autovacuum, which may be off. Every structure a hot statement walks is kept free of dead rows:
--   - A stream's deliveries are a cursor, not rows. Events up to acked are settled; events above
--     fresh were never claimed and are due at their creation. In the common case — delivered at the
--     first attempt, in order — claiming and settling change the stream's row alone: no row per event
--     is written, updated or deleted, and the event row (kilobytes of data) is never rewritten.
--   - The stream row is narrow, has no index but its primary key on a column that never changes, and
--     leaves half of each page free: its updates are HOT, and PostgreSQL prunes their old versions
--     inside the page as it reads it, without VACUUM. Claim reads the streams table, which holds one
--     row per endpoint, never the events.
--   - What the cursor cannot say — a failed delivery waiting for its retry, a delivery handed back,
--     one settled out of order — is a row of the deliveries table, deleted once the cursor passes it.
--     Its rows are few (failures and their retries), and every scan of it starts above the stream's
--     cursor, so the rows deleted below it are never walked.
--   - Retention walks each stream from its watermark (pruned_through) up, by the primary key, so the
--     rows earlier batches deleted are never walked either, and each batch costs the same.
--   - The pending table is a queue too: every event passes through it once. Each row now carries the
--     ID of the transaction that appended it (xid), and the sequencer reads it through an index on
--     (xid, pos) from a low-water mark up: the oldest transaction that may still commit a row, or the
--     oldest whose row waits (a transaction below the oldest one running has ended, and its rows are
--     all visible). Every row it moved lies below that mark, so the rows it deleted are never walked
--     again, however many there are. Events are numbered in that order: by appending transaction,
--     then by position within it.
-- The due, held and created indexes of the events are dropped: nothing reads them any more, and every
-- numbered event paid for them.
--
-- Delivery state carries over: a stream's cursor is its lowest pending sequence less one, and every
-- event above it keeps its state in a row of the deliveries table. Leases do not carry over: stop the
-- dispatchers of the previous version before migrating (appends may go on: they wait only for the
-- moment the pending table gets its column, which rewrites nothing), or a delivery in flight is sent
-- again once its lease ends — webhooks are at least once.
-- The migration reads the events table whole, once, and holds it locked while it does.
ALTER TABLE {{streams}}
    ADD COLUMN IF NOT EXISTS acked         bigint  NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS fresh         bigint  NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS next_due      timestamptz,
    ADD COLUMN IF NOT EXISTS lease_until   timestamptz,
    ADD COLUMN IF NOT EXISTS lease_token   bigint  NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS held          integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS first_created bigint;
ALTER TABLE {{streams}} SET (fillfactor = 50);
CREATE TABLE IF NOT EXISTS {{deliveries}} (
    stream          text        NOT NULL,
    seq             bigint      NOT NULL,
    state           smallint    NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    lease_token     bigint      NOT NULL DEFAULT 0,
    last_attempt_at timestamptz,
    last_error      text        NOT NULL DEFAULT '',
    delivered_at    timestamptz,
    PRIMARY KEY (stream, seq)
) WITH (fillfactor = 70);
LOCK TABLE {{events}} IN SHARE ROW EXCLUSIVE MODE;
UPDATE {{streams}} c SET
    acked = GREATEST(c.pruned_through, COALESCE(
        (SELECT min(e.seq) - 1 FROM {{events}} e WHERE e.stream = c.stream AND e.state = 0), c.last_seq)),
    fresh = c.last_seq,
    next_due = (SELECT min(e.next_attempt_at) FROM {{events}} e WHERE e.stream = c.stream AND e.state = 0),
    first_created = (SELECT min(e.created) FROM {{events}} e WHERE e.stream = c.stream);
INSERT INTO {{deliveries}} (stream, seq, state, attempts, next_attempt_at, last_attempt_at, last_error, delivered_at)
SELECT e.stream, e.seq, e.state, e.attempts, e.next_attempt_at, e.last_attempt_at, e.last_error, e.delivered_at
FROM {{events}} e JOIN {{streams}} c ON c.stream = e.stream
WHERE e.seq > c.acked
ON CONFLICT (stream, seq) DO NOTHING;
DROP INDEX IF EXISTS {{due_idx}}, {{held_idx}}, {{created_idx}};
ALTER TABLE {{events}}
    DROP COLUMN IF EXISTS state,
    DROP COLUMN IF EXISTS attempts,
    DROP COLUMN IF EXISTS next_attempt_at,
    DROP COLUMN IF EXISTS lease_until,
    DROP COLUMN IF EXISTS lease_token,
    DROP COLUMN IF EXISTS last_attempt_at,
    DROP COLUMN IF EXISTS last_error,
    DROP COLUMN IF EXISTS delivered_at;
-- pg_current_xact_id() is stable: rows already waiting take the migration's transaction ID, stored
-- once in the catalog, and each new row its own appending transaction's.
ALTER TABLE {{pending}} ADD COLUMN IF NOT EXISTS xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX IF NOT EXISTS {{pending_xid_idx}} ON {{pending}} (xid, pos);
