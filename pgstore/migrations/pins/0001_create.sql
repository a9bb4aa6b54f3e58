-- The version pins (PinStore). Licensees are stored with the "C" collation, so List pages in byte
-- order whatever the database's locale. The index serves List by version: who is still pinned to a
-- deprecated version. Adopting a table that has it takes no lock on the table.
CREATE TABLE IF NOT EXISTS {{table}} (
    licensee  text COLLATE "C" PRIMARY KEY, -- bytewise order, as List promises
    version   text        NOT NULL,         -- "v2"
    pinned_at timestamptz NOT NULL
);
DO {{do}} BEGIN
    IF to_regclass({{version_idx_lit}}) IS NULL THEN
        CREATE INDEX IF NOT EXISTS {{version_idx}} ON {{table}} (version, licensee);
    END IF;
END {{do}};
