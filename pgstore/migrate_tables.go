package pgstore

import "errors"

// Each store's options are the Tables of Migrate: these name the store's tables and indexes for its
// migrations (migrations/<store>/), the same names its constructor resolves.

var (
	_ Tables = (*IdempotencyStoreOptions)(nil)
	_ Tables = (*EventLogOptions)(nil)
	_ Tables = (*EndpointStoreOptions)(nil)
	_ Tables = (*CursorStoreOptions)(nil)
	_ Tables = (*PinStoreOptions)(nil)
	_ Tables = (*CredentialStoreOptions)(nil)
	_ Tables = (*RequestLogStoreOptions)(nil)
	_ Tables = (*PortalStoreOptions)(nil)
)

func (opts *IdempotencyStoreOptions) migrationTables() (tableSet, error) {
	o := idemResolve(opts)
	n := newSQLNames(o.Schema)
	n.table("table", o.Table)
	n.table("seq", o.Table+"_token_seq")
	n.index("expires_idx", o.Table+"_expires_at_idx")
	return tableSet{store: "idempotency", what: "idempotency", schema: o.Schema, table: o.Table, names: n}, nil
}

func (opts *EventLogOptions) migrationTables() (tableSet, error) {
	o := evlogResolve(opts)
	if o.MaxStreamEvents < 0 {
		return tableSet{}, errors.New("pgstore: negative EventLogOptions.MaxStreamEvents")
	}
	n := newSQLNames(o.Schema)
	for key, suffix := range map[string]string{"events": "", "streams": "_streams", "attempts": "_attempts", "pending": "_pending",
		"deliveries": "_deliveries", "stats": "_stats", "stats_fn": "_stats_fn", "stats_bucket": "_stats_bucket",
		"redeliveries": "_redeliveries"} {
		n.table(key, o.Table+suffix)
	}
	n.trigger("stats_trigger", o.Table+"_stats")
	for _, idx := range []string{"due_idx", "created_idx", "held_idx", "attempts_order_idx", "attempts_event_idx", "pending_stream_idx",
		"pending_xid_idx"} {
		n.index(idx, o.Table+"_"+idx)
	}
	s := tableSet{store: "eventlog", what: "event log", schema: o.Schema, table: o.Table, names: n}
	if o.MaxStreamEvents > 0 {
		s.extras = []string{"max_stream_events.sql"}
	}
	return s, nil
}

func (opts *EndpointStoreOptions) migrationTables() (tableSet, error) {
	o, err := endpointResolve(opts)
	if err != nil {
		return tableSet{}, err
	}
	n := newSQLNames(o.Schema)
	n.table("table", o.Table)
	n.index("owner_idx", o.Table+"_owner_idx")
	n.index("live_idx", o.Table+"_live_idx")
	return tableSet{store: "endpoints", what: "endpoint store", schema: o.Schema, table: o.Table, names: n}, nil
}

func (opts *CursorStoreOptions) migrationTables() (tableSet, error) {
	o := cursorResolve(opts)
	n := newSQLNames(o.Schema)
	n.table("table", o.Table)
	return tableSet{store: "cursors", what: "cursors", schema: o.Schema, table: o.Table, names: n}, nil
}

func (opts *PinStoreOptions) migrationTables() (tableSet, error) {
	o := pinResolve(opts)
	n := newSQLNames(o.Schema)
	n.table("table", o.Table)
	n.index("version_idx", o.Table+"_version_idx")
	n.invalidation(o.Table, o.channel())
	return tableSet{store: "pins", what: "pin store", schema: o.Schema, table: o.Table, names: n}, nil
}

func (opts *CredentialStoreOptions) migrationTables() (tableSet, error) {
	o := credResolve(opts)
	n := newSQLNames(o.Schema)
	n.table("table", o.Table)
	n.index("licensee_idx", o.Table+"_licensee_idx")
	n.invalidation(o.Table, o.channel())
	return tableSet{store: "credentials", what: "credentials", schema: o.Schema, table: o.Table, names: n}, nil
}

func (opts *RequestLogStoreOptions) migrationTables() (tableSet, error) {
	o := reqlogResolve(opts)
	n := newSQLNames(o.Schema)
	n.table("table", o.Table)
	n.index("owner_at_idx", o.Table+"_owner_at_idx")
	n.index("at_idx", o.Table+"_at_idx")
	return tableSet{store: "requestlog", what: "request log", schema: o.Schema, table: o.Table, names: n}, nil
}

func (opts *PortalStoreOptions) migrationTables() (tableSet, error) {
	o := portalResolve(opts)
	n := newSQLNames(o.Schema)
	n.table("table", o.Table)
	n.index("expires_idx", o.Table+"_expires_at_idx")
	return tableSet{store: "portal", what: "portal store", schema: o.Schema, table: o.Table, names: n}, nil
}
