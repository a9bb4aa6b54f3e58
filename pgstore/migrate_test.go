package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/versioning"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// everyStore is every store's options with the default names in schema ("": the search_path).
func everyStore(schema string) []pgstore.Tables {
	return []pgstore.Tables{
		&pgstore.IdempotencyStoreOptions{Schema: schema},
		&pgstore.EventLogOptions{Schema: schema},
		&pgstore.EndpointStoreOptions{Schema: schema},
		&pgstore.CursorStoreOptions{Schema: schema},
		&pgstore.PinStoreOptions{Schema: schema},
		&pgstore.CredentialStoreOptions{Schema: schema},
	}
}

// otherNames is every store's options with the names of testdata/unversioned_custom.sql in schema.
func otherNames(schema string) []pgstore.Tables {
	return []pgstore.Tables{
		&pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idempotency_keys_sandbox"},
		&pgstore.EventLogOptions{Schema: schema, Table: "Order Events", MaxStreamEvents: 1000},
		&pgstore.EndpointStoreOptions{Schema: schema, Table: "hooks"},
		&pgstore.CursorStoreOptions{Schema: schema, Table: "consumer_cursors"},
		&pgstore.PinStoreOptions{Schema: schema, Table: "pins"},
		&pgstore.CredentialStoreOptions{Schema: schema, Table: "api_keys"},
	}
}

// versionRow is one row of the version table.
type versionRow struct {
	Store, Table string
	Version      int
	Name         string
	AppliedAt    time.Time
}

// versionRows reads schema's version table, in key order.
func versionRows(t testing.TB, db pgstore.DB, schema string) []versionRow {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT store, table_name, version, name, applied_at FROM `+
		pgx.Identifier{schema, "pgstore_migrations"}.Sanitize()+` ORDER BY store, table_name, version`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (versionRow, error) {
		var v versionRow
		return v, r.Scan(&v.Store, &v.Table, &v.Version, &v.Name, &v.AppliedAt)
	})
	require.NoError(t, err)
	return out
}

// versionKeys is versionRows without the names and times: store, table and version.
func versionKeys(t testing.TB, db pgstore.DB, schema string) []string {
	t.Helper()
	var out []string
	for _, v := range versionRows(t, db, schema) {
		out = append(out, fmt.Sprintf("%s %s %d", v.Store, v.Table, v.Version))
	}
	return out
}

// allVersions is versionKeys of the given tables — store and table, in pairs — when every migration
// of each was applied.
func allVersions(pairs ...string) []string {
	var out []string
	for i := 0; i+1 < len(pairs); i += 2 {
		for v := 1; v <= pgstore.MigrationCount(pairs[i]); v++ {
			out = append(out, fmt.Sprintf("%s %s %d", pairs[i], pairs[i+1], v))
		}
	}
	slices.Sort(out)
	return out
}

// everyVersion is allVersions of every store's default table.
func everyVersion() []string {
	return allVersions("credentials", "sandbox_credentials", "cursors", "webhook_cursors", "endpoints", "webhook_endpoints",
		"eventlog", "webhook_events", "idempotency", "idempotency_keys", "pins", "version_pins")
}

// Migrate creates every store's tables; replicas that start together may all run it at once, and
// running it again changes nothing.
func TestMigrateCreatesEveryStore(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = pgstore.Migrate(ctx, pool) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	applied := versionRows(t, pool, schema)
	require.NoError(t, pgstore.Migrate(ctx, pool))
	require.Equal(t, applied, versionRows(t, pool, schema), "running it again records nothing")

	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, schema)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"idempotency_keys", "pgstore_migrations", "sandbox_credentials", "version_pins", "webhook_cursors", "webhook_endpoints",
		"webhook_events", "webhook_events_attempts", "webhook_events_deliveries", "webhook_events_pending", "webhook_events_redeliveries",
		"webhook_events_stats", "webhook_events_streams"}, tables)
	require.Equal(t, everyVersion(), versionKeys(t, pool, schema))
	for _, v := range applied {
		require.True(t, strings.HasPrefix(v.Name, fmt.Sprintf("%04d_", v.Version)), "%s %d: %s", v.Store, v.Version, v.Name)
	}

	// Each store works on what Migrate made.
	_, err = must(pgstore.NewPinStore(pool, &pgstore.PinStoreOptions{Schema: schema})).Get(ctx, "lic_nobody")
	require.ErrorIs(t, err, versioning.ErrNotPinned, "the table exists: not pinned, not \"no such table\"")
}

func TestMigrateReportsFailure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pool, _ := pgtest.Pool(t)
	require.Error(t, pgstore.Migrate(ctx, pool))
}

// replicaPool is a pool of its own on the test database, as each replica of a service has.
func replicaPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.DSN(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// TestMigrateReplicasStartTogether: replicas, each with its own pool, migrate the same empty schema
// at the same moment, two table sets of every store; every one succeeds, and each migration is
// applied and recorded once.
func TestMigrateReplicasStartTogether(t *testing.T) {
	ctx := context.Background()
	_, schema := pgtest.Pool(t)
	stores := append(everyStore(schema), otherNames(schema)...)
	const replicas = 8
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, replicas)
	)
	for i := range replicas {
		pool := replicaPool(t)
		require.NoError(t, pool.Ping(ctx))
		wg.Go(func() {
			<-start
			errs[i] = pgstore.Migrate(ctx, pool, stores...)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "replica %d", i)
	}
	pool := replicaPool(t)
	require.Equal(t, allVersions(
		"credentials", "api_keys", "credentials", "sandbox_credentials",
		"cursors", "consumer_cursors", "cursors", "webhook_cursors",
		"endpoints", "hooks", "endpoints", "webhook_endpoints",
		"eventlog", "Order Events", "eventlog", "webhook_events",
		"idempotency", "idempotency_keys", "idempotency", "idempotency_keys_sandbox",
		"pins", "pins", "pins", "version_pins",
	), versionKeys(t, pool, schema), "one application of each migration")
	var indexed bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`,
		pgx.Identifier{schema, "Order Events_pending_stream_idx"}.Sanitize()).Scan(&indexed))
	require.True(t, indexed, "MaxStreamEvents' index")
}

// TestMigrateRefusesNewerDatabase: tables a newer pgstore migrated are refused, with an error that
// names them and both versions, and nothing is changed; other table sets of the schema are not
// concerned.
func TestMigrateRefusesNewerDatabase(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	opts := &pgstore.EventLogOptions{Schema: schema}
	require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	known := pgstore.MigrationCount("eventlog")
	_, err := pool.Exec(ctx, `INSERT INTO pgstore_migrations (store, table_name, version, name) VALUES ('eventlog', 'webhook_events', $1, 'future.sql')`,
		known+1)
	require.NoError(t, err)
	before := versionRows(t, pool, schema)

	err = pgstore.Migrate(ctx, pool, &pgstore.EventLogOptions{Schema: schema, MaxStreamEvents: 10})
	require.ErrorIs(t, err, pgstore.ErrNewerDatabase)
	for _, want := range []string{`event log "` + schema + `"."webhook_events"`, fmt.Sprintf(`"%s"."pgstore_migrations" records version %d`, schema, known+1), fmt.Sprintf("up to %d", known)} {
		require.ErrorContains(t, err, want)
	}
	require.Equal(t, before, versionRows(t, pool, schema))
	var indexed bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('webhook_events_pending_stream_idx') IS NOT NULL`).Scan(&indexed))
	require.False(t, indexed, "a refused migration changes nothing, not even what options add")

	// Another name is another table set, with a version of its own.
	require.NoError(t, pgstore.Migrate(ctx, pool, &pgstore.EventLogOptions{Schema: schema, Table: "other_events"}))
}

func TestMigrateRefusals(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.Pool(t)
	require.ErrorContains(t, pgstore.Migrate(ctx, nil), "pgstore: Migrate needs a DB")
	require.ErrorContains(t, pgstore.Migrate(ctx, pool, &pgstore.CursorStoreOptions{}, nil), "pgstore: migrate: store 1 is nil")
	require.ErrorContains(t, pgstore.Migrate(ctx, pool, &pgstore.EventLogOptions{MaxStreamEvents: -1}), "negative")
	_, err := pgstore.MigrationSQL(nil)
	require.Error(t, err)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&n))
	require.Zero(t, n, "a refused call creates nothing, not even for the stores before the bad one")
}

// TestMigrateNilOptionsMeanDefaults: a nil pointer of a store's options is that store with the
// default names.
func TestMigrateNilOptionsMeanDefaults(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	require.NoError(t, pgstore.Migrate(ctx, pool, (*pgstore.CursorStoreOptions)(nil), (*pgstore.EventLogOptions)(nil)))
	require.Equal(t, allVersions("cursors", "webhook_cursors", "eventlog", "webhook_events"), versionKeys(t, pool, schema))
}

// TestMigrateMaxStreamEventsIndex: the index the bound needs is made by whichever Migrate first gets
// options with the bound, also on tables migrated before without it; never without the bound.
func TestMigrateMaxStreamEventsIndex(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	indexed := func() bool {
		var ok bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('webhook_events_pending_stream_idx') IS NOT NULL`).Scan(&ok))
		return ok
	}
	require.NoError(t, pgstore.Migrate(ctx, pool, &pgstore.EventLogOptions{}))
	require.False(t, indexed())
	for range 2 {
		require.NoError(t, pgstore.Migrate(ctx, pool, &pgstore.EventLogOptions{MaxStreamEvents: 5}))
		require.True(t, indexed())
	}
	require.Equal(t, allVersions("eventlog", "webhook_events"), versionKeys(t, pool, schema), "an option is not a version")
}

// TestMigrateOddNames: names that need quoting, that hold a line break or the dollar-quote tag of
// the migrations' DO blocks, migrate through Migrate and through MigrationSQL's script alike.
func TestMigrateOddNames(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	odd := schema + "_Odd \"Name\"\n$pgstore$"
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{odd}.Sanitize()+` CASCADE`)
	})
	stores := []pgstore.Tables{
		&pgstore.EventLogOptions{Schema: odd, Table: "ev$pgstore$'; --"},
		&pgstore.IdempotencyStoreOptions{Schema: odd, Table: "idem\nDROP TABLE x; --"},
		&pgstore.CursorStoreOptions{Table: "cur $pgstore1$"},
	}
	sql, err := pgstore.MigrationSQL(stores...)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err, "MigrationSQL's script runs")
	require.NoError(t, pgstore.Migrate(ctx, pool, stores...))
	require.Equal(t, allVersions("eventlog", "ev$pgstore$'; --", "idempotency", "idem\nDROP TABLE x; --"), versionKeys(t, pool, odd))
	require.Equal(t, allVersions("cursors", "cur $pgstore1$"), versionKeys(t, pool, schema))

	l := must(pgstore.NewEventLog(pool, stores[0].(*pgstore.EventLogOptions)))
	_, err = l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: evlogEvent("order.created")})
	require.NoError(t, err)
	require.Equal(t, 1, numberAll(t, l))
}

// TestMigrationSQLMatchesMigrate: a team that runs MigrationSQL's script with its own tool gets the
// tables Migrate makes, and Migrate then finds every migration applied.
func TestMigrationSQLMatchesMigrate(t *testing.T) {
	ctx := context.Background()
	byScript, scriptSchema := pgtest.Pool(t)
	byMigrate, migrateSchema := pgtest.Pool(t)

	sql, err := pgstore.MigrationSQL(append(everyStore(""), otherNames("")...)...)
	require.NoError(t, err)
	require.NotContains(t, sql, "CREATE SCHEMA", "no schema is named: the search_path's")
	require.Contains(t, sql, `-- pgstore: event log "Order Events", migration 1 (0001_create.sql).`)
	tx, err := byScript.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	recorded := versionRows(t, byScript, scriptSchema)
	require.Len(t, recorded, 2*len(everyVersion()))

	require.NoError(t, pgstore.Migrate(ctx, byScript, append(everyStore(""), otherNames("")...)...))
	require.Equal(t, recorded, versionRows(t, byScript, scriptSchema), "Migrate found every migration applied")
	require.NoError(t, pgstore.Migrate(ctx, byMigrate, append(everyStore(""), otherNames("")...)...))
	require.Equal(t, describeSchema(t, byMigrate, migrateSchema), describeSchema(t, byScript, scriptSchema))
	require.Equal(t, versionKeys(t, byMigrate, migrateSchema), versionKeys(t, byScript, scriptSchema))

	qualified, err := pgstore.MigrationSQL(&pgstore.PinStoreOptions{Schema: "app"})
	require.NoError(t, err)
	require.Contains(t, qualified, `CREATE SCHEMA IF NOT EXISTS "app";`)
	require.Contains(t, qualified, `CREATE TABLE IF NOT EXISTS "app"."pgstore_migrations"`)
	require.Contains(t, qualified, `INSERT INTO "app"."pgstore_migrations" (store, table_name, version, name) VALUES ('pins', 'version_pins', 1, '0001_create.sql')`)
}

// describeSchema describes what a migration made in schema, read through pool, whose search_path
// is that schema (so that names print unqualified): tables and their columns, indexes, constraints
// and sequences, sorted, with the schema's name taken out.
func describeSchema(t testing.TB, pool pgstore.DB, schema string) []string {
	t.Helper()
	ctx := context.Background()
	queries := []string{
		`SELECT format('column %s.%s %s null=%s default=%s collation=%s identity=%s', table_name, column_name, data_type,
		        is_nullable, coalesce(column_default, '-'), coalesce(collation_name, '-'), is_identity)
		 FROM information_schema.columns WHERE table_schema = $1`,
		`SELECT format('index %s %s', indexname, indexdef) FROM pg_indexes WHERE schemaname = $1`,
		`SELECT format('constraint %s %s %s', c.conrelid::regclass, c.conname, pg_get_constraintdef(c.oid))
		 FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1`,
		`SELECT format('sequence %s owned by %s', s.relname, coalesce(pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid), '-'))
		 FROM pg_class s JOIN pg_namespace n ON n.oid = s.relnamespace
		 LEFT JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = s.oid AND d.refclassid = 'pg_class'::regclass
		      AND d.deptype IN ('a', 'i')
		 WHERE s.relkind = 'S' AND n.nspname = $1`,
		`SELECT format('trigger %s %s enabled=%s', t.tgname, pg_get_triggerdef(t.oid), t.tgenabled)
		 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = $1 AND NOT t.tgisinternal`,
		`SELECT format('function %s', p.proname) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`,
	}
	var out []string
	for _, q := range queries {
		rows, err := pool.Query(ctx, q, schema)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		for _, l := range lines {
			out = append(out, strings.ReplaceAll(strings.ReplaceAll(l, pgx.Identifier{schema}.Sanitize()+".", ""), schema+".", ""))
		}
	}
	slices.Sort(out)
	return out
}

// applyFixture runs a file of testdata, a schema as the unversioned migrations deployed it, in
// pool's search_path.
func applyFixture(t testing.TB, pool pgstore.DB, name string) {
	t.Helper()
	sql, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	_, err = pool.Exec(context.Background(), string(sql), pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
}

// migrateAsReplicas migrates stores the way replicas starting together do — four Migrates at once,
// each of which must succeed — and once more afterwards, which must be harmless.
func migrateAsReplicas(t testing.TB, db pgstore.DB, stores ...pgstore.Tables) {
	t.Helper()
	ctx := context.Background()
	errs := make(chan error, 4)
	for range 4 {
		go func() { errs <- pgstore.Migrate(ctx, db, stores...) }()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	require.NoError(t, pgstore.Migrate(ctx, db, stores...))
}

// indexDefs returns the definitions of table's indexes in schema, by index name.
func indexDefs(t testing.TB, db pgstore.DB, schema, table string) []string {
	t.Helper()
	rows, err := db.Query(context.Background(),
		`SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = $2 ORDER BY indexname`, schema, table)
	require.NoError(t, err)
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return defs
}
