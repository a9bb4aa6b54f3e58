-- Retention: Cleanup runs these in one transaction, in this order.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: cleanup_pick
-- Cleanup, first: which events go. s: the streams that may hold events created before $1 (no
-- retained event of theirs was created before first_created), the oldest first, at most $3 (k of
-- them). w: each one's window — its lowest retained events, from its watermark up by the primary
-- key: its share of $2 and $5 more; a lone stream's, $2 and $4 more (an event numbered before an
-- older one: racing appenders commit out of order). A batch reads $2 rows and a few more, however
-- the expired events are spread; when a few streams hold most of them, the others' go in the first
-- batch, and the next ones read the few alone. x: of the windows' events created before $1, the
-- oldest $2 in all; t: the highest sequence of x per stream; a: the oldest creation among each
-- window's events above that. Per stream of s: its watermark, its highest sequence in x (every
-- lower one goes with it, so that the retained window stays contiguous; the watermark itself when
-- nothing goes), and a's creation, the stream's next first_created (NULL: nothing retained). The
-- windows' rows name their stream by its rank in s, never by its text: they are sorted, joined and
-- grouped by it, and comparing text under the database's collation took two thirds of this
-- statement's time at a batch of 10,000. Every scan starts above a watermark, so the rows earlier
-- batches deleted are never walked, and each batch costs the same. The hint is exact when the
-- window reached the stream's end; otherwise an older event beyond the window (one that more than
-- the window's events overtook) waits until the events before it are old too.
WITH s AS MATERIALIZED (
    SELECT stream, pruned_through, rn, least(k, $3) AS k FROM (
        SELECT stream, pruned_through, first_created,
               row_number() OVER (ORDER BY first_created, stream) AS rn, count(*) OVER () AS k
        FROM {{streams}} WHERE first_created < $1::bigint) c
    ORDER BY first_created, stream LIMIT $3),
w AS MATERIALIZED (
    SELECT s.rn, e.seq, e.created FROM s CROSS JOIN LATERAL (
        SELECT seq, created FROM {{events}} e
        WHERE e.stream = s.stream AND e.seq > s.pruned_through
        ORDER BY e.seq LIMIT CASE WHEN s.k = 1 THEN $2::bigint + $4::bigint
                                  ELSE ($2::bigint + s.k - 1) / s.k + $5::bigint END) e),
t AS MATERIALIZED (
    SELECT rn, max(seq) AS through FROM (
        SELECT rn, seq FROM w WHERE created < $1 ORDER BY created, rn, seq LIMIT $2) x
    GROUP BY rn),
a AS (
    SELECT w.rn, min(w.created) FILTER (WHERE w.seq > COALESCE(t.through, 0)) AS next_created
    FROM w LEFT JOIN t ON t.rn = w.rn GROUP BY w.rn)
SELECT s.stream, s.pruned_through, COALESCE(t.through, s.pruned_through), a.next_created
FROM s LEFT JOIN t ON t.rn = s.rn LEFT JOIN a ON a.rn = s.rn
ORDER BY s.stream

-- name: cleanup_lock
-- Cleanup, second: the streams' rows, locked in one order (lock_streams in claim.sql): they are
-- updated last.
SELECT stream FROM {{streams}} WHERE stream = ANY($1::text[]) ORDER BY stream FOR UPDATE

-- name: cleanup_delete
-- Cleanup, last: each stream's watermark moves to what is removed (Range reads it with the events),
-- its cursor with it (an undelivered event removed is settled by its removal), and its first_created
-- hint to what cleanup_pick found ($4; when it found nothing retained, the creation of the stream's
-- first event above the watermark, which the sequencer may have numbered since). Its events from
-- above the old watermark ($2) up to there go, with their delivery rows, queued redeliveries and
-- history: found stream by
-- stream through the index (a LATERAL subquery that OFFSET 0 keeps from being flattened into a join)
-- and deleted by row address. A join of the batch's streams with the table would let the planner,
-- which has no statistics without ANALYZE, prefer to read the whole table into a hash: every batch
-- would then cost the table.
WITH m AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])
               AS m(stream, after, through, first_created)),
u AS (
    UPDATE {{streams}} c SET pruned_through = GREATEST(c.pruned_through, m.through),
        acked = GREATEST(c.acked, m.through), fresh = GREATEST(c.fresh, m.through),
        first_created = COALESCE(m.first_created, (SELECT e.created FROM {{events}} e
                                                   WHERE e.stream = m.stream AND e.seq > m.through ORDER BY e.seq LIMIT 1))
    FROM m WHERE c.stream = m.stream),
h AS (
    DELETE FROM {{attempts}} WHERE ctid = ANY (ARRAY(
        SELECT x.ctid FROM m CROSS JOIN LATERAL (
            SELECT h.ctid FROM {{attempts}} h WHERE h.stream = m.stream AND h.seq > m.after AND h.seq <= m.through
            OFFSET 0) x))),
d AS (
    DELETE FROM {{deliveries}} WHERE ctid = ANY (ARRAY(
        SELECT x.ctid FROM m CROSS JOIN LATERAL (
            SELECT d.ctid FROM {{deliveries}} d WHERE d.stream = m.stream AND d.seq > m.after AND d.seq <= m.through
            OFFSET 0) x))),
r AS (
    DELETE FROM {{redeliveries}} WHERE ctid = ANY (ARRAY(
        SELECT x.ctid FROM m CROSS JOIN LATERAL (
            SELECT r.ctid FROM {{redeliveries}} r WHERE r.stream = m.stream AND r.seq <= m.through
            OFFSET 0) x)))
DELETE FROM {{events}} WHERE ctid = ANY (ARRAY(
    SELECT x.ctid FROM m CROSS JOIN LATERAL (
        SELECT e.ctid FROM {{events}} e WHERE e.stream = m.stream AND e.seq > m.after AND e.seq <= m.through
        OFFSET 0) x))
