-- Cache invalidation (PinStoreOptions.CacheSize, PinStore.Listen): every change of a row, by the
-- store or by SQL typed by hand, sends the licensee on the table's channel with pg_notify, in the
-- changing transaction: PostgreSQL delivers it when that transaction commits, and never when it
-- rolls back. A TRUNCATE, or a licensee too long for a payload (8000 bytes at most; the store's
-- licensees are far shorter), sends '' (everything). An UPDATE sends the old and the new licensee
-- (one, when they are equal: a transaction sends a payload once per channel).
--
-- Only pin changes notify — a licensee's first request pins it, once — never an order: a
-- transaction that notifies takes a database-wide lock at its commit (notifications are queued in
-- commit order), which would serialize commits on a hot path.
--
-- ENABLE ALWAYS: the triggers fire under session_replication_role = replica too (logical
-- replication, some restores), where an ordinary trigger is skipped and a change would reach no
-- cache.
CREATE OR REPLACE FUNCTION {{notify_fn}}() RETURNS trigger LANGUAGE plpgsql AS {{do}}
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify({{channel_lit}}, '');
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        PERFORM pg_notify({{channel_lit}}, CASE WHEN octet_length(OLD.licensee) <= 1000 THEN OLD.licensee ELSE '' END);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM pg_notify({{channel_lit}}, CASE WHEN octet_length(NEW.licensee) <= 1000 THEN NEW.licensee ELSE '' END);
    END IF;
    RETURN NULL;
END {{do}};
-- The triggers are created only when missing, so that a table that has them is not locked. Creating
-- one takes a SHARE ROW EXCLUSIVE lock on the table: it waits for open transactions that wrote to
-- it (and writes queue behind it meanwhile), but not for readers, which it never holds up.
DO {{do}} BEGIN
    IF NOT EXISTS (SELECT FROM pg_trigger WHERE tgrelid = {{table_lit}}::regclass AND tgname = {{notify_trigger_lit}}) THEN
        CREATE TRIGGER {{notify_trigger}} AFTER INSERT OR UPDATE OR DELETE ON {{table}}
            FOR EACH ROW EXECUTE FUNCTION {{notify_fn}}();
        ALTER TABLE {{table}} ENABLE ALWAYS TRIGGER {{notify_trigger}};
    END IF;
    IF NOT EXISTS (SELECT FROM pg_trigger WHERE tgrelid = {{table_lit}}::regclass AND tgname = {{truncate_trigger_lit}}) THEN
        CREATE TRIGGER {{truncate_trigger}} AFTER TRUNCATE ON {{table}}
            FOR EACH STATEMENT EXECUTE FUNCTION {{notify_fn}}();
        ALTER TABLE {{table}} ENABLE ALWAYS TRIGGER {{truncate_trigger}};
    END IF;
END {{do}};
