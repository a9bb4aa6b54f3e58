-- Range retrieval: a stream's events by sequence, with the watermark of what retention removed.
-- Each statement follows its "-- name:" line; {{…}} are the tables' names, quoted (eventlog.go).

-- name: range
-- Range: the events of stream $1 from $2 to $3, at most $4 (the caller asks one more than it
-- returns, to know whether more follow). One statement, one snapshot: the watermark and the events
-- agree even while Cleanup runs. No row: no such stream; a row with a NULL seq: nothing in the range.
SELECT c.pruned_through, e.seq, e.id, e.type, e.created, e.api_version, e.data
FROM {{streams}} c
LEFT JOIN LATERAL (
    SELECT seq, id, type, created, api_version, data FROM {{events}}
    WHERE stream = c.stream AND seq >= $2 AND seq <= $3
    ORDER BY seq LIMIT $4) e ON true
WHERE c.stream = $1
ORDER BY e.seq

-- name: range_bytes
-- RangeBytes: range.sql bounded by bytes as well ($5). x is the range's first $4+1 events with
-- their data's length (octet_length reads a TOASTed value's header, not the value), numbered (rn)
-- and added up (run). The page is the prefix within the limit whose data fit in $5 — the first
-- event whatever its size — and the event right after it comes back without its data, marked extra
-- (the last column): it says that more follow.
SELECT c.pruned_through, w.seq, ev.id, ev.type, ev.created, ev.api_version,
       CASE WHEN w.inc THEN ev.data END, NOT w.inc
FROM {{streams}} c
LEFT JOIN LATERAL (
    SELECT x.seq, x.rn <= $4 AND (x.rn = 1 OR x.run <= $5) AS inc,
           x.rn >= 2 AND x.rn - 1 <= $4 AND (x.rn = 2 OR x.run - x.len <= $5) AS after
    FROM (SELECT y.seq, y.len, row_number() OVER w AS rn, sum(y.len) OVER w AS run
          FROM (SELECT seq, octet_length(data)::bigint AS len FROM {{events}}
                WHERE stream = c.stream AND seq >= $2 AND seq <= $3
                ORDER BY seq LIMIT $4 + 1) y
          WINDOW w AS (ORDER BY y.seq)) x) w ON w.inc OR w.after
LEFT JOIN {{events}} ev ON ev.stream = c.stream AND ev.seq = w.seq
WHERE c.stream = $1
ORDER BY w.seq
