-- The rollback window (versioning.Pin.Previous, Options.RollbackWindow): the version a pin moved
-- from at its last move, '' when it never moved. CompareAndSwap sets it in the same UPDATE that
-- moves the pin; SetIfAbsent leaves the default. A constant default makes the column a change of
-- the catalog only: no row is rewritten, whatever the table's size, and the rows already there read
-- as pins that never moved.
--
--   previous  the version of the pin before its last move; '': none
--
-- Adding a column takes an ACCESS EXCLUSIVE lock on the table, however briefly, and while it waits
-- for the lock every reader queues behind it: one open transaction that wrote a pin would hold up
-- every request's pin lookup for as long as it stays open. So the lock is asked for with a short
-- lock_timeout, and on a timeout the step waits a little and asks again, until it gets it: a reader
-- waits at most that timeout, and the migration for as long as the open transaction lasts. When the
-- column is already there no lock is taken at all.
DO {{do}}
DECLARE
    saved text := current_setting('lock_timeout');
BEGIN
    WHILE NOT EXISTS (SELECT FROM pg_attribute
                      WHERE attrelid = {{table_lit}}::regclass AND attname = 'previous' AND NOT attisdropped) LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '50ms', true);
            ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS previous text NOT NULL DEFAULT '';
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.2);
        END;
    END LOOP;
    PERFORM set_config('lock_timeout', saved, true);
END {{do}};
