-- The webhook portal's one-time links and browser sessions (PortalStore), one row each, for the
-- defaults:
--
--   CREATE TABLE "portal_sessions" (
--       key         text COLLATE "C" PRIMARY KEY, -- the Portal's SHA-256 (hex) of the link's token or the cookie
--       licensee    text NOT NULL,
--       environment text NOT NULL,                -- 'sandbox' or 'live'
--       key_id      text NOT NULL DEFAULT '',     -- the API key that minted the link, never the key
--       permissions text[],                       -- NULL: the full key's; '{}': none at all
--       version     text NOT NULL DEFAULT '',
--       expires_at  timestamptz NOT NULL
--   );
--   CREATE INDEX "portal_sessions_expires_at_idx" ON "portal_sessions" (expires_at);
--
-- The key is a hash, so a row opens nothing: whoever reads the table cannot use a link or a session
-- with it. permissions keeps NULL and the empty array apart, as the Portal must (an empty list that
-- became NULL would give a key without permissions every one). The expiry index serves the pruning
-- each Put does: the oldest expired rows, a bounded number at a time.
CREATE TABLE IF NOT EXISTS {{table}} (
    key         text COLLATE "C" PRIMARY KEY,
    licensee    text NOT NULL,
    environment text NOT NULL,
    key_id      text NOT NULL DEFAULT '',
    permissions text[],
    version     text NOT NULL DEFAULT '',
    expires_at  timestamptz NOT NULL
);
DO {{do}} BEGIN
    IF to_regclass({{expires_idx_lit}}) IS NULL THEN
        CREATE INDEX IF NOT EXISTS {{expires_idx}} ON {{table}} (expires_at);
    END IF;
END {{do}};
