package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/portal"
)

// DefaultPortalTable is the table a PortalStore uses when PortalStoreOptions.Table is empty.
const DefaultPortalTable = "portal_sessions"

// PortalStoreOptions configures a PortalStore and its migration. A nil *PortalStoreOptions and the
// zero value mean the defaults.
type PortalStoreOptions struct {
	// Schema holds the table. Default "": the table name is unqualified and resolves through the
	// connection's search_path.
	Schema string
	// Table is the table's name. Default DefaultPortalTable.
	Table string
}

func portalResolve(opts *PortalStoreOptions) PortalStoreOptions {
	var o PortalStoreOptions
	if opts != nil {
		o = *opts
	}
	if o.Table == "" {
		o.Table = DefaultPortalTable
	}
	return o
}

// portalPruneBatch is the most expired rows one Put removes. Every Put adds at most one row, so a
// few would keep up; more drain a backlog (a table adopted full, a burst of sessions that all ended)
// within a few Puts, and each is one index-ordered delete of short rows.
const portalPruneBatch = 100

// portalColumns are a session's columns as Get and Take read them.
const portalColumns = "licensee, environment, key_id, permissions, version, expires_at"

// PortalStore is a portal.Store on PostgreSQL: one row per one-time link and per browser session
// in the table Migrate creates (pass it &PortalStoreOptions{}: the portal's table is migrated only
// when named), under the key the Portal derives (a hash: the table holds nothing that opens the
// portal). Replicas that share the database share the portal: a link minted on one opens on any.
//
// Each method is one statement. Take is a DELETE … RETURNING, so of any number of Takes of one
// link, on any replica, exactly one gets its session. Get and Take compare the expiry with the now
// they are given, in the statement, at the microsecond precision PostgreSQL keeps times at: both are
// cut to it alike, so an entry is never served at or after its ExpiresAt (it may stop up to a
// microsecond early). Permissions are a text[] column, NULL for the full key's and an empty array for
// none, which the Portal must tell apart.
//
// Expired rows are pruned without a loop to run: after each Put, a second statement deletes at most
// 100 rows that expired by the Put's now, skipping rows another replica is deleting; it never waits
// for a lock, and its failure fails no Put (the next Put prunes them). Every Put adds at most one
// row, so the table holds little more than the links and sessions still alive.
//
// A PortalStore is safe for concurrent use when its DB is (a pool is; a pgx.Conn or pgx.Tx is not).
// It never closes the DB. Its zero value is not usable: its methods return an error that wraps
// ErrNotBuilt. Call NewPortalStore.
type PortalStore struct {
	db                            DB
	put, prune, get, take, delete string
}

var _ portal.Store = (*PortalStore)(nil)

// NewPortalStore returns a store on db with opts (nil means the defaults). Run Migrate with the same
// opts (or MigrationSQL's SQL) first.
func NewPortalStore(db DB, opts *PortalStoreOptions) (*PortalStore, error) {
	if db == nil {
		return nil, errNoDB("NewPortalStore")
	}
	o := portalResolve(opts)
	t := qualify(o.Schema, o.Table)
	return &PortalStore{
		db: db,
		put: `INSERT INTO ` + t + ` (key, ` + portalColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (key) DO UPDATE SET licensee = EXCLUDED.licensee, environment = EXCLUDED.environment,
    key_id = EXCLUDED.key_id, permissions = EXCLUDED.permissions, version = EXCLUDED.version,
    expires_at = EXCLUDED.expires_at`,
		// Its own statement, not a CTE of the insert: a statement that held the rows it prunes while
		// its insert waited for another's could deadlock with that other's, which prunes in turn.
		// SKIP LOCKED: this one waits for nobody.
		prune: `DELETE FROM ` + t + ` WHERE key IN (
    SELECT key FROM ` + t + ` WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		get: `SELECT ` + portalColumns + ` FROM ` + t + ` WHERE key = $1 AND expires_at > $2`,
		// An expired entry goes too, as garbage, and reads as none: the expiry is checked on the row
		// removed. Concurrent deletes of one row: one removes it, the others then find nothing.
		take:   `DELETE FROM ` + t + ` WHERE key = $1 RETURNING ` + portalColumns + `, expires_at > $2`,
		delete: `DELETE FROM ` + t + ` WHERE key = $1`,
	}, nil
}

// Put implements portal.Store.
func (s *PortalStore) Put(ctx context.Context, key string, sess portal.Session, now time.Time) error {
	if s == nil || s.db == nil {
		return errZeroPortalStore
	}
	// A nil slice is NULL and an empty one '{}': pgx keeps the difference.
	if _, err := s.db.Exec(ctx, s.put, key, sess.Licensee, string(sess.Environment), sess.KeyID, sess.Permissions,
		sess.Version, sess.ExpiresAt); err != nil {
		return fmt.Errorf("pgstore: put portal session: %w", err)
	}
	_, _ = s.db.Exec(ctx, s.prune, now, int64(portalPruneBatch))
	return nil
}

// scanPortal reads one row of portalColumns, followed by the extra destinations.
func scanPortal(row pgx.Row, extra ...any) (portal.Session, error) {
	var (
		sess portal.Session
		env  string
	)
	dest := append([]any{&sess.Licensee, &env, &sess.KeyID, &sess.Permissions, &sess.Version, &sess.ExpiresAt}, extra...)
	if err := row.Scan(dest...); err != nil {
		return portal.Session{}, err
	}
	sess.Environment, sess.ExpiresAt = apikey.Environment(env), sess.ExpiresAt.UTC()
	return sess, nil
}

// Get implements portal.Store.
func (s *PortalStore) Get(ctx context.Context, key string, now time.Time) (portal.Session, error) {
	if s == nil || s.db == nil {
		return portal.Session{}, errZeroPortalStore
	}
	sess, err := scanPortal(s.db.QueryRow(ctx, s.get, key, now))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return portal.Session{}, portal.ErrNotFound
	case err != nil:
		return portal.Session{}, fmt.Errorf("pgstore: get portal session: %w", err)
	}
	return sess, nil
}

// Take implements portal.Store.
func (s *PortalStore) Take(ctx context.Context, key string, now time.Time) (portal.Session, error) {
	if s == nil || s.db == nil {
		return portal.Session{}, errZeroPortalStore
	}
	var live bool
	sess, err := scanPortal(s.db.QueryRow(ctx, s.take, key, now), &live)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return portal.Session{}, portal.ErrNotFound
	case err != nil:
		return portal.Session{}, fmt.Errorf("pgstore: take portal session: %w", err)
	case !live:
		return portal.Session{}, portal.ErrNotFound
	}
	return sess, nil
}

// Delete implements portal.Store.
func (s *PortalStore) Delete(ctx context.Context, key string) error {
	if s == nil || s.db == nil {
		return errZeroPortalStore
	}
	if _, err := s.db.Exec(ctx, s.delete, key); err != nil {
		return fmt.Errorf("pgstore: delete portal session: %w", err)
	}
	return nil
}
