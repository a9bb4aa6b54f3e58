package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/jackc/pgx/v5"
)

// migrationFiles holds every store's numbered migrations, migrations/<store>/NNNN_<what>.sql, the
// version table's definition, migrations/versions.sql, and the steps that depend on an option
// rather than a version (migrations/eventlog/max_stream_events.sql).
//
//go:embed migrations
var migrationFiles embed.FS

// versionsTable is the version table's name, in every schema that holds a store's tables.
const versionsTable = "pgstore_migrations"

// migrateLockClass is the first key of the migration lock (pg_advisory_xact_lock(class,
// hashtext(schema))): one lock per schema, whichever stores and names a migration concerns, since
// the version table and the schema itself are shared by all of them. Two schemas whose keys collide
// merely take turns.
const migrateLockClass = 0x70676d67 // "pgmg"

// ErrNewerDatabase: Migrate found tables whose recorded version is newer than any migration this
// version of pgstore has; a newer pgstore migrated them, and this one refuses to touch them, or to
// say that they are up to date. Its error names the tables, the version table and both versions.
var ErrNewerDatabase = errors.New("pgstore: the tables were migrated by a newer pgstore")

// Tables names one store's tables for Migrate and MigrationSQL. It is that store's options — an
// *IdempotencyStoreOptions, *EventLogOptions, *EndpointStoreOptions, *CursorStoreOptions, *PinStoreOptions,
// *CredentialStoreOptions, *RequestLogStoreOptions or *PortalStoreOptions, the value its constructor
// takes, where a nil pointer means the defaults — and no other type implements it.
type Tables interface {
	migrationTables() (tableSet, error)
}

// tableSet is one store's tables: the key of their versions and the names of their migrations.
type tableSet struct {
	store  string   // the migrations' directory and the version table's store column
	what   string   // the store, in messages
	schema string   // Options.Schema
	table  string   // Options.Table with its default applied: the version table's table_name column
	names  sqlNames // the placeholders of the migrations
	extras []string // files of migrations/<store> run at every Migrate, for options (not versions)
}

// where locates the tables in messages: the store and its table's qualified name.
func (s *tableSet) where() string { return s.what + " " + qualify(s.schema, s.table) }

// migration is one numbered migration of one table set, rendered.
type migration struct {
	version int
	name    string // the file
	sql     string
}

// migrations renders the set's numbered migrations in fsys, in order, and its option-dependent
// steps.
func (s *tableSet) migrations(fsys fs.FS) ([]migration, []string, error) {
	entries, err := fs.ReadDir(fsys, path.Join("migrations", s.store))
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: migrate %s: %w", s.where(), err)
	}
	var out []migration
	for _, e := range entries { // sorted by name
		if !isNumbered(e.Name()) {
			continue
		}
		v := len(out) + 1
		if !strings.HasPrefix(e.Name(), fmt.Sprintf("%04d_", v)) {
			return nil, nil, fmt.Errorf("pgstore: migrate %s: migration %s is out of sequence (want %04d_…)", s.where(), e.Name(), v)
		}
		sql, err := s.render(fsys, e.Name())
		if err != nil {
			return nil, nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: sql})
	}
	extras := make([]string, len(s.extras))
	for i, name := range s.extras {
		if extras[i], err = s.render(fsys, name); err != nil {
			return nil, nil, err
		}
	}
	return out, extras, nil
}

// isNumbered reports whether a migration file's name is NNNN_….sql.
func isNumbered(name string) bool {
	if len(name) < 6 || name[4] != '_' || !strings.HasSuffix(name, ".sql") {
		return false
	}
	for _, c := range name[:4] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// render reads one file of the set's migrations and fills in its names.
func (s *tableSet) render(fsys fs.FS, name string) (string, error) {
	b, err := fs.ReadFile(fsys, path.Join("migrations", s.store, name))
	if err == nil {
		var sql string
		if sql, err = renderSQL(string(b), s.names.m); err == nil {
			return sql, nil
		}
	}
	return "", fmt.Errorf("pgstore: migrate %s: %s: %w", s.where(), name, err)
}

// Migrate brings the tables of the given stores to the schema this version of pgstore uses: it
// creates them when they do not exist, and applies each numbered migration they lack. With no stores
// it migrates every store's tables under their default names in the connection's search_path (the
// first schema of it that exists): idempotency records, the webhook event log, webhook endpoints,
// webhook cursors, version pins and sandbox credentials; the request log (RequestLogStoreOptions)
// and the webhook portal's links and sessions (PortalStoreOptions), which a service opts into, are
// migrated only when named, so that upgrading pgstore never makes a no-argument Migrate create a
// table the service does not use. Otherwise pass each store's options,
// the same value its constructor takes (nil pointers mean the defaults), and only those stores'
// tables are migrated:
//
//	err := pgstore.Migrate(ctx, pool,
//		&pgstore.EventLogOptions{Schema: "app", MaxStreamEvents: 10_000},
//		&pgstore.IdempotencyStoreOptions{Schema: "app"})
//
// Each migration runs in a transaction of its own that records it in the version table,
// pgstore_migrations, which Migrate creates in each schema that holds a store's tables: one row per
// migration applied, keyed by the store and its Table, so every set of names keeps its own version.
// The transactions hold an advisory lock of their schema (pg_advisory_xact_lock), so replicas that
// start together may all call Migrate: one applies each migration, the others then find it applied.
// Running it again changes nothing, and on tables that are up to date it only reads the version
// table: it takes no lock on the tables and needs no privilege to create anything.
//
// Migration 1 of each store also adopts tables that the unversioned migrations of earlier versions
// made, with their rows: it creates only what is missing and adds the columns and indexes an earlier
// table lacks, and takes no lock on a table that lacks nothing. Options that change the schema
// rather than a version (EventLogOptions.MaxStreamEvents, whose index it creates when missing) are
// applied at every call.
//
// Tables whose recorded version is newer than this pgstore knows are refused with an error that
// wraps ErrNewerDatabase and names them; Migrate then changes nothing of that store. Errors name the
// store, its table and the migration that failed. Migrate stops at the first store that fails;
// stores before it stay migrated.
func Migrate(ctx context.Context, db DB, stores ...Tables) error {
	return migrate(ctx, db, migrationFiles, stores)
}

// migrate is Migrate with the migrations of fsys.
func migrate(ctx context.Context, db DB, fsys fs.FS, stores []Tables) error {
	if db == nil {
		return errNoDB("Migrate")
	}
	sets, err := tableSets(stores)
	if err != nil {
		return err
	}
	for i := range sets {
		s := &sets[i]
		steps, extras, err := s.migrations(fsys)
		if err != nil {
			return err
		}
		for done := false; !done; {
			if done, err = s.migrateOne(ctx, db, fsys, steps, extras); err != nil {
				return err
			}
		}
	}
	return nil
}

// tableSets resolves Migrate's and MigrationSQL's arguments: every store with its defaults when
// there are none.
func tableSets(stores []Tables) ([]tableSet, error) {
	if len(stores) == 0 {
		stores = []Tables{&IdempotencyStoreOptions{}, &EventLogOptions{}, &EndpointStoreOptions{},
			&CursorStoreOptions{}, &PinStoreOptions{}, &CredentialStoreOptions{}}
	}
	sets := make([]tableSet, len(stores))
	for i, t := range stores {
		if t == nil {
			return nil, fmt.Errorf("pgstore: migrate: store %d is nil; pass a store's options (a nil *EventLogOptions, say, for the defaults)", i)
		}
		var err error
		if sets[i], err = t.migrationTables(); err != nil {
			return nil, err
		}
	}
	return sets, nil
}

// migrateOne runs one transaction under the schema's lock: it applies the first migration the set
// lacks, or, when it lacks none, the option-dependent steps, and then reports done.
func (s *tableSet) migrateOne(ctx context.Context, db DB, fsys fs.FS, steps []migration, extras []string) (done bool, err error) {
	fail := func(err error) (bool, error) { return false, fmt.Errorf("pgstore: migrate %s: %w", s.where(), err) }
	tx, err := db.Begin(ctx)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// An empty Schema is the search_path's: the schema an unqualified CREATE TABLE uses.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext(COALESCE(NULLIF($2, ''), current_schema(), '')))",
		int32(migrateLockClass), s.schema); err != nil {
		return fail(err)
	}
	versions := qualify(s.schema, versionsTable)
	// The schema and the version table are created only when missing, so that tables that are up to
	// date need no privilege to create anything (CREATE SCHEMA IF NOT EXISTS checks it first).
	var haveSchema, haveVersions bool
	if err := tx.QueryRow(ctx, "SELECT $1 = '' OR EXISTS (SELECT FROM pg_namespace WHERE nspname = $1), to_regclass($2) IS NOT NULL",
		s.schema, versions).Scan(&haveSchema, &haveVersions); err != nil {
		return fail(err)
	}
	if !haveSchema {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(s.schema)); err != nil {
			return fail(err)
		}
	}
	if !haveVersions {
		sql, err := versionsSQL(fsys, s.schema)
		if err != nil {
			return fail(err)
		}
		if _, err := tx.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fail(err)
		}
	}
	var applied, newest int64
	if err := tx.QueryRow(ctx, "SELECT count(*), COALESCE(max(version), 0) FROM "+versions+" WHERE store = $1 AND table_name = $2",
		s.store, s.table).Scan(&applied, &newest); err != nil {
		return fail(err)
	}
	switch {
	case newest > int64(len(steps)):
		return false, fmt.Errorf("pgstore: migrate %s: %w: %s records version %d, this pgstore knows versions up to %d; run a newer pgstore",
			s.where(), ErrNewerDatabase, versions, newest, len(steps))
	case applied != newest:
		return false, fmt.Errorf("pgstore: migrate %s: %s records %d migrations up to version %d: a version is missing; record what was applied, or remove the rows of migrations that were not",
			s.where(), versions, applied, newest)
	case newest == int64(len(steps)):
		for _, sql := range extras {
			if _, err := tx.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
				return fail(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return fail(err)
		}
		return true, nil
	}
	m := steps[newest]
	if _, err := tx.Exec(ctx, m.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fail(fmt.Errorf("migration %d (%s): %w", m.version, m.name, err))
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+versions+" (store, table_name, version, name) VALUES ($1, $2, $3, $4)",
		s.store, s.table, int32(m.version), m.name); err != nil {
		return fail(fmt.Errorf("migration %d (%s): %w", m.version, m.name, err))
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(fmt.Errorf("migration %d (%s): %w", m.version, m.name, err))
	}
	return false, nil
}

// versionsSQL renders the version table of schema.
func versionsSQL(fsys fs.FS, schema string) (string, error) {
	b, err := fs.ReadFile(fsys, "migrations/versions.sql")
	if err != nil {
		return "", err
	}
	n := newSQLNames(schema)
	n.table("versions", versionsTable)
	return renderSQL(string(b), n.m)
}

// MigrationSQL returns the SQL of every migration of the given stores' tables (every store's, with
// the default names, when none is given), for a team that runs migrations with its own tool. It
// creates each schema and its version table, and follows each migration with the INSERT that records
// it there, so that Migrate, should it run later, finds the migrations applied. Each migration is
// headed by a comment that names it: a tool that keeps versions of its own takes each into a file of
// its own, and runs each once, in order, in a transaction. Every migration 1 is idempotent and
// adopts tables that the unversioned migrations of earlier versions made.
func MigrationSQL(stores ...Tables) (string, error) {
	sets, err := tableSets(stores)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("-- pgstore's migrations (pgstore.MigrationSQL): run each once, in order, in a transaction of its own.\n")
	schemas := make(map[string]bool)
	for i := range sets {
		s := &sets[i]
		steps, extras, err := s.migrations(migrationFiles)
		if err != nil {
			return "", err
		}
		if !schemas[s.schema] {
			schemas[s.schema] = true
			if s.schema == "" {
				b.WriteString("\n-- The version table, in the search_path's schema.\n")
			} else {
				fmt.Fprintf(&b, "\n-- The version table, in schema %s.\nCREATE SCHEMA IF NOT EXISTS %s;\n",
					sqlComment(quoteIdent(s.schema)), quoteIdent(s.schema))
			}
			sql, err := versionsSQL(migrationFiles, s.schema)
			if err != nil {
				return "", fmt.Errorf("pgstore: migrate %s: %w", s.where(), err)
			}
			b.WriteString(sql)
		}
		for _, m := range steps {
			fmt.Fprintf(&b, "\n-- pgstore: %s, migration %d (%s).\n", sqlComment(s.where()), m.version, m.name)
			b.WriteString(m.sql)
			fmt.Fprintf(&b, "INSERT INTO %s (store, table_name, version, name) VALUES (%s, %s, %d, %s) ON CONFLICT DO NOTHING;\n",
				qualify(s.schema, versionsTable), quoteLiteral(s.store), quoteLiteral(s.table), m.version, quoteLiteral(m.name))
		}
		for _, sql := range extras {
			fmt.Fprintf(&b, "\n-- pgstore: %s, for its options (not a version: run it again when they change).\n", sqlComment(s.where()))
			b.WriteString(sql)
		}
	}
	return b.String(), nil
}

// sqlComment makes s, which holds names a user chose, fit in a -- comment: a line break would end
// the comment and make the rest of the name a statement.
func sqlComment(s string) string {
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
}
