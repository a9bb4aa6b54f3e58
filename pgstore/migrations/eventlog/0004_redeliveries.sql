-- Redeliveries: settled events queued to be pushed again (EventLog.Redeliver, for a support
-- engineer's resend or recover). For the defaults:
--
--   CREATE TABLE "webhook_events_redeliveries" (  -- one row per queued redelivery
--       stream          text        NOT NULL,
--       seq             bigint      NOT NULL,     -- a settled event of the stream
--       next_attempt_at timestamptz NOT NULL,     -- when it is due
--       attempts        integer     NOT NULL DEFAULT 0, -- failed attempts of this redelivery
--       lease_token     bigint      NOT NULL DEFAULT 0, -- the stream's claim that holds it; 0: none
--       PRIMARY KEY (stream, seq)
--   );
--
-- Why this shape: a redelivery is an exception to a stream's cursor, like a row of the deliveries
-- table, but of an event the cursor has passed (or that was settled out of order), whose state must
-- not change: Status and the backlog keep reading the cursor and the deliveries table as before, and
-- no row below the cursor is written. So a queued redelivery is a row of a table of its own, which
-- only Redeliver fills and only the claim of a stream with nothing else due reads, from the primary
-- key: lowest sequence first, as far as the claim's share. A stream's redeliveries are claimed under
-- its lease (the streams table's lease_token and held count) like its deliveries, so a stream still
-- has one holder. Delivered or abandoned, a redelivery's row is deleted; failed or handed back, it
-- is updated in place. The table is cold — it holds rows only while a resend or a recovery runs,
-- and they come from support engineers, not from traffic — so, unlike the hot tables
-- (0002_delivery_cursors.sql), it lives with deletes and the dead rows they leave until autovacuum
-- or the next VACUUM. Only the claim of a stream that has nothing else due reads it, so the dead
-- entries a finished recovery leaves in the index cost the claims of that stream alone, and only
-- while it is idle; the first scan that meets them marks them dead in the index, and the next ones
-- step over them. Retention deletes a removed event's row with the event.
CREATE TABLE IF NOT EXISTS {{redeliveries}} (
    stream          text        NOT NULL,
    seq             bigint      NOT NULL,
    next_attempt_at timestamptz NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0,
    lease_token     bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (stream, seq)
);
