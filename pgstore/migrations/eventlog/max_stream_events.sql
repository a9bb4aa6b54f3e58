-- Not a numbered migration: an index that EventLogOptions.MaxStreamEvents needs and that a log
-- without the bound does without. Migrate runs it, after the numbered migrations, whenever it is
-- given options with the bound; it does nothing when the index exists (and then takes no lock on
-- the table). It is what the bound counts of a stream's unnumbered events, without reading the
-- others.
DO {{do}} BEGIN
    IF to_regclass({{pending_stream_idx_lit}}) IS NULL THEN
        CREATE INDEX IF NOT EXISTS {{pending_stream_idx}} ON {{pending}} (stream);
    END IF;
END {{do}};
