package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svcplatform/conventions/versioning"
)

// DefaultPinTable is the table a PinStore uses when PinStoreOptions.Table is empty.
const DefaultPinTable = "version_pins"

// pinMaxInsertAttempts bounds SetIfAbsent's insert-or-read loop; it only repeats when a pin is
// deleted between the two statements, which a second attempt resolves.
const pinMaxInsertAttempts = 4

// PinStoreOptions configures a PinStore and its migration. A nil *PinStoreOptions and the zero value
// mean the defaults.
type PinStoreOptions struct {
	// Schema holds the table. Default "": the name is unqualified and resolves through the
	// connection's search_path.
	Schema string
	// Table is the table's name. Default DefaultPinTable.
	Table string
	// CacheSize, when positive, puts a cache of at most this many pins in front of Get, so that
	// routing a request does not read the table each time; the least recently used pin leaves to
	// make room. It needs the store's DB to be a *pgxpool.Pool, and it serves only while Listen
	// runs: a change committed anywhere — SetIfAbsent, CompareAndSwap, Delete, or SQL typed by hand,
	// which the table's trigger reports — reaches every replica's cache within one second, usually
	// within milliseconds. A licensee without a pin is never cached. Default 0: no cache; every Get
	// reads the table. Negative is an error.
	CacheSize int
}

// pinConfig is PinStoreOptions with the defaults applied and the names quoted.
type pinConfig struct {
	PinStoreOptions
	table string // qualified, quoted
}

func pinResolve(opts *PinStoreOptions) pinConfig {
	var o pinConfig
	if opts != nil {
		o.PinStoreOptions = *opts
	}
	if o.Table == "" {
		o.Table = DefaultPinTable
	}
	o.table = qualify(o.Schema, o.Table)
	return o
}

// channel is the channel the pins table's trigger notifies on.
func (o *pinConfig) channel() string { return cacheChannel("pins", o.Schema, o.Table) }

// parseLicensee reads a notification of the pins table: the licensee, or "" for all of them (a
// TRUNCATE, or a licensee too long for a payload).
func parseLicensee(payload string) (string, bool) { return payload, payload != "" }

// PinStore is a versioning.PinStore on PostgreSQL: each licensee's pinned API version, shared by
// every replica of the service, in the table Migrate creates.
//
// SetIfAbsent is an INSERT … ON CONFLICT DO NOTHING, so racing first requests of one licensee create
// exactly one pin; when the insert finds a pin, a second statement reads it (a new snapshot, which
// sees the row the conflict waited for). CompareAndSwap is one conditional UPDATE, which records the
// version it moves from as the pin's Previous in the same statement; only when it changes nothing
// does a read tell ErrNotPinned from ErrPinConflict. Licensees are stored with the
// "C" collation, so List pages in byte order whatever the database's locale. Like every PinStore it
// takes its arguments as the versioning.Router checked them (see versioning.PinStore) and does not
// check them again: give it to a Router, and ask the Router (Router.Pins, Router.Pin) rather than the
// store.
//
// With PinStoreOptions.CacheSize, Get answers from memory what it read before, for as long as
// Listen proves every second that no change was missed (see CredentialStore.Listen, which works the
// same way). SetIfAbsent, CompareAndSwap and Delete also drop the licensee from the store's own
// cache at once.
//
// A PinStore is safe for concurrent use when its DB is (a pool is; a pgx.Conn or pgx.Tx is not). It
// never closes the DB, and no time it stores comes from its clock (its cache reads the monotonic
// clock to bound staleness, nothing else). Its zero value is not usable: its methods return an
// error that wraps ErrNotBuilt. Call NewPinStore.
type PinStore struct {
	db    DB
	sql   pinSQL
	cache *cache[string, versioning.Pin] // nil without CacheSize
	pool  *pgxpool.Pool                  // the cache listens like it
}

var _ versioning.PinStore = (*PinStore)(nil)

type pinSQL struct {
	get, insert, swap, del, list, listVersion string
}

// NewPinStore returns a PinStore on db with the table named by opts (nil means the defaults). Run
// Migrate with the same opts once first. It is cheap, so one can be built on a caller's transaction
// (without a cache). With a CacheSize, db must be a *pgxpool.Pool, and Listen must run for the cache
// to serve.
func NewPinStore(db DB, opts *PinStoreOptions) (*PinStore, error) {
	if db == nil {
		return nil, errNoDB("NewPinStore")
	}
	o := pinResolve(opts)
	var (
		c    *cache[string, versioning.Pin]
		pool *pgxpool.Pool
	)
	switch {
	case o.CacheSize < 0:
		return nil, fmt.Errorf("pgstore: NewPinStore: negative PinStoreOptions.CacheSize %d", o.CacheSize)
	case o.CacheSize > 0:
		var err error
		if pool, err = cachePool(db, "NewPinStore", "PinStoreOptions.CacheSize"); err != nil {
			return nil, err
		}
		c = newCache[string, versioning.Pin](o.CacheSize, o.channel(), parseLicensee)
	}
	t := o.table
	return &PinStore{db: db, cache: c, pool: pool, sql: pinSQL{
		get: `SELECT version, pinned_at, previous FROM ` + t + ` WHERE licensee = $1`,
		insert: `INSERT INTO ` + t + ` (licensee, version, pinned_at) VALUES ($1, $2, $3)
ON CONFLICT (licensee) DO NOTHING
RETURNING version, pinned_at, previous`,
		// In SET, version is the row's version before the update: from, since the WHERE matched it.
		swap: `UPDATE ` + t + ` SET version = $3, pinned_at = $4,
    previous = CASE WHEN version = $3 THEN previous ELSE version END
WHERE licensee = $1 AND version = $2
RETURNING version, pinned_at, previous`,
		del:         `DELETE FROM ` + t + ` WHERE licensee = $1`,
		list:        `SELECT licensee, version, pinned_at, previous FROM ` + t + ` WHERE licensee > $1 ORDER BY licensee LIMIT $2`,
		listVersion: `SELECT licensee, version, pinned_at, previous FROM ` + t + ` WHERE version = $1 AND licensee > $2 ORDER BY licensee LIMIT $3`,
	}}, nil
}

// Get implements versioning.PinStore.
func (s *PinStore) Get(ctx context.Context, licensee string) (versioning.Pin, error) {
	if s == nil || s.db == nil {
		return versioning.Pin{}, errZeroPinStore
	}
	var ticket uint64
	if s.cache != nil {
		p, ok, t := s.cache.get(licensee)
		if ok {
			// A cancelled request fails as it would at the table.
			if err := ctx.Err(); err != nil {
				return versioning.Pin{}, fmt.Errorf("pgstore: get pin: %w", err)
			}
			return p, nil
		}
		ticket = t
	}
	p, err := s.get(ctx, licensee)
	if err != nil {
		return versioning.Pin{}, fmt.Errorf("pgstore: get pin: %w", err)
	}
	if s.cache != nil {
		s.cache.fill(licensee, p, ticket)
	}
	return p, nil
}

// Listen keeps the cache (PinStoreOptions.CacheSize) true to the table until ctx ends, and then
// returns nil; run it once per store, next to it, and stop it by cancelling ctx:
//
//	go pins.Listen(ctx, logger)
//
// It works as CredentialStore.Listen does, on the pins table's channel: a pin changed anywhere is
// dropped from every replica's cache as soon as the change commits; the cache serves only while its
// connection has proved, within the last second, that it missed nothing, so a change committed at T
// is served by no replica from T + 1 s on; failures are retried until ctx ends, each logged at Warn
// on logger (nil: nothing is logged). It is an error on a store without a cache, or when Listen
// already runs on the store.
func (s *PinStore) Listen(ctx context.Context, logger *slog.Logger) error {
	if s == nil || s.db == nil {
		return errZeroPinStore
	}
	if s.cache == nil {
		return errNoCache("PinStore", "PinStoreOptions.CacheSize")
	}
	return s.cache.listen(ctx, s.pool, logger, "PinStore")
}

// dropCached forgets licensee's pin in this replica's cache, after a change through this store:
// the trigger's notification follows, but this replica need not wait for it. It runs whatever the
// statement's outcome, since a statement that failed may still have committed.
func (s *PinStore) dropCached(licensee string) {
	if s.cache != nil {
		s.cache.drop(licensee)
	}
}

func (s *PinStore) get(ctx context.Context, licensee string) (versioning.Pin, error) {
	p := versioning.Pin{Licensee: licensee}
	err := s.db.QueryRow(ctx, s.sql.get, licensee).Scan(&p.Version, &p.PinnedAt, &p.Previous)
	if errors.Is(err, pgx.ErrNoRows) {
		return versioning.Pin{}, versioning.ErrNotPinned
	}
	if err != nil {
		return versioning.Pin{}, err
	}
	p.PinnedAt = p.PinnedAt.UTC()
	return p, nil
}

// SetIfAbsent implements versioning.PinStore.
func (s *PinStore) SetIfAbsent(ctx context.Context, licensee, version string, at time.Time) (versioning.Pin, bool, error) {
	if s == nil || s.db == nil {
		return versioning.Pin{}, false, errZeroPinStore
	}
	defer s.dropCached(licensee)
	for range pinMaxInsertAttempts {
		p := versioning.Pin{Licensee: licensee}
		err := s.db.QueryRow(ctx, s.sql.insert, licensee, version, at).Scan(&p.Version, &p.PinnedAt, &p.Previous)
		if err == nil {
			p.PinnedAt = p.PinnedAt.UTC()
			return p, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return versioning.Pin{}, false, fmt.Errorf("pgstore: set pin: %w", err)
		}
		// The licensee has a pin: read it in a new statement, whose snapshot sees it.
		p, err = s.get(ctx, licensee)
		if errors.Is(err, versioning.ErrNotPinned) {
			continue // deleted in between: try the insert again
		}
		if err != nil {
			return versioning.Pin{}, false, fmt.Errorf("pgstore: set pin: %w", err)
		}
		return p, false, nil
	}
	return versioning.Pin{}, false, fmt.Errorf("pgstore: set pin: the pin kept changing under %d attempts", pinMaxInsertAttempts)
}

// CompareAndSwap implements versioning.PinStore.
func (s *PinStore) CompareAndSwap(ctx context.Context, licensee, from, to string, at time.Time) (versioning.Pin, error) {
	if s == nil || s.db == nil {
		return versioning.Pin{}, errZeroPinStore
	}
	defer s.dropCached(licensee)
	p := versioning.Pin{Licensee: licensee}
	err := s.db.QueryRow(ctx, s.sql.swap, licensee, from, to, at).Scan(&p.Version, &p.PinnedAt, &p.Previous)
	if err == nil {
		p.PinnedAt = p.PinnedAt.UTC()
		return p, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return versioning.Pin{}, fmt.Errorf("pgstore: swap pin: %w", err)
	}
	cur, err := s.get(ctx, licensee)
	switch {
	case errors.Is(err, versioning.ErrNotPinned):
		return versioning.Pin{}, versioning.ErrNotPinned
	case err != nil:
		return versioning.Pin{}, fmt.Errorf("pgstore: swap pin: %w", err)
	}
	return versioning.Pin{}, fmt.Errorf("%w: pinned to %s, not %s", versioning.ErrPinConflict, cur.Version, from)
}

// Delete implements versioning.PinStore.
func (s *PinStore) Delete(ctx context.Context, licensee string) error {
	if s == nil || s.db == nil {
		return errZeroPinStore
	}
	defer s.dropCached(licensee)
	if _, err := s.db.Exec(ctx, s.sql.del, licensee); err != nil {
		return fmt.Errorf("pgstore: delete pin: %w", err)
	}
	return nil
}

// List implements versioning.PinStore.
func (s *PinStore) List(ctx context.Context, version, after string, limit int) ([]versioning.Pin, error) {
	if s == nil || s.db == nil {
		return nil, errZeroPinStore
	}
	var rows pgx.Rows
	var err error
	if version == "" {
		rows, err = s.db.Query(ctx, s.sql.list, after, limit)
	} else {
		rows, err = s.db.Query(ctx, s.sql.listVersion, version, after, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: list pins: %w", err)
	}
	out := make([]versioning.Pin, 0, min(limit, 64))
	var p versioning.Pin
	_, err = pgx.ForEachRow(rows, []any{&p.Licensee, &p.Version, &p.PinnedAt, &p.Previous}, func() error {
		p.PinnedAt = p.PinnedAt.UTC()
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: list pins: %w", err)
	}
	return out, nil
}
