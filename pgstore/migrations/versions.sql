-- The version table: one in every schema that holds a store's tables, beside them. A row per
-- migration applied, keyed by the store and its table (the Table of its options, from which every
-- other name of the store derives), so that stores of another kind, or of the same kind under
-- other names, keep versions of their own in one schema. Migrate reads the newest version of a
-- store's tables here, applies the migrations after it, each in its own transaction with its row,
-- and refuses tables whose version is newer than it knows. applied_at is for people; nothing reads
-- it.
CREATE TABLE IF NOT EXISTS {{versions}} (
    store      text        NOT NULL,  -- 'idempotency', 'eventlog', 'endpoints', 'cursors', 'pins', 'credentials'
    table_name text        NOT NULL,  -- the store's table, as configured (the default name when none is)
    version    integer     NOT NULL,  -- the migration's number: 1 for 0001_….sql
    name       text        NOT NULL,  -- the migration's file
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (store, table_name, version)
);
