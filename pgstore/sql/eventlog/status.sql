-- The delivery state, of one event and per stream.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: status
-- Status: one event's delivery state.
SELECT state, attempts, next_attempt_at, lease_until, last_attempt_at, last_error, delivered_at
FROM {{events}} WHERE stream = $1 AND seq = $2

-- name: backlog
-- Backlog: pending deliveries (the due index covers state = 0) and unnumbered events, per stream.
SELECT stream, sum(n)::bigint, min(oldest) FROM (
    SELECT stream, count(*) AS n, min(created) AS oldest FROM {{events}} WHERE state = 0 GROUP BY stream
    UNION ALL
    SELECT stream, count(*), min(created) FROM {{pending}} GROUP BY stream) b
GROUP BY stream
ORDER BY stream
