-- The numbering: committed pending events move into the events table with their stream's next
-- sequences.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: sequence
-- Sequence: one statement numbers a batch ($1 its limit; $2 the numbering locks' class, $3 the
-- events table's name, which with the stream keys each lock). picked: the oldest pending events.
-- held: their streams whose numbering lock this transaction got (tried, never waited for: a stream
-- another sequencer holds is left to it). moved: those events, out of the pending table (a row
-- another sequencer moved since this statement's snapshot is skipped by the DELETE). c: each
-- stream's counter, raised by its count and locked until the commit. Then the events go in with
-- consecutive numbers in append order.
WITH picked AS MATERIALIZED (
    SELECT pos, stream FROM {{pending}} ORDER BY pos LIMIT $1),
held AS MATERIALIZED (
    SELECT d.stream FROM (SELECT DISTINCT stream FROM picked) d
    WHERE pg_try_advisory_xact_lock($2, hashtext($3 || d.stream))),
moved AS (
    DELETE FROM {{pending}} p USING picked JOIN held ON held.stream = picked.stream
    WHERE p.pos = picked.pos
    RETURNING p.pos, p.stream, p.id, p.type, p.created, p.api_version, p.data, p.traceparent, p.tracestate),
n AS (SELECT stream, count(*) AS k FROM moved GROUP BY stream),
c AS (
    INSERT INTO {{streams}} AS c (stream, last_seq) SELECT stream, k FROM n ORDER BY stream
    ON CONFLICT (stream) DO UPDATE SET last_seq = c.last_seq + EXCLUDED.last_seq
    RETURNING c.stream, c.last_seq)
INSERT INTO {{events}} (stream, seq, id, type, created, api_version, data, next_attempt_at, traceparent, tracestate)
SELECT m.stream, c.last_seq - n.k + row_number() OVER (PARTITION BY m.stream ORDER BY m.pos),
       m.id, m.type, m.created, m.api_version, m.data, to_timestamp(m.created), m.traceparent, m.tracestate
FROM moved m JOIN n ON n.stream = m.stream JOIN c ON c.stream = m.stream
RETURNING stream, seq, id

-- name: unsequenced
-- Unsequenced: the appended events that wait for their number.
SELECT count(*) FROM {{pending}}
