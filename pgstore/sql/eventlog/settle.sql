-- The settlement of leased deliveries: the stream's cursor or the delivery's row, and the attempt in
-- the history. It runs after lock_streams (claim.sql), in the same transaction.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: settle
-- Settle: many leased deliveries in one statement. m: the settlements (one per delivery; the first
-- wins). v: those still leased under their token, as for release (claim.sql); a settlement whose
-- lease is lost changes nothing and records nothing. retrying: a failure with a retry time; the
-- others (delivered, abandoned) settle their event for good. done: per stream, the events settled
-- for good above the cursor, now or before (the rows of earlier settlements out of order). cur: the
-- new cursor, the end of the run of settled events just above the old one (the first of the
-- candidate positions — the old cursor's successor and each settled event's — that is not settled,
-- less one). del: the rows the cursor passed. up: a row for what stays above it — a retry, or a
-- settlement out of order. cs: the stream's cursor, its held count (the lease ends with the last
-- settlement), next_due, down to the earliest retry, and hold_until, up to the latest hold ($13;
-- NULL for none). ins: the history, numbered from the
-- delivery's failed attempts before this one. The INSERT overrides the system value because history
-- tables made before random attempt IDs have an identity column. The ordinals that come back are
-- the settlements that took. In the common case — the next event, delivered — only the stream's row
-- changes, and the history gets its row.
WITH m AS (
    SELECT DISTINCT ON (stream, seq) * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::boolean[],
            $5::timestamptz[], $6::timestamptz[], $7::bigint[], $8::integer[], $9::text[], $10::text[],
            $11::text[], $12::bigint[], $13::timestamptz[])
        WITH ORDINALITY AS m(stream, seq, token, ok, at, retry, latency_us, status_code, class, reason,
                             response, attempt_id, hold, ord)
    ORDER BY stream, seq, ord),
v AS MATERIALIZED (
    SELECT m.*, GREATEST(c.acked, c.pruned_through) AS base, NOT m.ok AND m.retry IS NOT NULL AS retrying,
           COALESCE(d.attempts, 0) AS failed, COALESCE(d.last_error, '') AS last_error
    FROM m JOIN {{streams}} c ON c.stream = m.stream
    LEFT JOIN {{deliveries}} d ON d.stream = m.stream AND d.seq = m.seq
    WHERE c.lease_token = m.token AND c.held > 0
      AND m.seq > GREATEST(c.acked, c.pruned_through) AND m.seq <= c.last_seq
      AND CASE WHEN d.seq IS NULL THEN m.seq <= c.fresh ELSE d.state = 0 AND d.lease_token = m.token END),
b AS (SELECT DISTINCT stream, base FROM v),
done AS MATERIALIZED (
    SELECT stream, seq FROM v WHERE NOT retrying
    UNION
    SELECT d.stream, d.seq FROM {{deliveries}} d JOIN b ON d.stream = b.stream AND d.seq > b.base
    WHERE d.state <> 0),
cur AS MATERIALIZED (
    SELECT b.stream, b.base AS old, (
        SELECT min(p.p) - 1 FROM (SELECT b.base + 1 AS p UNION ALL SELECT x.seq + 1 FROM done x WHERE x.stream = b.stream) p
        WHERE NOT EXISTS (SELECT 1 FROM done x WHERE x.stream = b.stream AND x.seq = p.p)) AS acked
    FROM b),
del AS (
    DELETE FROM {{deliveries}} d USING cur
    WHERE d.stream = cur.stream AND d.seq > cur.old AND d.seq <= cur.acked),
up AS (
    INSERT INTO {{deliveries}} AS d (stream, seq, state, attempts, next_attempt_at, lease_token, last_attempt_at,
                                     last_error, delivered_at)
    SELECT v.stream, v.seq, CASE WHEN v.ok THEN 1 WHEN v.retrying THEN 0 ELSE 2 END,
           v.failed + CASE WHEN v.ok THEN 0 ELSE 1 END, CASE WHEN v.retrying THEN v.retry END, 0, v.at,
           CASE WHEN v.ok THEN v.last_error ELSE v.reason END, CASE WHEN v.ok THEN v.at END
    FROM v JOIN cur ON cur.stream = v.stream
    WHERE v.seq > cur.acked
    ORDER BY v.stream, v.seq
    ON CONFLICT (stream, seq) DO UPDATE SET state = EXCLUDED.state, attempts = EXCLUDED.attempts,
        next_attempt_at = EXCLUDED.next_attempt_at, lease_token = 0, last_attempt_at = EXCLUDED.last_attempt_at,
        last_error = EXCLUDED.last_error, delivered_at = EXCLUDED.delivered_at),
cs AS (
    UPDATE {{streams}} c SET acked = GREATEST(c.acked, cur.acked), fresh = GREATEST(c.fresh, cur.acked),
        held = GREATEST(c.held - n.k, 0),
        lease_until = CASE WHEN c.held - n.k <= 0 THEN NULL ELSE c.lease_until END,
        next_due = LEAST(c.next_due, n.retry), hold_until = GREATEST(c.hold_until, n.hold)
    FROM cur JOIN (SELECT stream, count(*) AS k, min(retry) FILTER (WHERE retrying) AS retry, max(hold) AS hold
                   FROM v GROUP BY stream) n
        ON n.stream = cur.stream
    WHERE c.stream = cur.stream),
ins AS (
    INSERT INTO {{attempts}} (id, stream, seq, event_id, number, outcome, at, latency_us, status_code, class, reason,
                              response, retry_at)
    OVERRIDING SYSTEM VALUE
    SELECT v.attempt_id, v.stream, v.seq, e.id, v.failed + 1,
           CASE WHEN v.ok THEN 2 WHEN v.retrying THEN 1 ELSE 3 END,
           v.at, v.latency_us, v.status_code, v.class, v.reason, v.response, v.retry
    FROM v JOIN {{events}} e ON e.stream = v.stream AND e.seq = v.seq
    ORDER BY v.stream, v.seq)
SELECT ord FROM v
