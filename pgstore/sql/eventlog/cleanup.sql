-- Retention: Cleanup runs these in one transaction, in this order.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: cleanup_pick
-- Cleanup, first: the oldest events created before $1, at most $2, locked (skipping rows another
-- transaction has locked), and for each of their streams the highest sequence among them.
WITH doomed AS (
    SELECT stream, seq FROM {{events}} WHERE created < $1
    ORDER BY created, stream, seq LIMIT $2
    FOR UPDATE SKIP LOCKED)
SELECT stream, max(seq) FROM doomed GROUP BY stream ORDER BY stream

-- name: cleanup_lock
-- Cleanup, second: the streams' counter rows, locked in one order so that Cleanup never deadlocks
-- with itself elsewhere.
SELECT stream FROM {{streams}} WHERE stream = ANY($1) ORDER BY stream FOR UPDATE

-- name: cleanup_delete
-- Cleanup, last: each stream's watermark moves to what is removed (Range reads it with the events),
-- and its events up to there go, with their delivery history.
WITH m AS (SELECT * FROM unnest($1::text[], $2::bigint[]) AS m(stream, through)),
u AS (UPDATE {{streams}} c SET pruned_through = GREATEST(c.pruned_through, m.through) FROM m WHERE c.stream = m.stream),
h AS (DELETE FROM {{attempts}} h USING m WHERE h.stream = m.stream AND h.seq <= m.through)
DELETE FROM {{events}} e USING m WHERE e.stream = m.stream AND e.seq <= m.through
