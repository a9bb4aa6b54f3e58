-- One stream's delivery statistics (StreamStats): the aggregates the history's trigger keeps
-- (migrations/eventlog/0005_stats.sql), and the stream's backlog.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: stream_stats
-- The stream's ring rows, at most 228, by the primary key; the caller keeps those of the windows.
SELECT slot, start, delivered, failed, abandoned, latency FROM {{stats}} WHERE stream = $1

-- name: stream_backlog
-- Backlog's (status.sql) for one stream ($1), with its pending table's part read from the low-water
-- mark ($2, as for sequence.sql) up. lw: the mark raised as the low_water statement would — the
-- older of the oldest transaction still running and the oldest with a row that waits from $2 up —
-- which every waiting row is at or above; it walks only the rows moved since the mark last rose.
-- c: the stream's undelivered numbered events, those above its cursor not settled out of order,
-- from its row and its rows of the deliveries table, and the creation of the lowest (the events are
-- never counted, only read by key from the cursor up to the first undelivered one). p: its
-- unnumbered events. No stream row: no numbered event. The new mark comes back for the log to keep.
WITH lw AS MATERIALIZED (
    SELECT LEAST(pg_snapshot_xmin(pg_current_snapshot()),
                 (SELECT min(xid) FROM {{pending}} WHERE xid >= $2::text::xid8 AND xid < '18446744073709551615'::xid8)) AS x)
SELECT COALESCE(c.n, 0), c.oldest, p.n, p.oldest, lw.x::text
FROM lw
LEFT JOIN LATERAL (
    SELECT c.last_seq - GREATEST(c.acked, c.pruned_through)
               - (SELECT count(*) FROM {{deliveries}} d
                  WHERE d.stream = c.stream AND d.seq > GREATEST(c.acked, c.pruned_through) AND d.state <> 0) AS n,
           (SELECT e.created FROM {{events}} e
            WHERE e.stream = c.stream AND e.seq > GREATEST(c.acked, c.pruned_through)
              AND NOT EXISTS (SELECT 1 FROM {{deliveries}} d WHERE d.stream = e.stream AND d.seq = e.seq AND d.state <> 0)
            ORDER BY e.seq LIMIT 1) AS oldest
    FROM {{streams}} c WHERE c.stream = $1 AND c.last_seq > GREATEST(c.acked, c.pruned_through)) c ON true
CROSS JOIN LATERAL (
    SELECT count(*) AS n, min(created) AS oldest FROM {{pending}}
    WHERE stream = $1 AND xid >= lw.x AND xid < '18446744073709551615'::xid8) p
