-- The delivery state, of one event and per stream.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: status
-- Status: one event's delivery state, from where it is kept: its row of the deliveries table when it
-- has one; its history when the stream's cursor has passed it (delivered, or abandoned when an
-- attempt says so) — the attempts up to the first that settled it, since those after it are its
-- redeliveries' (redeliver.sql), which leave its state as it was; otherwise it is pending, due at its creation, and leased when the stream's
-- holder claimed it (at most fresh, while deliveries are held). No row: no such event.
SELECT e.created, e.seq <= c.acked, c.held > 0 AND e.seq <= c.fresh, c.lease_until, c.lease_token,
       d.state, d.attempts, d.next_attempt_at, d.lease_token, d.last_attempt_at, d.last_error, d.delivered_at,
       h.failed, h.last_at, h.last_error, h.delivered_at, h.abandoned
FROM {{events}} e
JOIN {{streams}} c ON c.stream = e.stream
LEFT JOIN {{deliveries}} d ON d.stream = e.stream AND d.seq = e.seq
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE a.outcome <> 2) AS failed, max(a.at) AS last_at,
           (array_agg(a.reason ORDER BY a.at DESC, a.number DESC) FILTER (WHERE a.outcome <> 2))[1] AS last_error,
           max(a.at) FILTER (WHERE a.outcome = 2) AS delivered_at, bool_or(a.outcome = 3) AS abandoned
    FROM {{attempts}} a WHERE a.stream = e.stream AND a.seq = e.seq
      AND a.number <= (SELECT COALESCE(min(b.number), 2147483647) FROM {{attempts}} b
                       WHERE b.stream = e.stream AND b.seq = e.seq AND b.outcome <> 1)) h ON d.seq IS NULL AND e.seq <= c.acked
WHERE e.stream = $1 AND e.seq = $2

-- name: backlog
-- Backlog: per stream, the undelivered events — those above the cursor that are not settled out of
-- order — and the creation of the lowest, plus the unnumbered events of the pending table. It reads
-- each stream's row and its rows of the deliveries table, never the events it counts.
SELECT stream, sum(n)::bigint, min(oldest) FROM (
    SELECT c.stream, c.last_seq - GREATEST(c.acked, c.pruned_through)
               - (SELECT count(*) FROM {{deliveries}} d
                  WHERE d.stream = c.stream AND d.seq > GREATEST(c.acked, c.pruned_through) AND d.state <> 0) AS n,
           (SELECT e.created FROM {{events}} e
            WHERE e.stream = c.stream AND e.seq > GREATEST(c.acked, c.pruned_through)
              AND NOT EXISTS (SELECT 1 FROM {{deliveries}} d WHERE d.stream = e.stream AND d.seq = e.seq AND d.state <> 0)
            ORDER BY e.seq LIMIT 1) AS oldest
    FROM {{streams}} c WHERE c.last_seq > GREATEST(c.acked, c.pruned_through)
    UNION ALL
    SELECT stream, count(*), min(created) FROM {{pending}} GROUP BY stream) b
GROUP BY stream
HAVING sum(n) > 0
ORDER BY stream
