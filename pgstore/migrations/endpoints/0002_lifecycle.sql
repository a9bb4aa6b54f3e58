-- The endpoint lifecycle (EndpointStore.CreateEndpoint, UpdateEndpoint): the settings an endpoint's
-- owner changes, its state, and the end of a secret roll's overlap. Every column is added with a
-- constant default or none, a change of the catalog only: no row is rewritten, whatever the table's
-- size.
--
--   old_secrets_expire  when the secrets after the first stop signing; NULL: never
--   enabled_events      the event types the endpoint receives; {}: every type
--   description, metadata, headers   the owner's note, key-value pairs and extra delivery headers
--   created             when it was registered; NULL when the registrar did not say
--   disabled_reason, disabled_at     why and since when its deliveries are stopped; '' and NULL when enabled
--   deleted_at          when it was deleted; NULL while it lives
--
-- Headers are stored in plain text: their names exclude credentials (Authorization, Cookie, …), and
-- an owner reads them back in full.
--
-- The owner index gains the deleted endpoints' exclusion: ListEndpoints and the count under the
-- per-owner limit read only the live ones, from a partial index whose entries are the live rows
-- alone. The index of migration 1 is replaced (the new one is built first, so the listing never goes
-- without).
ALTER TABLE {{table}}
    ADD COLUMN IF NOT EXISTS old_secrets_expire timestamptz,
    ADD COLUMN IF NOT EXISTS enabled_events     text[] NOT NULL DEFAULT '{}',
    ADD COLUMN IF NOT EXISTS description        text   NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS metadata           jsonb  NOT NULL DEFAULT '{}',
    ADD COLUMN IF NOT EXISTS headers            jsonb  NOT NULL DEFAULT '{}',
    ADD COLUMN IF NOT EXISTS created            timestamptz,
    ADD COLUMN IF NOT EXISTS disabled_reason    text   NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS disabled_at        timestamptz,
    ADD COLUMN IF NOT EXISTS deleted_at         timestamptz;
CREATE INDEX IF NOT EXISTS {{live_idx}} ON {{table}} (owner, id) WHERE deleted_at IS NULL;
DROP INDEX IF EXISTS {{owner_idx}};
