-- The leases of deliveries: a stream's holder is its row in the streams table, fenced by a token
-- that every claim raises. migrations/eventlog/0002_delivery_cursors.sql says what the columns mean.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: claim_streams
-- Claim, first: the streams with something due ($1: now) that nobody holds (no claimed delivery
-- unsettled, or the holder's lease ended), not held back past now (hold_until: a settlement's
-- driver.Settlement.Hold), not skipped ($2), the most overdue first, at most $3 (a
-- claim takes one delivery of a stream at least). Locked, skipping the rows another claim, a
-- settlement or the sequencer has locked, until the claim commits. A scan of the streams table, one
-- row per endpoint, never of the events: next_due is not indexed, so that the updates of the row
-- stay HOT and leave no dead index entry behind.
SELECT c.stream FROM {{streams}} c
WHERE c.next_due <= $1 AND (c.held = 0 OR c.lease_until <= $1) AND (c.hold_until IS NULL OR c.hold_until <= $1)
  AND NOT (c.stream = ANY($2::text[]))
ORDER BY c.next_due, c.stream
LIMIT $3
FOR UPDATE OF c SKIP LOCKED

-- name: claim
-- Claim, second, in the same transaction and so in a snapshot taken after the streams were locked:
-- leases the due deliveries of the locked streams ($1) until $5 under a new token per stream. s: each
-- stream's cursor (base; what retention removed counts as settled) and where its never-claimed
-- events start (from_fresh): above fresh, or above the cursor when a holder's lease ended with
-- deliveries unsettled, which are then due again. cand: per stream, the lowest $3 of its due
-- deliveries — rows of the deliveries table due by $2 (failed and waiting for their retry, handed
-- back, or leased by a holder whose lease ended), and never-claimed events, in sequence order, as far
-- as they are due by their creation ($4, unix seconds). Those are due in order: each at the latest
-- creation up to it, so that the first that is not due stops the rest, and whatever pick cuts, a
-- stream's never-claimed events are taken from the lowest up, which is what fresh records. idle and
-- redo: the streams that have no candidate — nothing of their normal stream due — and, for each, the
-- lowest $3 of its queued redeliveries due by $2 (redeliver.sql): a stream's redeliveries go behind
-- its normal stream, under the same lease; none is read for a stream with a candidate. pick: the lowest $6 of all by due time, stream and sequence. cs: the
-- streams that got deliveries, leased; cn: those that got none, with next_due recomputed (the
-- earliest retry or redelivery, or the next never-claimed event's creation; NULL: nothing waits) and
-- a lease that ended given up. Both scans start above the cursor, so rows the cursor passed are
-- never walked.
WITH s AS MATERIALIZED (
    SELECT c.stream, GREATEST(c.acked, c.pruned_through) AS base,
           CASE WHEN c.held > 0 THEN GREATEST(c.acked, c.pruned_through)
                ELSE GREATEST(c.fresh, c.acked, c.pruned_through) END AS from_fresh
    FROM {{streams}} c WHERE c.stream = ANY($1::text[])),
cand AS MATERIALIZED (
    SELECT s.stream, x.seq, x.due, x.has_row FROM s CROSS JOIN LATERAL (
        SELECT u.seq, u.due, u.has_row FROM (
            (SELECT d.seq, d.next_attempt_at AS due, true AS has_row FROM {{deliveries}} d
             WHERE d.stream = s.stream AND d.seq > s.base AND d.state = 0 AND d.next_attempt_at <= $2
             ORDER BY d.seq LIMIT $3)
            UNION ALL
            (SELECT f.seq, to_timestamp(f.due), false FROM (
                SELECT e.seq, max(e.created) OVER (ORDER BY e.seq) AS due
                FROM {{events}} e
                WHERE e.stream = s.stream AND e.seq > s.from_fresh
                  AND NOT EXISTS (SELECT 1 FROM {{deliveries}} d WHERE d.stream = e.stream AND d.seq = e.seq)
                ORDER BY e.seq LIMIT $3) f
             WHERE f.due <= $4)) u
        ORDER BY u.seq LIMIT $3) x),
idle AS MATERIALIZED (
    SELECT s.stream FROM s WHERE NOT EXISTS (SELECT 1 FROM cand WHERE cand.stream = s.stream)),
redo AS MATERIALIZED (
    SELECT idle.stream, x.seq, x.due, x.attempts FROM idle CROSS JOIN LATERAL (
        SELECT r.seq, r.next_attempt_at AS due, r.attempts FROM {{redeliveries}} r
        JOIN {{events}} e ON e.stream = r.stream AND e.seq = r.seq
        WHERE r.stream = idle.stream AND r.next_attempt_at <= $2
        ORDER BY r.seq LIMIT $3) x),
pick AS MATERIALIZED (
    SELECT * FROM (
        SELECT stream, seq, due, has_row, false AS redelivery, 0 AS redone FROM cand
        UNION ALL
        SELECT stream, seq, due, true, true, attempts FROM redo) p
    ORDER BY due, stream, seq LIMIT $6),
k AS (
    SELECT stream, count(*) AS n, max(seq) FILTER (WHERE NOT has_row) AS top FROM pick GROUP BY stream),
cs AS (
    UPDATE {{streams}} c SET lease_token = c.lease_token + 1, lease_until = $5, held = k.n,
        fresh = GREATEST(s.from_fresh, k.top)
    FROM k JOIN s ON s.stream = k.stream
    WHERE c.stream = k.stream
    RETURNING c.stream, c.lease_token),
cn AS (
    UPDATE {{streams}} c SET held = 0, lease_until = NULL, fresh = s.from_fresh,
        next_due = LEAST(
            (SELECT min(d.next_attempt_at) FROM {{deliveries}} d WHERE d.stream = s.stream AND d.seq > s.base AND d.state = 0),
            (SELECT to_timestamp(e.created) FROM {{events}} e
             WHERE e.stream = s.stream AND e.seq > s.from_fresh
               AND NOT EXISTS (SELECT 1 FROM {{deliveries}} d WHERE d.stream = e.stream AND d.seq = e.seq)
             ORDER BY e.seq LIMIT 1),
            (SELECT min(r.next_attempt_at) FROM {{redeliveries}} r WHERE r.stream = s.stream))
    FROM s
    WHERE c.stream = s.stream AND NOT EXISTS (SELECT 1 FROM k WHERE k.stream = s.stream)),
dl AS (
    UPDATE {{deliveries}} d SET lease_token = cs.lease_token
    FROM pick JOIN cs ON cs.stream = pick.stream
    WHERE pick.has_row AND NOT pick.redelivery AND d.stream = pick.stream AND d.seq = pick.seq),
rl AS (
    UPDATE {{redeliveries}} r SET lease_token = cs.lease_token
    FROM pick JOIN cs ON cs.stream = pick.stream
    WHERE pick.redelivery AND r.stream = pick.stream AND r.seq = pick.seq)
SELECT pick.stream, pick.seq, cs.lease_token,
       CASE WHEN pick.redelivery THEN pick.redone ELSE COALESCE(d.attempts, 0) END, pick.due,
       e.id, e.type, e.created, e.api_version, e.data,
       COALESCE(e.traceparent, ''), COALESCE(e.tracestate, ''), pick.redelivery
FROM pick
JOIN cs ON cs.stream = pick.stream
JOIN {{events}} e ON e.stream = pick.stream AND e.seq = pick.seq
LEFT JOIN {{deliveries}} d ON d.stream = pick.stream AND d.seq = pick.seq
ORDER BY pick.due, pick.stream, pick.seq

-- name: lock_streams
-- Settle and Release, first: the streams' rows, locked in one order (every statement that locks
-- several does so in stream order, so none deadlocks with another), so that the statement that
-- follows in the same transaction reads the streams' deliveries as their last writer left them.
SELECT stream FROM {{streams}} WHERE stream = ANY($1::text[]) ORDER BY stream FOR UPDATE

-- name: release
-- Release, second: hands leased deliveries back without counting an attempt, each due again at its
-- time. m: the releases ($1 streams, $2 sequences, $3 tokens, $4 due times, $5 holds: NULL for
-- none; a stream's hold_until only moves later). v: those still leased
-- under their token — the stream's current lease, and the event claimed under it (a row of the
-- deliveries table that this claim leased, or a never-claimed event the claim took: above the
-- cursor, at most fresh, with no row). Each becomes (or stays) a row of the deliveries table, due at
-- its time and held by no one; the stream's held count drops by as many (the lease ends with the
-- last), and its next_due comes down to the earliest. The ordinals that come back are the releases
-- that took.
WITH m AS (
    SELECT DISTINCT ON (stream, seq) * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::timestamptz[],
            $5::timestamptz[])
        WITH ORDINALITY AS m(stream, seq, token, due, hold, ord)
    ORDER BY stream, seq, ord),
v AS (
    SELECT m.*, COALESCE(d.attempts, 0) AS failed, d.last_attempt_at, COALESCE(d.last_error, '') AS last_error
    FROM m JOIN {{streams}} c ON c.stream = m.stream
    LEFT JOIN {{deliveries}} d ON d.stream = m.stream AND d.seq = m.seq
    WHERE c.lease_token = m.token AND c.held > 0
      AND m.seq > GREATEST(c.acked, c.pruned_through) AND m.seq <= c.last_seq
      AND CASE WHEN d.seq IS NULL THEN m.seq <= c.fresh ELSE d.state = 0 AND d.lease_token = m.token END),
up AS (
    INSERT INTO {{deliveries}} AS d (stream, seq, state, attempts, next_attempt_at, lease_token, last_attempt_at, last_error)
    SELECT stream, seq, 0, failed, due, 0, last_attempt_at, last_error FROM v ORDER BY stream, seq
    ON CONFLICT (stream, seq) DO UPDATE SET next_attempt_at = EXCLUDED.next_attempt_at, lease_token = 0),
cs AS (
    UPDATE {{streams}} c SET held = GREATEST(c.held - n.k, 0),
        lease_until = CASE WHEN c.held - n.k <= 0 THEN NULL ELSE c.lease_until END,
        next_due = LEAST(c.next_due, n.due), hold_until = GREATEST(c.hold_until, n.hold)
    FROM (SELECT stream, count(*) AS k, min(due) AS due, max(hold) AS hold FROM v GROUP BY stream) n
    WHERE c.stream = n.stream)
SELECT ord FROM v
