-- The webhook endpoints (EndpointStore), for the defaults:
--
--   CREATE TABLE "webhook_endpoints" (
--       id          text COLLATE "C" PRIMARY KEY, -- we_…, the endpoint's event stream
--       owner       text COLLATE "C" NOT NULL,    -- the licensee
--       url         text   NOT NULL,
--       secrets     text[] NOT NULL,              -- signing secrets, as issued, without a Sealer
--       api_version text   NOT NULL DEFAULT '',
--       sealed_secrets bytea                      -- with a Sealer: the secrets, sealed; secrets is {}
--   );
--   CREATE INDEX "webhook_endpoints_owner_idx" ON "webhook_endpoints" (owner, id);
--
-- The index serves ListEndpoints: an owner's endpoints in byte order of ID, read from the index
-- alone and only the owner's.
--
-- Migration 1 also adopts the table as the unversioned migrations of earlier versions left it, or
-- as an application made it with columns of its own (the reference server's has pos): IF NOT EXISTS
-- throughout, and a table made before sealed_secrets gets it, added without a default, a change of
-- the catalog only. ALTER TABLE takes the table's strongest lock, so the DO block runs it only when
-- the column is missing: adopting a table that is up to date takes no lock on it.
CREATE TABLE IF NOT EXISTS {{table}} (
    id          text COLLATE "C" PRIMARY KEY,
    owner       text COLLATE "C" NOT NULL,
    url         text   NOT NULL,
    secrets     text[] NOT NULL,
    api_version text   NOT NULL DEFAULT '',
    sealed_secrets bytea
);
DO {{do}} BEGIN
    IF to_regclass({{owner_idx_lit}}) IS NULL THEN
        CREATE INDEX IF NOT EXISTS {{owner_idx}} ON {{table}} (owner, id);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = {{table_lit}}::regclass
                   AND attname = 'sealed_secrets' AND NOT attisdropped) THEN
        ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS sealed_secrets bytea;
    END IF;
END {{do}};
