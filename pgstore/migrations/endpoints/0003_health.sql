-- Delivery health (the Dispatcher's automatic disabling and throttling): an endpoint's rate limit
-- and when its deliveries started failing. Both are added with a constant default or none, a change
-- of the catalog only: no row is rewritten, whatever the table's size.
--
--   rate_limit     the most deliveries a second; 0: unthrottled
--   failing_since  the first failed attempt since the last success; NULL: not failing
ALTER TABLE {{table}}
    ADD COLUMN IF NOT EXISTS rate_limit    integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS failing_since timestamptz;
