package pgstore

// DefaultEventLogTable is the events table an EventLog uses when EventLogOptions.Table is empty. The
// per-stream counters live beside it in the same name with "_streams" appended, the delivery history
// with "_attempts", the appended events that wait for their number with "_pending", the delivery
// state of the events that are not simply next in their stream with "_deliveries", the delivery
// statistics with "_stats", and the settled events queued to be pushed again (EventLog.Redeliver)
// with "_redeliveries".
const DefaultEventLogTable = "webhook_events"

// EventLogOptions configures an EventLog and its migration (Migrate). A nil *EventLogOptions and the
// zero value mean the defaults.
type EventLogOptions struct {
	// Schema holds the tables. Default "": the names are unqualified and resolve through the
	// connection's search_path.
	Schema string
	// Table is the events table's name; the counters table is Table+"_streams", the delivery
	// history Table+"_attempts", the unnumbered events Table+"_pending", the delivery state that a
	// stream's cursor cannot say Table+"_deliveries", the delivery statistics Table+"_stats" (with
	// its trigger on the history and functions of the same prefix), the queued redeliveries
	// Table+"_redeliveries". Default DefaultEventLogTable.
	Table string
	// MaxStreamEvents bounds the events one stream keeps, numbered or not: an Append or AppendBatch
	// that would take a stream past it fails with driver.ErrStreamFull and appends nothing, and
	// Cleanup frees the room of what it removes. The check is part of the append's INSERT and takes
	// no lock — the stream's counter row says how many numbered events it keeps (last_seq less
	// pruned_through), an index of the pending table counts the unnumbered ones — so appends to one
	// stream still commit in parallel; the price is that appending transactions in flight at the same
	// moment do not see each other's events: a stream can pass the bound by the events of
	// transactions that append to it concurrently (one each for single appends). Pass the same
	// options to Migrate: it creates the pending table's index on stream only when this is set.
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
	// deliveries holds the delivery state that a stream's cursor cannot say.
	deliveries string
	// stats holds the delivery statistics' rings (migration 5).
	stats string
	// redeliveries holds the settled events queued to be delivered again.
	redeliveries string
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
	o.deliveries = qualify(o.Schema, o.Table+"_deliveries")
	o.stats = qualify(o.Schema, o.Table+"_stats")
	o.redeliveries = qualify(o.Schema, o.Table+"_redeliveries")
	return o
}

// evlogLockName names an advisory lock for one operation on one event log.
func evlogLockName(op string, o evlogConfig) string {
	return "pgstore.eventlog." + op + "\x00" + o.events
}
