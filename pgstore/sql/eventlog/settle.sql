-- The settlement of leased deliveries: their state and their attempt in the history.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: settle
-- Settle: many leased deliveries in one statement, the fenced UPDATE of each delivery's state and
-- the INSERT of its attempt into the history. A row whose lease is lost updates nothing and records
-- nothing; the ordinals that come back are the settlements that took. The INSERT overrides the
-- system value because history tables made before random attempt IDs have an identity column.
WITH m AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::boolean[], $5::timestamptz[],
                         $6::timestamptz[], $7::bigint[], $8::integer[], $9::text[], $10::text[], $11::text[],
                         $12::bigint[])
        WITH ORDINALITY AS m(stream, seq, token, ok, at, retry, latency_us, status_code, class, reason, response,
                             attempt_id, ord)),
u AS (
    UPDATE {{events}} e SET
        state = CASE WHEN m.ok THEN 1 WHEN m.retry IS NULL THEN 2 ELSE 0 END,
        attempts = e.attempts + CASE WHEN m.ok THEN 0 ELSE 1 END,
        delivered_at = CASE WHEN m.ok THEN m.at ELSE e.delivered_at END,
        last_attempt_at = m.at,
        next_attempt_at = CASE WHEN m.ok THEN NULL ELSE m.retry END,
        last_error = CASE WHEN m.ok THEN e.last_error ELSE m.reason END,
        lease_until = NULL
    FROM m
    WHERE e.stream = m.stream AND e.seq = m.seq AND e.lease_token = m.token AND e.state = 0
    RETURNING m.ord, e.id AS event_id, e.attempts AS failed, e.state AS state),
ins AS (
    INSERT INTO {{attempts}} (id, stream, seq, event_id, number, outcome, at, latency_us, status_code, class, reason,
                         response, retry_at)
    OVERRIDING SYSTEM VALUE
    SELECT m.attempt_id, m.stream, m.seq, u.event_id, u.failed + CASE WHEN m.ok THEN 1 ELSE 0 END,
           CASE WHEN m.ok THEN 2 WHEN m.retry IS NULL THEN 3 ELSE 1 END,
           m.at, m.latency_us, m.status_code, m.class, m.reason, m.response, m.retry
    FROM u JOIN m ON m.ord = u.ord
    ORDER BY m.stream, m.seq)
SELECT ord FROM u
