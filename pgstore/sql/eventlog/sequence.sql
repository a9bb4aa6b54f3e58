-- The numbering: committed pending events move into the events table with their stream's next
-- sequences.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: sequence
-- Sequence: one statement numbers a batch ($1 its limit; $2 the numbering locks' class, $3 the
-- events table's name, which with the stream keys each lock; $4 the low-water mark, a transaction
-- ID below which no pending row waits). picked: the oldest pending events, by appending transaction
-- and position, read from the mark up through the (xid, pos) index, so that the rows earlier batches
-- moved (and deleted) are never walked. (The upper bound holds every ID; it makes the condition a
-- range, which the planner, without statistics, takes for a small part of the table, so that it
-- never prefers to read the whole table, dead rows and all, and sort it.)
-- held: their streams whose numbering lock this transaction got (tried, never waited for: a stream
-- another sequencer holds is left to it). moved: those events, out of the pending table (a row
-- another sequencer moved since this statement's snapshot is skipped by the DELETE). c: each
-- stream's counter, raised by its count and locked until the commit, with its next_due and
-- first_created hints brought down to the new events' oldest creation (LEAST ignores NULL: a stream
-- with nothing waiting, or nothing retained, takes the new value). Then the events go in with
-- consecutive numbers in append order, never to be updated.
WITH picked AS MATERIALIZED (
    SELECT pos, stream FROM {{pending}} WHERE xid >= $4::text::xid8 AND xid < '18446744073709551615'::xid8
    ORDER BY xid, pos LIMIT $1),
held AS MATERIALIZED (
    SELECT d.stream FROM (SELECT DISTINCT stream FROM picked) d
    WHERE pg_try_advisory_xact_lock($2, hashtext($3 || d.stream))),
moved AS (
    DELETE FROM {{pending}} p USING picked JOIN held ON held.stream = picked.stream
    WHERE p.pos = picked.pos
    RETURNING p.xid, p.pos, p.stream, p.id, p.type, p.created, p.api_version, p.data, p.traceparent, p.tracestate),
n AS (SELECT stream, count(*) AS k, min(created) AS oldest FROM moved GROUP BY stream),
c AS (
    INSERT INTO {{streams}} AS c (stream, last_seq, next_due, first_created)
    SELECT stream, k, to_timestamp(oldest), oldest FROM n ORDER BY stream
    ON CONFLICT (stream) DO UPDATE SET last_seq = c.last_seq + EXCLUDED.last_seq,
        next_due = LEAST(c.next_due, EXCLUDED.next_due), first_created = LEAST(c.first_created, EXCLUDED.first_created)
    RETURNING c.stream, c.last_seq)
INSERT INTO {{events}} (stream, seq, id, type, created, api_version, data, traceparent, tracestate)
SELECT m.stream, c.last_seq - n.k + row_number() OVER (PARTITION BY m.stream ORDER BY m.xid, m.pos),
       m.id, m.type, m.created, m.api_version, m.data, m.traceparent, m.tracestate
FROM moved m JOIN n ON n.stream = m.stream JOIN c ON c.stream = m.stream
RETURNING stream, seq, id

-- name: low_water
-- Sequence, after the numbering and in its transaction: the next low-water mark, the older of the
-- oldest transaction still running (a row of it, or of a later one, may yet commit) and the oldest
-- transaction with a row that waits from the current mark ($1) up (left by the limit, or in a stream
-- another sequencer holds). Both are read in one snapshot, so no row can slip below the mark: a row
-- invisible to it belongs to a transaction that was running, or had not begun.
SELECT LEAST(pg_snapshot_xmin(pg_current_snapshot()),
             (SELECT min(xid) FROM {{pending}} WHERE xid >= $1::text::xid8 AND xid < '18446744073709551615'::xid8))::text

-- name: unsequenced
-- Unsequenced: the appended events that wait for their number.
SELECT count(*) FROM {{pending}}
