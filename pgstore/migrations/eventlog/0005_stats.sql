-- Delivery statistics (EventLog.StreamStats, driver.StatsReader): running aggregates of the delivery
-- history, so that an endpoint's statistics for the last hour, day and week cost the same to read
-- whatever the history holds. For the defaults:
--
--   CREATE TABLE "webhook_events_stats" (  -- a fixed number of rows per stream: two rings
--       stream    text     NOT NULL,
--       slot      smallint NOT NULL,  -- 0-59: minute m's bucket is slot m mod 60;
--                                     -- 60-227: hour h's is 60 + h mod 168 (m, h counted from the epoch)
--       start     bigint   NOT NULL,  -- the bucket the slot holds: its start, unix seconds
--       delivered bigint   NOT NULL,  -- the bucket's attempts by outcome
--       failed    bigint   NOT NULL,
--       abandoned bigint   NOT NULL,
--       latency   bigint[] NOT NULL,  -- 64 counts, driver.LatencyHistogram's buckets
--       PRIMARY KEY (stream, slot)
--   ) WITH (fillfactor = 50);
--   -- the bucket of a latency in microseconds: width_bucket over driver.LatencyHistogram's bounds
--   CREATE FUNCTION "webhook_events_stats_bucket"(bigint) RETURNS integer;
--   -- fed by every insertion into the history, whatever statement makes it
--   CREATE TRIGGER "webhook_events_stats" AFTER INSERT ON "webhook_events_attempts"
--       REFERENCING NEW TABLE AS new_attempts FOR EACH STATEMENT EXECUTE FUNCTION "webhook_events_stats_fn"();
--
-- Why this shape:
--   - Rings, not a row per bucket: a slot is reused when its turn comes round again, and reset then
--     (a write whose bucket starts later than the slot's replaces it; one that starts earlier — an
--     attempt recorded a ring's length late — is not counted). A stream has at most 228 rows, about
--     0.6 KB each, whatever its history; nothing is ever deleted, so nothing needs VACUUM, and a
--     read of a stream's statistics is an index range of at most 228 rows.
--   - Updates in place are HOT: no indexed column changes (the key is the stream and the slot) and
--     half of each page is left free, so PostgreSQL prunes the old versions inside the page as it
--     reads it, without VACUUM, as for the streams table (0002_delivery_cursors.sql).
--   - A statement-level trigger on the history, not a step of the settlement statement: every
--     statement that inserts attempts — Settle's, and any added later — feeds the statistics
--     without knowing of them, and the aggregates cannot drift from the history by a code path
--     that forgot them. It runs once per statement, over the statement's new rows (a transition
--     table), grouped by stream and slot: one upsert of two rows per stream a settlement touches,
--     in (stream, slot) order, so that two transactions writing the same rows take their locks in
--     the same order and never deadlock; ON CONFLICT DO UPDATE adds to the row's latest version,
--     so no count is lost. In practice one transaction at a time writes a stream's rows, since a
--     stream has one holder at a time. Its cost, measured with BenchmarkEventLogSettle (64
--     deliveries of 64 streams per Settle): about 1 ms added to about 7 ms, some 15 %.
--   - Retention (Cleanup) deletes attempts, never statistics: they are aggregates and age out of
--     the windows by themselves.
--
-- The latency buckets' bounds are literals here and computed in Go (driver.LatencyBucket); the
-- tests check that the two agree for every bound and many other durations.
--
-- Statistics start with this migration: history recorded before it is not counted (a backfill would
-- read the whole history table while holding off every settlement, for figures that are gone from
-- every window within a week). The trigger is created only when missing, so that adopting tables
-- that have it takes no lock on the history; creating it takes a SHARE ROW EXCLUSIVE lock on the
-- history table, which waits for the settlements in flight and holds off the next ones for a moment.
CREATE TABLE IF NOT EXISTS {{stats}} (
    stream    text     NOT NULL,
    slot      smallint NOT NULL,
    start     bigint   NOT NULL,
    delivered bigint   NOT NULL,
    failed    bigint   NOT NULL,
    abandoned bigint   NOT NULL,
    latency   bigint[] NOT NULL,
    PRIMARY KEY (stream, slot)
) WITH (fillfactor = 50);
CREATE OR REPLACE FUNCTION {{stats_bucket}}(latency_us bigint) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS {{do}}
    SELECT width_bucket(latency_us, '{1000,1189,1414,1682,2000,2378,2828,3364,4000,4757,5657,6727,8000,9514,11314,13454,16000,19027,22627,26909,32000,38055,45255,53817,64000,76109,90510,107635,128000,152219,181019,215269,256000,304437,362039,430539,512000,608874,724077,861078,1024000,1217748,1448155,1722156,2048000,2435496,2896309,3444312,4096000,4870992,5792619,6888623,8192000,9741985,11585238,13777247,16384000,19483969,23170475,27554494,32768000,38967939,46340950}'::bigint[])
{{do}};
-- r: each new attempt in its minute's and its hour's slot. newest: per slot, the latest bucket of the
-- statement's attempts (an attempt of an earlier bucket in the same slot is a ring's length late).
-- k: per slot and latency bucket, the counts. g: per slot, the counts and the histogram, 64 counts.
-- The upsert adds them to the row's when it holds the same bucket, or puts them in its place when it
-- holds an earlier one. Array arithmetic is what costs here (a 64-element sum is ten times a
-- scalar's), so the common case — all of a slot's new attempts in one latency bucket, as when a
-- settlement brings one attempt per stream — builds and adds that one element: the bucket is then
-- the one whose count is the slot's whole count. Only a slot that gets several buckets at once
-- adds every element.
CREATE OR REPLACE FUNCTION {{stats_fn}}() RETURNS trigger LANGUAGE plpgsql AS {{do}}
BEGIN
    WITH r AS (
        SELECT n.stream, x.slot, x.start, n.outcome, {{stats_bucket}}(n.latency_us) AS b
        FROM new_attempts n
        CROSS JOIN LATERAL (SELECT floor(extract(epoch FROM n.at) / 60)::bigint AS m,
                                   floor(extract(epoch FROM n.at) / 3600)::bigint AS h) t
        CROSS JOIN LATERAL (VALUES (mod(mod(t.m, 60) + 60, 60)::smallint, t.m * 60),
                                   ((60 + mod(mod(t.h, 168) + 168, 168))::smallint, t.h * 3600)) x(slot, start)),
    newest AS (SELECT stream, slot, max(start) AS start FROM r GROUP BY stream, slot),
    k AS (
        SELECT r.stream, r.slot, r.start, r.b, count(*) AS n,
               count(*) FILTER (WHERE r.outcome = 2) AS delivered, count(*) FILTER (WHERE r.outcome = 1) AS failed,
               count(*) FILTER (WHERE r.outcome = 3) AS abandoned
        FROM r JOIN newest USING (stream, slot, start)
        GROUP BY r.stream, r.slot, r.start, r.b),
    g AS (
        SELECT stream, slot, start, sum(delivered)::bigint AS delivered, sum(failed)::bigint AS failed,
               sum(abandoned)::bigint AS abandoned, count(*) AS buckets, array_agg(b) AS bs, array_agg(n) AS ns
        FROM k GROUP BY stream, slot, start)
    INSERT INTO {{stats}} AS s (stream, slot, start, delivered, failed, abandoned, latency)
    SELECT g.stream, g.slot, g.start, g.delivered, g.failed, g.abandoned,
           CASE WHEN g.buckets = 1
               THEN array_fill(0::bigint, ARRAY[g.bs[1]]) || g.ns[1] || array_fill(0::bigint, ARRAY[63 - g.bs[1]])
               ELSE ARRAY(SELECT COALESCE(sum(u.n), 0)::bigint FROM generate_series(0, 63) i
                          LEFT JOIN unnest(g.bs, g.ns) u(b, n) ON u.b = i GROUP BY i ORDER BY i) END
    FROM g
    ORDER BY g.stream, g.slot
    ON CONFLICT (stream, slot) DO UPDATE SET
        start = EXCLUDED.start,
        delivered = EXCLUDED.delivered + CASE WHEN s.start = EXCLUDED.start THEN s.delivered ELSE 0 END,
        failed = EXCLUDED.failed + CASE WHEN s.start = EXCLUDED.start THEN s.failed ELSE 0 END,
        abandoned = EXCLUDED.abandoned + CASE WHEN s.start = EXCLUDED.start THEN s.abandoned ELSE 0 END,
        latency = CASE
            WHEN s.start <> EXCLUDED.start THEN EXCLUDED.latency
            ELSE (SELECT CASE WHEN o.p IS NOT NULL
                              THEN s.latency[1:o.p - 1] || (s.latency[o.p] + o.total) || s.latency[o.p + 1:64]
                              ELSE ARRAY(SELECT u.a + u.b FROM unnest(s.latency, EXCLUDED.latency) WITH ORDINALITY u(a, b, i)
                                         ORDER BY u.i) END
                  FROM (SELECT array_position(EXCLUDED.latency, o.total) AS p, o.total
                        FROM (SELECT EXCLUDED.delivered + EXCLUDED.failed + EXCLUDED.abandoned AS total) o) o) END
    WHERE s.start <= EXCLUDED.start;
    RETURN NULL;
END {{do}};
DO {{do}} BEGIN
    IF NOT EXISTS (SELECT FROM pg_trigger WHERE tgrelid = {{attempts_lit}}::regclass AND tgname = {{stats_trigger_lit}}) THEN
        CREATE TRIGGER {{stats_trigger}} AFTER INSERT ON {{attempts}}
            REFERENCING NEW TABLE AS new_attempts FOR EACH STATEMENT EXECUTE FUNCTION {{stats_fn}}();
    END IF;
END {{do}};
