-- The delivery history.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: attempts
-- Attempts: a stream's delivery history, filtered by sequence ($2) and outcome ($3) when not 0,
-- newest first by time, never by ID, which is random; the cursor ($4) is the position of the
-- attempt it names (none, when retention removed it: an empty page).
SELECT id, seq, event_id, number, outcome, at, latency_us, status_code, class, reason, response, retry_at
FROM {{attempts}}
WHERE stream = $1 AND ($2::bigint = 0 OR seq = $2) AND ($3::smallint = 0 OR outcome = $3)
  AND ($4::bigint = 0 OR (at, seq, number) < (SELECT c.at, c.seq, c.number FROM {{attempts}} c WHERE c.stream = $1 AND c.id = $4))
ORDER BY at DESC, seq DESC, number DESC
LIMIT $5
