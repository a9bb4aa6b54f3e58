package pgstore_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/apikey/credentialtest"
	idemdriver "github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// Databases in service carry the schema of the unversioned migrations (testdata/unversioned_*.sql,
// generated from that code). These tests deploy it, write with every store, migrate, and check that
// every row survived, that the stores work on, and that the result is what Migrate makes of an empty
// schema.

// adoptCase is a deployed schema and the options of the stores on it.
type adoptCase struct {
	name    string
	fixture string
	stores  func(schema string) []pgstore.Tables
}

var adoptCases = []adoptCase{
	{"default names in the search_path", "unversioned_defaults.sql", func(string) []pgstore.Tables { return everyStore("") }},
	{"other names, schema named", "unversioned_custom.sql", otherNames},
}

// storeOpts sorts a Tables list by store.
type storeOpts struct {
	idem *pgstore.IdempotencyStoreOptions
	ev   *pgstore.EventLogOptions
	ep   *pgstore.EndpointStoreOptions
	cur  *pgstore.CursorStoreOptions
	pin  *pgstore.PinStoreOptions
	cred *pgstore.CredentialStoreOptions
}

func sortStores(tables []pgstore.Tables) storeOpts {
	var o storeOpts
	for _, t := range tables {
		switch t := t.(type) {
		case *pgstore.IdempotencyStoreOptions:
			o.idem = t
		case *pgstore.EventLogOptions:
			o.ev = t
		case *pgstore.EndpointStoreOptions:
			o.ep = t
		case *pgstore.CursorStoreOptions:
			o.cur = t
		case *pgstore.PinStoreOptions:
			o.pin = t
		case *pgstore.CredentialStoreOptions:
			o.cred = t
		}
	}
	return o
}

var (
	adoptKeyDone    = idemdriver.Key{Scope: "lic_1:live", Key: "order-1"}
	adoptKeyRunning = idemdriver.Key{Scope: "lic_1:live", Key: "order-2"}
	adoptResponse   = idemdriver.Response{Status: http.StatusCreated, Header: http.Header{"Location": {"/v1/orders/ord_1"}},
		Body: []byte(`{"id":"ord_1"}`)}
	adoptEndpoint = producer.Endpoint{ID: "we_1", URL: "https://hooks.example/a", Owner: "lic_1", Secrets: []string{"whsec_one"}, APIVersion: "v1"}
	adoptCred     = credentialtest.Credential(1, "lic_1", apikey.Sandbox)
)

func adoptEvent(n int) webhook.Event {
	return webhook.Event{ID: fmt.Sprintf("evt_adopt%d", n), Type: "order.created", Created: evlogT0.Unix(), APIVersion: "v1",
		Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}
}

// writeEveryStore writes with every store what a service in production holds: a completed and an
// in-flight idempotency record, numbered events (one delivered, with its attempt) and one not yet
// numbered, an endpoint, a cursor, a pin and a credential. With v1 the event log's tables have the
// shape of its first migration, which kept the delivery state on the events, and its numbered events
// are written as that version wrote them.
func writeEveryStore(t *testing.T, db pgstore.DB, o storeOpts, v1 bool) {
	t.Helper()
	writeUncachedStores(t, db, o, v1)
	writeCachedStores(t, db, o)
}

// writeCachedStores writes the pin and the credential of writeEveryStore.
func writeCachedStores(t *testing.T, db pgstore.DB, o storeOpts) {
	t.Helper()
	ctx := context.Background()
	writePinAsBefore(t, db, o.pin, "lic_1", "v2")
	// The credential as the versions before restricted keys wrote it: Put now writes permissions too.
	_, err := db.Exec(ctx, `INSERT INTO `+credTable(o).Sanitize()+` (id, hash, licensee, environment, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6)`, adoptCred.ID, adoptCred.Hash[:], adoptCred.Licensee, string(adoptCred.Environment),
		adoptCred.CreatedAt, adoptCred.ExpiresAt)
	require.NoError(t, err)
}

// credTable is the credentials table of o.
func credTable(o storeOpts) pgx.Identifier {
	id := pgx.Identifier{cmp.Or(o.cred.Table, pgstore.DefaultCredentialTable)}
	if o.cred.Schema != "" {
		id = pgx.Identifier{o.cred.Schema, id[0]}
	}
	return id
}

// pinTable is the quoted name of the pin store's table.
func pinTable(o *pgstore.PinStoreOptions) string {
	name := pgx.Identifier{cmp.Or(o.Table, pgstore.DefaultPinTable)}
	if o.Schema != "" {
		name = pgx.Identifier{o.Schema, name[0]}
	}
	return name.Sanitize()
}

// writePinAsBefore pins licensee to version as the versions before migration 3 (a pin's previous
// version) did, and as replicas of them still do during a rolling upgrade: the store now reads and
// writes the column that migration adds.
func writePinAsBefore(t *testing.T, db pgstore.DB, o *pgstore.PinStoreOptions, licensee, version string) {
	t.Helper()
	_, err := db.Exec(context.Background(), `INSERT INTO `+pinTable(o)+` (licensee, version, pinned_at) VALUES ($1, $2, $3)`,
		licensee, version, pinT0)
	require.NoError(t, err)
}

// readPinAsBefore reads licensee's pinned version as the versions before migration 3 did.
func readPinAsBefore(ctx context.Context, db pgstore.DB, o *pgstore.PinStoreOptions, licensee string) (string, error) {
	var version string
	err := db.QueryRow(ctx, `SELECT version FROM `+pinTable(o)+` WHERE licensee = $1`, licensee).Scan(&version)
	return version, err
}

// writeUncachedStores writes the rest of writeEveryStore: the stores whose migrations add no trigger.
func writeUncachedStores(t *testing.T, db pgstore.DB, o storeOpts, v1 bool) {
	t.Helper()
	ctx := context.Background()
	idem := must(pgstore.NewIdempotencyStore(db, o.idem))
	c := idemClaim(t, idem, adoptKeyDone, idemFP1, idemT0)
	require.NoError(t, idem.Complete(ctx, adoptKeyDone, c.Token, adoptResponse, idemT0.Add(idemRetention)))
	require.Equal(t, idemdriver.Claimed, idemClaim(t, idem, adoptKeyRunning, idemFP1, idemT0).Status)

	l := must(pgstore.NewEventLog(db, o.ev))
	if v1 {
		writeV1Events(t, db, o.ev)
	} else {
		for n := 1; n <= 3; n++ {
			_, err := l.Append(ctx, driver.StreamEvent{Stream: "we_1", Event: adoptEvent(n)})
			require.NoError(t, err)
		}
		require.Equal(t, 3, numberAll(t, l))
		ds, err := l.Claim(ctx, driver.ClaimRequest{Now: evlogT0, LeaseUntil: evlogT0.Add(time.Minute), Limit: 1})
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.NoError(t, l.Delivered(ctx, ds[0].Lease, driver.Attempt{At: evlogT0, Latency: time.Millisecond, StatusCode: 200}))
	}
	_, err := l.Append(ctx, driver.StreamEvent{Stream: "we_1", Event: adoptEvent(4)})
	require.NoError(t, err)

	// The endpoint as the versions before the lifecycle's columns wrote it: Put now writes those too.
	epTable := pgx.Identifier{cmp.Or(o.ep.Table, pgstore.DefaultEndpointTable)}
	if o.ep.Schema != "" {
		epTable = pgx.Identifier{o.ep.Schema, epTable[0]}
	}
	_, err = db.Exec(ctx, `INSERT INTO `+epTable.Sanitize()+` (id, owner, url, secrets, api_version) VALUES ($1, $2, $3, $4, $5)`,
		adoptEndpoint.ID, adoptEndpoint.Owner, adoptEndpoint.URL, adoptEndpoint.Secrets, adoptEndpoint.APIVersion)
	require.NoError(t, err)
	require.NoError(t, must(pgstore.NewCursorStore(db, o.cur)).Advance(ctx, "we_1", 0, 5))
}

// writeV1Events writes what the event log of migration 1 held after three events of we_1 were
// numbered and the first delivered: the delivery state on the events, the attempt in the history.
func writeV1Events(t *testing.T, db pgstore.DB, opts *pgstore.EventLogOptions) {
	t.Helper()
	table := pgstore.DefaultEventLogTable
	var schema string
	if opts != nil {
		schema = opts.Schema
		if opts.Table != "" {
			table = opts.Table
		}
	}
	name := func(suffix string) string {
		if schema == "" {
			return pgx.Identifier{table + suffix}.Sanitize()
		}
		return pgx.Identifier{schema, table + suffix}.Sanitize()
	}
	ctx := context.Background()
	_, err := db.Exec(ctx, "INSERT INTO "+name("_streams")+" (stream, last_seq) VALUES ('we_1', 3)")
	require.NoError(t, err)
	for n := 1; n <= 3; n++ {
		e := adoptEvent(n)
		state, delivered := 0, (*time.Time)(nil)
		if n == 1 {
			state, delivered = 1, &evlogT0
		}
		_, err := db.Exec(ctx, "INSERT INTO "+name("")+` (stream, seq, id, type, created, api_version, data, state,
			next_attempt_at, last_attempt_at, delivered_at) VALUES ('we_1', $1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`,
			n, e.ID, e.Type, e.Created, e.APIVersion, []byte(e.Data), state, time.Unix(e.Created, 0), delivered)
		require.NoError(t, err)
	}
	_, err = db.Exec(ctx, "INSERT INTO "+name("_attempts")+` (id, stream, seq, event_id, number, outcome, at, latency_us,
		status_code, class, reason, response) OVERRIDING SYSTEM VALUE
		VALUES (4242, 'we_1', 1, $1, 1, 2, $2, 1000, 200, '', '', '')`, adoptEvent(1).ID, evlogT0)
	require.NoError(t, err)
}

// checkEveryStore checks that what writeEveryStore wrote is all there, and that every store goes on
// working.
func checkEveryStore(t *testing.T, db pgstore.DB, o storeOpts) {
	t.Helper()
	ctx := context.Background()
	idem := must(pgstore.NewIdempotencyStore(db, o.idem))
	rec, err := idem.Lookup(ctx, adoptKeyDone, idemT0)
	require.NoError(t, err)
	require.Equal(t, idemdriver.Completed, rec.Status)
	require.Equal(t, adoptResponse, *rec.Response)
	rec, err = idem.Lookup(ctx, adoptKeyRunning, idemT0)
	require.NoError(t, err)
	require.Equal(t, idemdriver.InFlight, rec.Status)
	replay := idemClaim(t, idem, adoptKeyDone, idemFP1, idemT0)
	require.Equal(t, idemdriver.Completed, replay.Status, "a retry replays the response stored before the migration")
	fresh := idemClaim(t, idem, idemdriver.Key{Scope: "lic_1:live", Key: "order-3"}, idemFP1, idemT0)
	require.Equal(t, idemdriver.Claimed, fresh.Status)
	require.Greater(t, fresh.Token, rec.Token, "tokens go on from the same sequence")

	l := must(pgstore.NewEventLog(db, o.ev))
	n, err := l.Unsequenced(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the event appended before the migration still waits for its number")
	_, err = l.Append(ctx, driver.StreamEvent{Stream: "we_1", Event: adoptEvent(5)})
	require.NoError(t, err)
	require.Equal(t, 2, numberAll(t, l))
	evs, more, err := l.Range(ctx, "we_1", 1, math.MaxUint64, 10)
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, evs, 5)
	for i, e := range evs {
		want := adoptEvent(i + 1)
		want.Sequence = uint64(i + 1)
		require.Equal(t, want, e, "no gap, no reuse, data byte for byte")
	}
	st, err := l.Status(ctx, "we_1", 1)
	require.NoError(t, err)
	require.Equal(t, driver.Delivered, st.State)
	hist, _, err := l.Attempts(ctx, driver.AttemptQuery{Stream: "we_1", Limit: 10})
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.Equal(t, 200, hist[0].StatusCode)
	ds, err := l.Claim(ctx, driver.ClaimRequest{Now: evlogT0, LeaseUntil: evlogT0.Add(time.Minute), Limit: 10})
	require.NoError(t, err)
	require.Len(t, ds, 4, "the undelivered events, before the migration and after")
	require.Equal(t, uint64(2), ds[0].Sequence)

	eps := must(pgstore.NewEndpointStore(db, o.ep))
	ep, err := eps.Lookup(ctx, "we_1")
	require.NoError(t, err)
	require.Equal(t, adoptEndpoint, ep)

	cur := must(pgstore.NewCursorStore(db, o.cur))
	pos, err := cur.Get(ctx, "we_1")
	require.NoError(t, err)
	require.Equal(t, uint64(5), pos)
	require.NoError(t, cur.Advance(ctx, "we_1", 5, 6))

	pin, err := must(pgstore.NewPinStore(db, o.pin)).Get(ctx, "lic_1")
	require.NoError(t, err)
	require.Equal(t, "v2", pin.Version)
	require.Empty(t, pin.Previous, "a pin written before it had a previous version has not moved")

	cred, err := must(pgstore.NewCredentialStore(db, o.cred)).Get(ctx, adoptCred.Hash)
	require.NoError(t, err)
	credentialtest.RequireSame(t, adoptCred, cred)
}

// TestMigrateAdoptsUnversionedSchema: migration 1 adopts the schema the unversioned migrations
// deployed, rows and all, records itself, and leaves the schema Migrate makes of an empty one.
func TestMigrateAdoptsUnversionedSchema(t *testing.T) {
	for _, tc := range adoptCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			pool, schema := pgtest.Pool(t)
			stores := tc.stores(schema)
			applyFixture(t, pool, tc.fixture)
			o := sortStores(stores)
			writeEveryStore(t, pool, o, true)

			require.NoError(t, pgstore.Migrate(ctx, pool, stores...))
			applied := versionRows(t, pool, schema)
			require.Len(t, applied, len(everyVersion()), "every migration of every store")
			require.NoError(t, pgstore.Migrate(ctx, pool, stores...))
			require.Equal(t, applied, versionRows(t, pool, schema), "running it again records nothing")
			checkEveryStore(t, pool, o)

			// The same stores, migrated from an empty schema, have the same tables.
			empty, emptySchema := pgtest.Pool(t)
			emptyStores := tc.stores(emptySchema)
			require.NoError(t, pgstore.Migrate(ctx, empty, emptyStores...))
			require.Equal(t, describeSchema(t, empty, emptySchema), describeSchema(t, pool, schema))
			require.Equal(t, versionKeys(t, empty, emptySchema), versionKeys(t, pool, schema))
			writeEveryStore(t, empty, sortStores(emptyStores), false)
			checkEveryStore(t, empty, sortStores(emptyStores))
		})
	}
}

// TestMigrateAdoptionTakesNoLock: the first versioned Migrate on a deployed schema — a rolling
// upgrade, while replicas of the earlier version hold transactions open on every table (an outbox
// append, a request in transactional mode) — has nothing to alter or build in migration 1, so it
// waits for none of them, and holds none of them up. Later migrations may: the event log's second
// alters its tables (0002_delivery_cursors.sql says to stop the earlier dispatchers first), and the
// second of the credentials and the pins adds triggers, which wait for open writes of those tables
// (TestMigrateTriggersHoldUpNoReader); they run once the open transaction is done.
func TestMigrateAdoptionTakesNoLock(t *testing.T) {
	for _, tc := range adoptCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			pool, schema := pgtest.Pool(t)
			stores := tc.stores(schema)
			applyFixture(t, pool, tc.fixture)
			o := sortStores(stores)

			writeCachedStores(t, pool, o)
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			writeUncachedStores(t, tx, o, true)
			_, err = readPinAsBefore(ctx, tx, o.pin, "lic_1")
			require.NoError(t, err)
			// An earlier version's lookup, of the columns it knew.
			var id string
			require.NoError(t, tx.QueryRow(ctx, `SELECT id FROM `+credTable(o).Sanitize()+` WHERE hash = $1`, adoptCred.Hash[:]).Scan(&id))

			mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			require.NoError(t, pgstore.MigrateUpTo(mctx, pool, 1, stores...), "the migration waited for the open transaction")
			require.Len(t, versionRows(t, pool, schema), 6)
			require.NoError(t, tx.Commit(ctx))
			require.NoError(t, pgstore.Migrate(ctx, pool, stores...))
			require.Len(t, versionRows(t, pool, schema), len(everyVersion()))
			checkEveryStore(t, pool, o)
		})
	}
}

// TestMigrateTriggersHoldUpNoReader: migration 2 of the credentials and the pins creates a trigger,
// which must wait for a transaction that wrote to the table; while it waits, readers of the table
// (every request's credential and pin lookups) go on.
func TestMigrateTriggersHoldUpNoReader(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	o := sortStores(everyStore(schema))
	applyFixture(t, pool, "unversioned_defaults.sql")
	// The fixture's tables are in the search_path; the stores name the schema, which is the same.
	writeCachedStores(t, pool, o)

	writer, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = writer.Rollback(ctx) }()
	writePinAsBefore(t, writer, o.pin, "lic_2", "v1")

	migrated := make(chan error, 1)
	go func() { migrated <- pgstore.Migrate(ctx, pool, o.pin) }()
	// Wait until migration 2 waits for the writer's lock.
	writerPID := int32(writer.Conn().PgConn().PID())
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(patience(t))
	for waiting := false; !waiting; {
		select {
		case err := <-migrated:
			t.Fatalf("the migration did not wait for the open write: %v", err)
		case <-giveUp:
			t.Fatal("the migration never waited for the writer's lock")
		case <-tick.C:
		}
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE $1 = ANY (pg_blocking_pids(pid)) AND query LIKE '-- Cache invalidation%')`, writerPID).Scan(&waiting))
	}
	// The readers during a rolling upgrade are the earlier version's replicas.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := readPinAsBefore(rctx, pool, o.pin, "lic_1")
	require.NoError(t, err, "a reader is not held up")
	require.Equal(t, "v2", v)

	require.NoError(t, writer.Commit(ctx))
	require.NoError(t, <-migrated)
	p, err := must(pgstore.NewPinStore(pool, o.pin)).Get(ctx, "lic_2")
	require.NoError(t, err)
	require.Equal(t, "v1", p.Version)
}
