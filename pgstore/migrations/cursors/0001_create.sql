-- A webhook consumer's cursors (CursorStore): one row per stream.
CREATE TABLE IF NOT EXISTS {{table}} (
    stream        text   PRIMARY KEY,  -- the webhook endpoint ID
    last_sequence bigint NOT NULL CHECK (last_sequence >= 0)  -- last event processed
);
