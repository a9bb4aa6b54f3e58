-- The sandbox's API key credentials (CredentialStore): one row per key, found by the key's hash.
-- Adopting a table that has the index takes no lock on the table.
CREATE TABLE IF NOT EXISTS {{table}} (
    id          text        PRIMARY KEY,          -- key_…, what operators revoke by
    hash        bytea       NOT NULL UNIQUE,      -- SHA-256 of the API key; the key is never stored
    licensee    text        NOT NULL,
    environment text        NOT NULL,             -- 'sandbox' or 'live'
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz,                      -- NULL: never expires
    revoked_at  timestamptz,                      -- NULL: not revoked
    CHECK (octet_length(hash) = 32),
    CHECK (environment IN ('sandbox', 'live'))
);
DO {{do}} BEGIN
    IF to_regclass({{licensee_idx_lit}}) IS NULL THEN
        CREATE INDEX IF NOT EXISTS {{licensee_idx}} ON {{table}} (licensee, environment);
    END IF;
END {{do}};
