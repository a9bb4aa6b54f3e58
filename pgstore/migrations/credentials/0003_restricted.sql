-- Restricted keys and the keys' last use (issue 35). permissions NULL is the full key; a restricted
-- key lists its permissions, at least one. last_used_at is written at most once a minute per key
-- (apikey.Issuer.Run), off every request's path. Adding nullable columns without a default only
-- changes the catalogue: the table is not rewritten.
ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS permissions  text[];
ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS last_used_at timestamptz;
-- A change of last_used_at alone does not notify: the caches hold no use of it (the Issuer reads it
-- only to skip a write it would repeat), and a notifying transaction takes a database-wide lock at
-- its commit.
CREATE OR REPLACE FUNCTION {{notify_fn}}() RETURNS trigger LANGUAGE plpgsql AS {{do}}
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify({{channel_lit}}, '');
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND (OLD.id, OLD.hash, OLD.licensee, OLD.environment, OLD.created_at, OLD.expires_at,
            OLD.revoked_at, OLD.permissions) IS NOT DISTINCT FROM (NEW.id, NEW.hash, NEW.licensee, NEW.environment,
            NEW.created_at, NEW.expires_at, NEW.revoked_at, NEW.permissions) THEN
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        PERFORM pg_notify({{channel_lit}}, encode(OLD.hash, 'hex'));
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM pg_notify({{channel_lit}}, encode(NEW.hash, 'hex'));
    END IF;
    RETURN NULL;
END {{do}};
