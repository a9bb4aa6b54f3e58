-- Redeliveries: settled events queued to be pushed again, their settlement and their release.
-- migrations/eventlog/0004_redeliveries.sql says why they have a table of their own; claim (claim.sql)
-- takes a stream's due redeliveries when nothing of its normal stream is due. The settlements run
-- after lock_streams (claim.sql), in the same transaction.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: redeliver
-- Redeliver: queues the settled events of stream $1 with $2 ≤ seq ≤ $3, due at $4. c: the stream's
-- row, locked, as its last writer left it (a locking read waits for a claim, settlement or cleanup
-- that holds it and then reads the row's newest version), so that nothing is queued below the
-- watermark a cleanup has just moved, and the cursor includes what a settlement has just passed. q:
-- the settled events of the range, each once — those the cursor passed, a series that reads no
-- table, and those settled out of order above it, rows of the deliveries table; none when $2 lies
-- below the retained window, which the caller reports as pruned. ins: the ones not queued already.
-- up: the stream's next_due comes down to $4, so that claim_streams finds the stream. The row that
-- comes back: the stream's watermark, its last sequence and how many were queued; no row: no such
-- stream.
WITH c AS MATERIALIZED (
    SELECT stream, pruned_through, last_seq, GREATEST(acked, pruned_through) AS base
    FROM {{streams}} WHERE stream = $1 FOR UPDATE),
q AS (
    SELECT c.stream, g.seq FROM c
    CROSS JOIN LATERAL generate_series(GREATEST($2::bigint, c.pruned_through + 1), LEAST($3::bigint, c.base)) AS g(seq)
    WHERE $2::bigint > c.pruned_through
    UNION ALL
    SELECT d.stream, d.seq FROM c JOIN {{deliveries}} d ON d.stream = c.stream
    WHERE $2::bigint > c.pruned_through AND d.seq > GREATEST(c.base, $2::bigint - 1) AND d.seq <= LEAST($3::bigint, c.last_seq)
      AND d.state <> 0),
ins AS (
    INSERT INTO {{redeliveries}} (stream, seq, next_attempt_at)
    SELECT stream, seq, $4 FROM q ORDER BY seq
    ON CONFLICT (stream, seq) DO NOTHING
    RETURNING seq),
up AS (
    UPDATE {{streams}} s SET next_due = LEAST(s.next_due, $4)
    WHERE s.stream = $1 AND EXISTS (SELECT 1 FROM ins))
SELECT c.pruned_through, c.last_seq, (SELECT count(*) FROM ins) FROM c

-- name: settle_redeliveries
-- Settle, for the leases of redeliveries: the same arguments as settle (settle.sql). m: the
-- settlements (one per redelivery; the first wins). v: those still leased under their token — the
-- stream's current lease, and the queued redelivery its claim leased; a settlement whose lease is
-- lost changes nothing and records nothing. gone: delivered and abandoned redeliveries leave the
-- queue; up: a failed one with a retry time stays, due then, one failed attempt more. cs: the
-- stream's held count (the lease ends with the last settlement), next_due, down to the earliest
-- retry, and hold_until, up to the latest hold, as settle does; its cursor is not moved, nor the event's own state. ins: the history,
-- numbered on from the event's highest number (the history's (stream, seq, id) index finds its few
-- attempts). The ordinals that come back are the settlements that took.
WITH m AS (
    SELECT DISTINCT ON (stream, seq) * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::boolean[],
            $5::timestamptz[], $6::timestamptz[], $7::bigint[], $8::integer[], $9::text[], $10::text[],
            $11::text[], $12::bigint[], $13::timestamptz[])
        WITH ORDINALITY AS m(stream, seq, token, ok, at, retry, latency_us, status_code, class, reason,
                             response, attempt_id, hold, ord)
    ORDER BY stream, seq, ord),
v AS MATERIALIZED (
    SELECT m.*, NOT m.ok AND m.retry IS NOT NULL AS retrying
    FROM m JOIN {{streams}} c ON c.stream = m.stream
    JOIN {{redeliveries}} r ON r.stream = m.stream AND r.seq = m.seq
    WHERE c.lease_token = m.token AND c.held > 0 AND r.lease_token = m.token),
gone AS (
    DELETE FROM {{redeliveries}} r USING v
    WHERE NOT v.retrying AND r.stream = v.stream AND r.seq = v.seq),
up AS (
    UPDATE {{redeliveries}} r SET attempts = r.attempts + 1, next_attempt_at = v.retry, lease_token = 0
    FROM v WHERE v.retrying AND r.stream = v.stream AND r.seq = v.seq),
cs AS (
    UPDATE {{streams}} c SET held = GREATEST(c.held - n.k, 0),
        lease_until = CASE WHEN c.held - n.k <= 0 THEN NULL ELSE c.lease_until END,
        next_due = LEAST(c.next_due, n.retry), hold_until = GREATEST(c.hold_until, n.hold)
    FROM (SELECT stream, count(*) AS k, min(retry) FILTER (WHERE retrying) AS retry, max(hold) AS hold
          FROM v GROUP BY stream) n
    WHERE c.stream = n.stream),
ins AS (
    INSERT INTO {{attempts}} (id, stream, seq, event_id, number, outcome, at, latency_us, status_code, class, reason,
                              response, retry_at)
    OVERRIDING SYSTEM VALUE
    SELECT v.attempt_id, v.stream, v.seq, e.id,
           COALESCE((SELECT max(a.number) FROM {{attempts}} a WHERE a.stream = v.stream AND a.seq = v.seq), 0) + 1,
           CASE WHEN v.ok THEN 2 WHEN v.retrying THEN 1 ELSE 3 END,
           v.at, v.latency_us, v.status_code, v.class, v.reason, v.response, v.retry
    FROM v JOIN {{events}} e ON e.stream = v.stream AND e.seq = v.seq
    ORDER BY v.stream, v.seq)
SELECT ord FROM v

-- name: release_redeliveries
-- Release, for the leases of redeliveries: the same arguments as release (claim.sql). v: those still
-- leased under their token, as for settle_redeliveries. Each stays queued, due at its time, held by
-- no one, with no attempt counted; the stream's held count drops by as many (the lease ends with the
-- last), and its next_due comes down to the earliest. The ordinals that come back are the releases
-- that took.
WITH m AS (
    SELECT DISTINCT ON (stream, seq) * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::timestamptz[],
            $5::timestamptz[])
        WITH ORDINALITY AS m(stream, seq, token, due, hold, ord)
    ORDER BY stream, seq, ord),
v AS MATERIALIZED (
    SELECT m.* FROM m JOIN {{streams}} c ON c.stream = m.stream
    JOIN {{redeliveries}} r ON r.stream = m.stream AND r.seq = m.seq
    WHERE c.lease_token = m.token AND c.held > 0 AND r.lease_token = m.token),
up AS (
    UPDATE {{redeliveries}} r SET next_attempt_at = v.due, lease_token = 0
    FROM v WHERE r.stream = v.stream AND r.seq = v.seq),
cs AS (
    UPDATE {{streams}} c SET held = GREATEST(c.held - n.k, 0),
        lease_until = CASE WHEN c.held - n.k <= 0 THEN NULL ELSE c.lease_until END,
        next_due = LEAST(c.next_due, n.due), hold_until = GREATEST(c.hold_until, n.hold)
    FROM (SELECT stream, count(*) AS k, min(due) AS due, max(hold) AS hold FROM v GROUP BY stream) n
    WHERE c.stream = n.stream)
SELECT ord FROM v
