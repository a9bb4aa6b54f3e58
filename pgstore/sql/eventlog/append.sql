-- The appends: events go into the pending table, unnumbered, and lock no shared row, so the
-- appends of one stream commit in parallel. Sequence numbers them once they have committed.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: append
-- Append: one event into the pending table, unnumbered ($7, $8: the trace context, '' for none).
INSERT INTO {{pending}} (stream, id, type, created, api_version, data, traceparent, tracestate)
VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''), NULLIF($8, ''))

-- name: append_batch
-- AppendBatch: the batch in its order (pos follows the rows as the SELECT yields them, ordered by
-- n), each event with its own trace context ($7, $8: '' for none).
INSERT INTO {{pending}} (stream, id, type, created, api_version, data, traceparent, tracestate)
SELECT stream, id, type, created, api_version, data, NULLIF(tp, ''), NULLIF(ts, '')
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bytea[], $7::text[], $8::text[])
     WITH ORDINALITY AS b(stream, id, type, created, api_version, data, tp, ts, n)
ORDER BY n

-- name: append_bounded
-- Append with EventLogOptions.MaxStreamEvents ($9): the bound, checked by the INSERT itself
-- against committed state, taking no lock: the stream's numbered events (its counter row) and its
-- unnumbered ones (the pending table's stream index). No row: the stream is full.
INSERT INTO {{pending}} (stream, id, type, created, api_version, data, traceparent, tracestate)
SELECT $1::text, $2::text, $3::text, $4::bigint, $5::text, $6::bytea, NULLIF($7::text, ''), NULLIF($8::text, '')
WHERE COALESCE((SELECT c.last_seq - c.pruned_through FROM {{streams}} c WHERE c.stream = $1::text), 0)
    + (SELECT count(*) FROM {{pending}} p WHERE p.stream = $1::text) < $9::bigint

-- name: append_batch_bounded
-- AppendBatch with EventLogOptions.MaxStreamEvents ($9): all or nothing. k: how many events the
-- batch adds to each stream; a stream that the batch would take past the bound inserts no row at all.
WITH b AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bytea[], $7::text[], $8::text[])
        WITH ORDINALITY AS b(stream, id, type, created, api_version, data, tp, ts, n)),
k AS (SELECT stream, count(*) AS k FROM b GROUP BY stream)
INSERT INTO {{pending}} (stream, id, type, created, api_version, data, traceparent, tracestate)
SELECT stream, id, type, created, api_version, data, NULLIF(tp, ''), NULLIF(ts, '')
FROM b
WHERE NOT EXISTS (SELECT 1 FROM k WHERE COALESCE((SELECT c.last_seq - c.pruned_through FROM {{streams}} c WHERE c.stream = k.stream), 0)
    + (SELECT count(*) FROM {{pending}} p WHERE p.stream = k.stream) + k.k > $9::bigint)
ORDER BY n
