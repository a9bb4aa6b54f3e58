package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// DefaultEventLogTable is the events table an EventLog uses when EventLogOptions.Table is empty. The
// per-stream counters live beside it in the same name with "_streams" appended, the delivery history
// with "_attempts", the appended events that wait for their number with "_pending".
const DefaultEventLogTable = "webhook_events"

// EventLogOptions configures an EventLog and its migration. A nil *EventLogOptions and the zero value
// mean the defaults.
type EventLogOptions struct {
	// Schema holds the tables. Default "": the names are unqualified and resolve through the
	// connection's search_path.
	Schema string
	// Table is the events table's name; the counters table is Table+"_streams", the delivery
	// history Table+"_attempts", the unnumbered events Table+"_pending". Default
	// DefaultEventLogTable.
	Table string
	// MaxStreamEvents bounds the events one stream keeps, numbered or not: an Append or AppendBatch
	// that would take a stream past it fails with producer.ErrStreamFull and appends nothing, and
	// Cleanup frees the room of what it removes. The check is part of the append's INSERT and takes
	// no lock — the stream's counter row says how many numbered events it keeps (last_seq less
	// pruned_through), an index of the pending table counts the unnumbered ones — so appends to one
	// stream still commit in parallel; the price is that appending transactions in flight at the same
	// moment do not see each other's events: a stream can pass the bound by the events of
	// transactions that append to it concurrently (one each for single appends). Run the migration
	// with the same options: it creates the pending table's index on stream only when this is set.
	// 0 means no bound.
	MaxStreamEvents int
}

// evlogConfig is EventLogOptions with the defaults applied and the names quoted.
type evlogConfig struct {
	EventLogOptions
	events   string // qualified, quoted
	streams  string
	attempts string
	pending  string
}

func evlogResolve(opts *EventLogOptions) evlogConfig {
	var o evlogConfig
	if opts != nil {
		o.EventLogOptions = *opts
	}
	if o.Table == "" {
		o.Table = DefaultEventLogTable
	}
	o.events = qualify(o.Schema, o.Table)
	o.streams = qualify(o.Schema, o.Table+"_streams")
	o.attempts = qualify(o.Schema, o.Table+"_attempts")
	o.pending = qualify(o.Schema, o.Table+"_pending")
	return o
}

// EventLogMigration returns the SQL that creates the event log's tables (and its schema, when one is
// configured) for opts; nil opts mean the defaults. It is idempotent (IF NOT EXISTS throughout), so it
// can run at every start or be copied into a migration tool's files.
//
// The tables, for the defaults:
//
//	CREATE TABLE IF NOT EXISTS "webhook_events_streams" (
//	    stream         text   PRIMARY KEY,       -- the webhook endpoint ID
//	    last_seq       bigint NOT NULL,          -- the newest sequence handed out
//	    pruned_through bigint NOT NULL DEFAULT 0 -- retention removed every sequence up to here
//	);
//	CREATE TABLE IF NOT EXISTS "webhook_events" (
//	    stream          text        NOT NULL,
//	    seq             bigint      NOT NULL,
//	    id              text        NOT NULL,     -- evt_…
//	    type            text        NOT NULL,
//	    created         bigint      NOT NULL,     -- unix seconds, as in the envelope
//	    api_version     text        NOT NULL,
//	    data            bytea       NOT NULL,     -- the JSON exactly as appended
//	    state           smallint    NOT NULL DEFAULT 0, -- 0 pending, 1 delivered, 2 abandoned
//	    attempts        integer     NOT NULL DEFAULT 0, -- failed attempts
//	    next_attempt_at timestamptz,
//	    lease_until     timestamptz,
//	    lease_token     bigint      NOT NULL DEFAULT 0, -- fencing token, +1 per claim
//	    last_attempt_at timestamptz,
//	    last_error      text        NOT NULL DEFAULT '',
//	    delivered_at    timestamptz,
//	    traceparent     text,         -- W3C trace context of the publishing request; NULL: none
//	    tracestate      text,
//	    PRIMARY KEY (stream, seq)
//	);
//	CREATE INDEX IF NOT EXISTS "webhook_events_due_idx" ON "webhook_events" (next_attempt_at, stream, seq) WHERE state = 0;
//	CREATE INDEX IF NOT EXISTS "webhook_events_created_idx" ON "webhook_events" (created, stream, seq);
//	-- the streams someone holds: Claim skips them, so that an endpoint has one holder at a time
//	CREATE INDEX IF NOT EXISTS "webhook_events_held_idx" ON "webhook_events" (stream, lease_until)
//	    WHERE state = 0 AND lease_until IS NOT NULL;
//	CREATE TABLE IF NOT EXISTS "webhook_events_attempts" (  -- the delivery history
//	    id          bigint      PRIMARY KEY,  -- random, never a counter's: the history's cursor
//	    stream      text        NOT NULL,
//	    seq         bigint      NOT NULL,
//	    event_id    text        NOT NULL,
//	    number      integer     NOT NULL,     -- 1 for the event's first attempt
//	    outcome     smallint    NOT NULL,     -- 1 failed, 2 delivered, 3 abandoned
//	    at          timestamptz NOT NULL,
//	    latency_us  bigint      NOT NULL,
//	    status_code integer     NOT NULL,     -- 0: no response
//	    class       text        NOT NULL,     -- producer.Class…; '' for a success
//	    reason      text        NOT NULL,
//	    response    text        NOT NULL,     -- the start of the answer, at most 256 bytes
//	    retry_at    timestamptz
//	);
//	-- the history's order, newest first: by time, never by the random ID
//	CREATE INDEX IF NOT EXISTS "webhook_events_attempts_order_idx" ON "webhook_events_attempts" (stream, at, seq, number);
//	CREATE INDEX IF NOT EXISTS "webhook_events_attempts_event_idx" ON "webhook_events_attempts" (stream, seq, id);
//	CREATE TABLE IF NOT EXISTS "webhook_events_pending" (  -- appended, committed, not yet numbered
//	    pos         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- append order
//	    stream      text   NOT NULL,
//	    id          text   NOT NULL,
//	    type        text   NOT NULL,
//	    created     bigint NOT NULL,
//	    api_version text   NOT NULL,
//	    data        bytea  NOT NULL,
//	    traceparent text,
//	    tracestate  text
//	);
//	-- only with MaxStreamEvents: what the bound counts of a stream's unnumbered events
//	CREATE INDEX IF NOT EXISTS "webhook_events_pending_stream_idx" ON "webhook_events_pending" (stream);
//	DO $evlog$ BEGIN  -- tables made before the trace context columns get them
//	    IF (SELECT count(*) FROM pg_attribute WHERE attrelid = '"webhook_events"'::regclass
//	        AND attname IN ('traceparent', 'tracestate') AND NOT attisdropped) < 2 THEN
//	        ALTER TABLE "webhook_events" ADD COLUMN IF NOT EXISTS traceparent text, ADD COLUMN IF NOT EXISTS tracestate text;
//	    END IF;
//	    … the same for "webhook_events_pending"
//	END $evlog$;
//
// Append inserts into the pending table only: no shared row is locked in the appending transaction,
// so appends to one stream commit in parallel. Sequence then moves committed pending events into the
// events table, numbering them from the stream's counter row, in one statement. Sequences come from
// the counter row, never from a SEQUENCE: a sequence's values are handed out outside the transaction,
// so a rollback would leave a gap. (pos does come from one, and may have gaps; it only orders.)
// Counter rows are never deleted, so retention never lets a sequence be reused.
//
// Attempt IDs are random (a counter would tell each tenant how many attempts went to the others), and
// the history is ordered by time. A history table made before keeps its identity column, which the
// inserts override, and its (stream, id) index, which nothing reads any more; the first migration after
// the upgrade builds the order index, holding off the recording of attempts while it builds (one
// retention's worth of history at most).
func EventLogMigration(opts *EventLogOptions) string {
	o := evlogResolve(opts)
	var b strings.Builder
	if o.Schema != "" {
		fmt.Fprintf(&b, "CREATE SCHEMA IF NOT EXISTS %s;\n", quoteIdent(o.Schema))
	}
	fmt.Fprintf(&b, `CREATE TABLE IF NOT EXISTS %s (
    stream         text   PRIMARY KEY,
    last_seq       bigint NOT NULL,
    pruned_through bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS %s (
    stream          text        NOT NULL,
    seq             bigint      NOT NULL,
    id              text        NOT NULL,
    type            text        NOT NULL,
    created         bigint      NOT NULL,
    api_version     text        NOT NULL,
    data            bytea       NOT NULL,
    state           smallint    NOT NULL DEFAULT 0,
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    lease_until     timestamptz,
    lease_token     bigint      NOT NULL DEFAULT 0,
    last_attempt_at timestamptz,
    last_error      text        NOT NULL DEFAULT '',
    delivered_at    timestamptz,
    traceparent     text,
    tracestate      text,
    PRIMARY KEY (stream, seq)
);
CREATE INDEX IF NOT EXISTS %s ON %s (next_attempt_at, stream, seq) WHERE state = 0;
CREATE INDEX IF NOT EXISTS %s ON %s (created, stream, seq);
CREATE INDEX IF NOT EXISTS %s ON %s (stream, lease_until) WHERE state = 0 AND lease_until IS NOT NULL;
CREATE TABLE IF NOT EXISTS %s (
    id          bigint      PRIMARY KEY,
    stream      text        NOT NULL,
    seq         bigint      NOT NULL,
    event_id    text        NOT NULL,
    number      integer     NOT NULL,
    outcome     smallint    NOT NULL,
    at          timestamptz NOT NULL,
    latency_us  bigint      NOT NULL,
    status_code integer     NOT NULL,
    class       text        NOT NULL,
    reason      text        NOT NULL,
    response    text        NOT NULL,
    retry_at    timestamptz
);
CREATE INDEX IF NOT EXISTS %s ON %s (stream, at, seq, number);
CREATE INDEX IF NOT EXISTS %s ON %s (stream, seq, id);
CREATE TABLE IF NOT EXISTS %s (
    pos         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream      text   NOT NULL,
    id          text   NOT NULL,
    type        text   NOT NULL,
    created     bigint NOT NULL,
    api_version text   NOT NULL,
    data        bytea  NOT NULL,
    traceparent text,
    tracestate  text
);
`, o.streams, o.events,
		quoteIdent(o.Table+"_due_idx"), o.events,
		quoteIdent(o.Table+"_created_idx"), o.events,
		quoteIdent(o.Table+"_held_idx"), o.events,
		o.attempts,
		quoteIdent(o.Table+"_attempts_order_idx"), o.attempts,
		quoteIdent(o.Table+"_attempts_event_idx"), o.attempts,
		o.pending)
	// Tables made before trace context was stored get its columns. ALTER TABLE takes the table's
	// strongest lock and waits for every open transaction that touched it (an outbox transaction
	// holds the pending table), and every append and claim would queue behind it: so it runs only
	// when a column is missing, and a migration at every start locks nothing on tables up to date.
	var body strings.Builder
	body.WriteString(" BEGIN\n")
	for _, t := range []string{o.events, o.pending} {
		fmt.Fprintf(&body, `    IF (SELECT count(*) FROM pg_attribute WHERE attrelid = %[2]s::regclass
        AND attname IN ('traceparent', 'tracestate') AND NOT attisdropped) < 2 THEN
        ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS traceparent text, ADD COLUMN IF NOT EXISTS tracestate text;
    END IF;
`, t, idemLiteral(t))
	}
	body.WriteString("END ")
	tag := evlogDollarTag(body.String())
	fmt.Fprintf(&b, "DO %s%s%s;\n", tag, body.String(), tag)
	if o.MaxStreamEvents > 0 {
		// What MaxStreamEvents counts of the unnumbered events of a stream, without reading the others.
		fmt.Fprintf(&b, "CREATE INDEX IF NOT EXISTS %s ON %s (stream);\n", quoteIdent(o.Table+"_pending_stream_idx"), o.pending)
	}
	return b.String()
}

// evlogDollarTag returns a dollar-quote tag that does not occur in body, which holds identifiers the
// user chose.
func evlogDollarTag(body string) string {
	tag := "$evlog$"
	for i := 0; strings.Contains(body, tag); i++ {
		tag = "$evlog" + strconv.Itoa(i) + "$"
	}
	return tag
}

// MigrateEventLog creates the event log's tables for opts if they do not exist (see
// EventLogMigration). It runs in one transaction under an advisory lock, so replicas that start
// together do not race each other's CREATE statements.
func MigrateEventLog(ctx context.Context, db DB, opts *EventLogOptions) error {
	o := evlogResolve(opts)
	return migrate(ctx, db, "event log", evlogLockName("migrate", o), EventLogMigration(opts))
}

// evlogLockName names an advisory lock for one operation on one event log.
func evlogLockName(op string, o evlogConfig) string {
	return "pgstore.eventlog." + op + "\x00" + o.events
}
