package pgstore

import (
	"context"
	"io/fs"
	"path"
	"strconv"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// SetSequenceHook makes fn run inside each of l's Sequence transactions, after the numbering
// statement and before the commit, with the runs it numbered: a test stalls a sequencer there, kills
// its connection, or fails it. It is set before l is used.
func SetSequenceHook(l *EventLog, fn func(ctx context.Context, tx pgx.Tx, runs []driver.SequencedRun) error) {
	l.beforeCommit = fn
}

// MigrateUpTo is Migrate with only the numbered migrations up to version: the tables as an earlier
// pgstore left them, for tests of what the later migrations do to them.
func MigrateUpTo(ctx context.Context, db DB, version int, stores ...Tables) error {
	fsys := fstest.MapFS{}
	err := fs.WalkDir(migrationFiles, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if name := path.Base(p); isNumbered(name) {
			if v, _ := strconv.Atoi(name[:4]); v > version {
				return nil
			}
		}
		b, err := fs.ReadFile(migrationFiles, p)
		fsys[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		return err
	}
	return migrate(ctx, db, fsys, stores)
}

// MigrationCount is how many numbered migrations store (its directory under migrations/) has.
func MigrationCount(store string) int {
	entries, _ := fs.ReadDir(migrationFiles, path.Join("migrations", store))
	n := 0
	for _, e := range entries {
		if isNumbered(e.Name()) {
			n++
		}
	}
	return n
}

// EventLogStatement returns the SQL of one of l's statements, by its name in sql/eventlog/, and
// LowWater its pending table's low-water mark: tests explain what a statement reads.
func EventLogStatement(l *EventLog, name string) string {
	for _, st := range l.sql.statements(l.cfg.MaxStreamEvents > 0) {
		if st.name == name {
			return *st.dst
		}
	}
	return ""
}

// LowWater is l's low-water mark of the pending table, as Sequence passes it.
func LowWater(l *EventLog) string { return strconv.FormatUint(l.low.get(), 10) }

// SequenceLockClass is the first key of the numbering locks.
const SequenceLockClass = sequenceLockClass

// CacheHooks are a test's view of a store's cache listener: Dial runs before each connection
// attempt (it may change the address, or block), Connected once LISTEN is confirmed and the cache
// serves, Lost when the connection ended and the cache stopped serving, Invalidated after a
// notification was applied. Nil funcs are skipped.
type CacheHooks struct {
	Dial        func(cfg *pgx.ConnConfig)
	Connected   func(pid uint32)
	Lost        func(err error)
	Invalidated func(payload string)
}

func (h CacheHooks) internal() cacheHooks {
	return cacheHooks{dial: h.Dial, connected: h.Connected, lost: h.Lost, invalidated: h.Invalidated}
}

// SetCredentialCacheHooks sets the hooks of s's cache, before Listen runs.
func SetCredentialCacheHooks(s *CredentialStore, h CacheHooks) { s.cache.hooks = h.internal() }

// SetPinCacheHooks sets the hooks of s's cache, before Listen runs.
func SetPinCacheHooks(s *PinStore, h CacheHooks) { s.cache.hooks = h.internal() }

// CredentialCacheLen is how many credentials s's cache holds.
func CredentialCacheLen(s *CredentialStore) int { return s.cache.len() }

// PinCacheLen is how many pins s's cache holds.
func PinCacheLen(s *PinStore) int { return s.cache.len() }

// CredentialChannel is the channel the credentials table of o notifies on.
func CredentialChannel(o *CredentialStoreOptions) string {
	c := credResolve(o)
	return c.channel()
}
