-- The leases of deliveries, fenced by a token that every claim raises.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: claim
-- Claim: the candidates are the due deliveries ($1: now) of streams that nobody holds (no live
-- lease), not skipped ($4), at most $5 of a stream (its lowest sequences), at most $3 in all. Then
-- lock them, re-checked, skipping rows another replica locked, and lease them until $2 under a new
-- fencing token.
WITH cand AS (
    SELECT stream, seq FROM (
        SELECT e.stream, e.seq, e.next_attempt_at,
               row_number() OVER (PARTITION BY e.stream ORDER BY e.seq) AS rn
        FROM {{events}} e
        WHERE e.state = 0 AND e.next_attempt_at <= $1 AND (e.lease_until IS NULL OR e.lease_until <= $1)
          AND NOT (e.stream = ANY($4::text[]))
          AND NOT EXISTS (SELECT 1 FROM {{events}} h
                          WHERE h.stream = e.stream AND h.state = 0 AND h.lease_until > $1)) d
    WHERE rn <= $5
    ORDER BY next_attempt_at, stream, seq
    LIMIT $3),
due AS (
    SELECT e.stream, e.seq FROM {{events}} e JOIN cand ON e.stream = cand.stream AND e.seq = cand.seq
    WHERE e.state = 0 AND (e.lease_until IS NULL OR e.lease_until <= $1)
    FOR UPDATE OF e SKIP LOCKED)
UPDATE {{events}} e SET lease_until = $2, lease_token = e.lease_token + 1
FROM due WHERE e.stream = due.stream AND e.seq = due.seq
RETURNING e.stream, e.seq, e.lease_token, e.attempts, e.next_attempt_at,
          e.id, e.type, e.created, e.api_version, e.data,
          COALESCE(e.traceparent, ''), COALESCE(e.tracestate, '')

-- name: release
-- Release: gives a leased delivery back, due again at $4, under its fencing token ($3).
UPDATE {{events}}
SET lease_until = NULL, next_attempt_at = $4
WHERE stream = $1 AND seq = $2 AND lease_token = $3 AND state = 0
