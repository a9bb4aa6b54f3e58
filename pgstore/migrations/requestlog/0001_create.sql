-- The request log (RequestLogStore): one row per request a requestlog.Log recorded, for the
-- defaults:
--
--   CREATE TABLE "request_log" (
--       owner           text COLLATE "C" NOT NULL, -- who may read it: the principal's scope, '' when none
--       request_id      text COLLATE "C" NOT NULL, -- req_…
--       at              timestamptz NOT NULL,      -- when the request arrived
--       key_id          text COLLATE "C" NOT NULL DEFAULT '', -- key_…, never the key
--       …
--       PRIMARY KEY (owner, request_id)
--   );
--   CREATE INDEX "request_log_owner_at_idx" ON "request_log" (owner, at DESC, request_id DESC);
--   CREATE INDEX "request_log_at_idx" ON "request_log" USING brin (at);
--
-- The primary key finds one owner's entry by its request ID (Get, a list's cursor) and makes a
-- duplicate insert a no-op; the owner index reads an owner's entries newest first, in the list's
-- order (the "C" collation orders request IDs by byte, as Go compares strings); the time index serves
-- the retention, which deletes the expired rows in bounded steps. It is a BRIN index: rows arrive in
-- time order, so a summary per range of pages finds the expired ones, at a fraction of a B-tree's
-- cost on every insert (its write-ahead log above all). No body, query string or header is
-- stored: the columns are the whole record.
CREATE TABLE IF NOT EXISTS {{table}} (
    owner           text COLLATE "C" NOT NULL,
    request_id      text COLLATE "C" NOT NULL,
    at              timestamptz NOT NULL,
    key_id          text COLLATE "C" NOT NULL DEFAULT '',
    environment     text NOT NULL DEFAULT '',
    method          text NOT NULL,
    route           text COLLATE "C" NOT NULL DEFAULT '',
    status          smallint NOT NULL,
    code            text COLLATE "C" NOT NULL DEFAULT '',
    idempotency_key text COLLATE "C" NOT NULL DEFAULT '',
    replayed        boolean NOT NULL DEFAULT false,
    version         text NOT NULL DEFAULT '',
    latency_us      bigint NOT NULL,
    PRIMARY KEY (owner, request_id)
);
DO {{do}} BEGIN
    IF to_regclass({{owner_at_idx_lit}}) IS NULL THEN
        CREATE INDEX IF NOT EXISTS {{owner_at_idx}} ON {{table}} (owner, at DESC, request_id DESC);
    END IF;
    IF to_regclass({{at_idx_lit}}) IS NULL THEN
        CREATE INDEX IF NOT EXISTS {{at_idx}} ON {{table}} USING brin (at);
    END IF;
END {{do}};
