package pgstore

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
)

// thingsTables is a store of the tests' own, "things", whose migrations a test writes: the stores'
// real ones are one each today, and the machinery must already handle many.
type thingsTables struct{ schema string }

func (o thingsTables) migrationTables() (tableSet, error) {
	n := newSQLNames(o.schema)
	n.table("table", "things")
	n.index("note_idx", "things_note_idx")
	return tableSet{store: "things", what: "things", schema: o.schema, table: "things", names: n}, nil
}

// thingsFS is a file system of migrations for thingsTables, with the real version table.
func thingsFS(t *testing.T, files map[string]string) fstest.MapFS {
	t.Helper()
	versions, err := fs.ReadFile(migrationFiles, "migrations/versions.sql")
	require.NoError(t, err)
	fsys := fstest.MapFS{"migrations/versions.sql": {Data: versions}}
	for name, sql := range files {
		fsys["migrations/things/"+name] = &fstest.MapFile{Data: []byte(sql)}
	}
	return fsys
}

func thingsVersions(t *testing.T, db DB, schema string) []int {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT version FROM `+qualify(schema, versionsTable)+
		` WHERE store = 'things' ORDER BY version`)
	require.NoError(t, err)
	v, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	return v
}

// TestMigrateEachMigrationInItsOwnTransaction: migrations apply in order, each committed with its
// row; one that fails rolls back alone, is named in the error, and the next Migrate resumes there.
func TestMigrateEachMigrationInItsOwnTransaction(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	files := map[string]string{
		"0001_create.sql": "CREATE TABLE {{table}} (id integer PRIMARY KEY);",
		"0002_note.sql":   "ALTER TABLE {{table}} ADD COLUMN note text;",
		"0003_index.sql":  "CREATE INDEX {{note_idx}} ON {{table}} (note);\nSELECT 1/0;",
	}
	stores := []Tables{thingsTables{schema: schema}}
	err := migrate(ctx, pool, thingsFS(t, files), stores)
	require.ErrorContains(t, err, `pgstore: migrate things "`+schema+`"."things": migration 3 (0003_index.sql): `)
	require.ErrorContains(t, err, "division by zero")
	require.Equal(t, []int{1, 2}, thingsVersions(t, pool, schema))
	var note, index bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM information_schema.columns WHERE table_schema = $1
		AND table_name = 'things' AND column_name = 'note'), to_regclass('things_note_idx') IS NOT NULL`, schema).Scan(&note, &index))
	require.True(t, note, "migration 2 committed")
	require.False(t, index, "migration 3 rolled back whole")

	files["0003_index.sql"] = "CREATE INDEX {{note_idx}} ON {{table}} (note);"
	files["0004_row.sql"] = "INSERT INTO {{table}} (id, note) VALUES (1, 'four');"
	require.NoError(t, migrate(ctx, pool, thingsFS(t, files), stores))
	require.Equal(t, []int{1, 2, 3, 4}, thingsVersions(t, pool, schema))
	require.NoError(t, migrate(ctx, pool, thingsFS(t, files), stores))
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM things`).Scan(&rows))
	require.Equal(t, 1, rows, "migration 4 ran once")

	// A code base that knows fewer migrations refuses.
	delete(files, "0004_row.sql")
	err = migrate(ctx, pool, thingsFS(t, files), stores)
	require.ErrorIs(t, err, ErrNewerDatabase)
	require.ErrorContains(t, err, "records version 4, this pgstore knows versions up to 3")

	// A version table with a hole is refused, not patched over.
	_, err = pool.Exec(ctx, `DELETE FROM pgstore_migrations WHERE store = 'things' AND version = 2`)
	require.NoError(t, err)
	files["0004_row.sql"] = "INSERT INTO {{table}} (id, note) VALUES (1, 'four');"
	require.ErrorContains(t, migrate(ctx, pool, thingsFS(t, files), stores), "records 3 migrations up to version 4: a version is missing")
}

func TestMigrationFilesMisnumbered(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"a gap":                   {"0001_a.sql": "SELECT 1;", "0003_c.sql": "SELECT 1;"},
		"not from 1":              {"0002_b.sql": "SELECT 1;"},
		"an unknown placeholder":  {"0001_a.sql": "SELECT * FROM {{tabel}};"},
		"an unclosed placeholder": {"0001_a.sql": "SELECT * FROM {{table;"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := thingsTables{}.migrationTables()
			require.NoError(t, err)
			_, _, err = s.migrations(thingsFS(t, files))
			require.ErrorContains(t, err, "pgstore: migrate things")
		})
	}
}

// TestEveryMigrationRenders: each store's migrations are numbered from 1 without a gap, and every
// placeholder of every file has a value; and no file lies where no store looks.
func TestEveryMigrationRenders(t *testing.T) {
	stores := []Tables{&IdempotencyStoreOptions{}, &EventLogOptions{MaxStreamEvents: 1}, &EndpointStoreOptions{},
		&CursorStoreOptions{}, &PinStoreOptions{}, &CredentialStoreOptions{}, &RequestLogStoreOptions{}, &PortalStoreOptions{}}
	used := map[string]bool{"migrations/versions.sql": true}
	for _, st := range stores {
		s, err := st.migrationTables()
		require.NoError(t, err)
		steps, extras, err := s.migrations(migrationFiles)
		require.NoError(t, err)
		require.NotEmpty(t, steps, s.store)
		require.Len(t, extras, len(s.extras))
		for _, m := range steps {
			used["migrations/"+s.store+"/"+m.name] = true
			require.NotContains(t, m.sql, "{{")
		}
		for _, name := range s.extras {
			used["migrations/"+s.store+"/"+name] = true
		}
	}
	require.NoError(t, fs.WalkDir(migrationFiles, "migrations", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			require.True(t, used[path], "%s is not a migration of any store", path)
		}
		return err
	}))
}

func TestRenderSQL(t *testing.T) {
	names := map[string]string{"t": `"a$pgstore$b"`}
	got, err := renderSQL("DO {{do}} BEGIN PERFORM 1 FROM {{t}}; END {{do}};", names)
	require.NoError(t, err)
	require.Equal(t, `DO $pgstore1$ BEGIN PERFORM 1 FROM "a$pgstore$b"; END $pgstore1$;`, got, "a tag that no name holds")
	got, err = renderSQL("SELECT {{t}}", map[string]string{"t": "{{do}}"})
	require.NoError(t, err)
	require.Equal(t, "SELECT {{do}}", got, "values are not templates")
	_, err = renderSQL("SELECT {{nope}}", names)
	require.ErrorContains(t, err, "no value for {{nope}}")
	var w strings.Builder
	_, _, err = writeSQL(&w, "-- why {{nope}}\nSELECT 1\n  -- more\nFROM {{t}} -- kept\n", "", names, true)
	require.NoError(t, err)
	require.Equal(t, "SELECT 1\nFROM \"a$pgstore$b\" -- kept\n", w.String(), "comment lines left out, placeholders in them too")
	file := "-- about\n\n-- name: one\n-- why\nSELECT 1\n\n-- name: two\nSELECT 2\n-- name: one_more\nSELECT 3\n"
	for name, want := range map[string]string{"one": "-- why\nSELECT 1", "two": "SELECT 2", "one_more": "SELECT 3"} {
		got, ok := namedSQL(file, name)
		require.True(t, ok, name)
		require.Equal(t, want, got, name)
	}
	_, ok := namedSQL(file, "on")
	require.False(t, ok)
	require.Equal(t, `a\nb\rc`, sqlComment("a\nb\rc"))
	require.False(t, strings.Contains(quoteLiteral("it's"), "it's"))
}
