package pgstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svcplatform/conventions/apikey"
)

// DefaultCredentialTable is the table a CredentialStore uses when CredentialStoreOptions.Table is empty.
const DefaultCredentialTable = "sandbox_credentials"

// CredentialStoreOptions configures a CredentialStore and its migration. A nil *CredentialStoreOptions and the
// zero value mean the defaults.
type CredentialStoreOptions struct {
	// Schema holds the table. Default "": the table name is unqualified and resolves through the
	// connection's search_path.
	Schema string
	// Table is the table's name. Default DefaultCredentialTable.
	Table string
	// CacheSize, when positive, puts a cache of at most this many credentials in front of Get, so
	// that authenticating a request does not read the table each time; the least recently used
	// credential leaves to make room. It needs the store's DB to be a *pgxpool.Pool, and it serves
	// only while Listen runs: a change committed anywhere — Put, Revoke, RevokeAll, or an UPDATE
	// or DELETE typed by hand, which the table's trigger reports — reaches every replica's cache
	// within one second, usually within milliseconds. Unknown keys are never cached: made-up keys
	// cannot fill it. Default 0: no cache; every Get reads the table. Negative is an error.
	CacheSize int
}

// credConfig is CredentialStoreOptions with the defaults applied and the names quoted.
type credConfig struct {
	CredentialStoreOptions
	qualified string
}

func credResolve(opts *CredentialStoreOptions) credConfig {
	var o credConfig
	if opts != nil {
		o.CredentialStoreOptions = *opts
	}
	if o.Table == "" {
		o.Table = DefaultCredentialTable
	}
	o.qualified = qualify(o.Schema, o.Table)
	return o
}

// channel is the channel the credentials table's trigger notifies on.
func (o *credConfig) channel() string { return cacheChannel("credentials", o.Schema, o.Table) }

// CredentialStore is an apikey.CredentialStore on PostgreSQL, one row per API key in the table that
// Migrate creates. Each method is one statement. Times are timestamptz, which keeps
// microseconds: pass times at that precision if they must compare equal after a round trip.
//
// With CredentialStoreOptions.CacheSize, Get answers from memory what it read before, for as long
// as Listen proves every second that no change was missed (see Listen). Revoke and RevokeAll also
// drop what they changed from the store's own cache at once. Expiry and revocation instants travel
// with the cached credential, and apikey's Issuer compares them with its clock at every request, so
// a key that expires, or whose scheduled revocation arrives, is refused without any notification.
//
// A CredentialStore is safe for concurrent use when its DB is (a pool is; a pgx.Conn or pgx.Tx is
// not). It never closes the DB. Its zero value is not usable: its methods return an error that wraps
// ErrNotBuilt. Call NewCredentialStore.
type CredentialStore struct {
	db                                                    DB
	put, get, revoke, revokeAll, lookup, list, roll, used string
	cache                                                 *cache[apikey.KeyHash, apikey.Credential] // nil without CacheSize
	pool                                                  *pgxpool.Pool                             // the cache listens like it
}

var _ apikey.CredentialStore = (*CredentialStore)(nil)

// NewCredentialStore returns a store on db with opts (nil means the defaults). Run Migrate with the
// same opts (or MigrationSQL's SQL) first. With a CacheSize, db must be a *pgxpool.Pool, and Listen
// must run for the cache to serve.
func NewCredentialStore(db DB, opts *CredentialStoreOptions) (*CredentialStore, error) {
	if db == nil {
		return nil, errNoDB("NewCredentialStore")
	}
	o := credResolve(opts)
	var (
		c    *cache[apikey.KeyHash, apikey.Credential]
		pool *pgxpool.Pool
	)
	switch {
	case o.CacheSize < 0:
		return nil, fmt.Errorf("pgstore: NewCredentialStore: negative CredentialStoreOptions.CacheSize %d", o.CacheSize)
	case o.CacheSize > 0:
		var err error
		if pool, err = cachePool(db, "NewCredentialStore", "CredentialStoreOptions.CacheSize"); err != nil {
			return nil, err
		}
		c = newCache[apikey.KeyHash, apikey.Credential](o.CacheSize, o.channel(), parseKeyHash)
	}
	t := o.qualified
	const cols = `id, hash, licensee, environment, created_at, expires_at, revoked_at, permissions, last_used_at`
	return &CredentialStore{
		db: db, cache: c, pool: pool,
		put: `INSERT INTO ` + t + ` (id, hash, licensee, environment, created_at, expires_at, permissions)
VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		get:    `SELECT ` + cols + ` FROM ` + t + ` WHERE hash = $1`,
		lookup: `SELECT ` + cols + ` FROM ` + t + ` WHERE id = $1`,
		list: `SELECT ` + cols + ` FROM ` + t + `
WHERE licensee = $1 AND environment = $2 AND (expires_at IS NULL OR expires_at > $3) AND (revoked_at IS NULL OR revoked_at > $3)
ORDER BY created_at, id`,
		// One statement: the old key's end and the new key both happen, or (a duplicate, an unknown old
		// key, one that has ended or is already set to end) neither does. The new key is inserted only
		// when the old one was updated; of two concurrent rolls, the second re-reads the row the first
		// updated, finds it set to end, and inserts nothing.
		roll: `WITH old AS (
    UPDATE ` + t + ` SET revoked_at = $8
    WHERE id = $9 AND (expires_at IS NULL OR expires_at > $5) AND revoked_at IS NULL
    RETURNING id
)
INSERT INTO ` + t + ` (id, hash, licensee, environment, created_at, expires_at, permissions)
SELECT $1, $2, $3, $4, $5, $6, $7 FROM old`,
		// The rows are locked in ID order, so two replicas writing overlapping batches cannot deadlock;
		// GREATEST keeps the later instant.
		used: `UPDATE ` + t + ` AS t SET last_used_at = GREATEST(t.last_used_at, u.at)
FROM (SELECT c.id, b.at FROM ` + t + ` AS c JOIN unnest($1::text[], $2::timestamptz[]) AS b(id, at) ON c.id = b.id
      WHERE c.last_used_at IS NULL OR c.last_used_at < b.at ORDER BY c.id FOR UPDATE OF c) AS u
WHERE t.id = u.id`,
		// LEAST ignores NULL, so an unrevoked key takes $2 and a revoked one keeps the earlier instant.
		revoke: `UPDATE ` + t + ` SET revoked_at = LEAST(revoked_at, $2) WHERE id = $1`,
		revokeAll: `UPDATE ` + t + ` SET revoked_at = $3
WHERE licensee = $1 AND environment = $2 AND (revoked_at IS NULL OR revoked_at > $3)`,
	}, nil
}

// Put implements apikey.CredentialStore.
func (s *CredentialStore) Put(ctx context.Context, c apikey.Credential) error {
	if s == nil || s.db == nil {
		return errZeroCredentialStore
	}
	if err := c.Validate(); err != nil {
		return err
	}
	_, err := s.db.Exec(ctx, s.put, c.ID, c.Hash[:], c.Licensee, string(c.Environment), c.CreatedAt, credNullTime(c.ExpiresAt),
		c.Permissions)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation: the ID or the hash
			return fmt.Errorf("%w: %s", apikey.ErrDuplicateCredential, c.ID)
		}
		return fmt.Errorf("pgstore: put credential %s: %w", c.ID, err)
	}
	return nil
}

// Lookup implements apikey.CredentialStore. It always reads the table.
func (s *CredentialStore) Lookup(ctx context.Context, id string) (apikey.Credential, error) {
	if s == nil || s.db == nil {
		return apikey.Credential{}, errZeroCredentialStore
	}
	c, err := scanCredential(s.db.QueryRow(ctx, s.lookup, id))
	if err != nil {
		return apikey.Credential{}, credErr(err, "look up credential")
	}
	return c, nil
}

// List implements apikey.CredentialStore.
func (s *CredentialStore) List(ctx context.Context, licensee string, env apikey.Environment, at time.Time) ([]apikey.Credential, error) {
	if s == nil || s.db == nil {
		return nil, errZeroCredentialStore
	}
	rows, err := s.db.Query(ctx, s.list, licensee, string(env), at)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list credentials: %w", err)
	}
	defer rows.Close()
	var out []apikey.Credential
	for rows.Next() {
		c, err := scanCredential(rows)
		if err != nil {
			return nil, fmt.Errorf("pgstore: list credentials: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list credentials: %w", err)
	}
	return out, nil
}

// Roll implements apikey.CredentialStore in one statement.
func (s *CredentialStore) Roll(ctx context.Context, old string, next apikey.Credential, end time.Time) error {
	if s == nil || s.db == nil {
		return errZeroCredentialStore
	}
	if end.IsZero() {
		return apikey.ErrZeroRevocation
	}
	if err := next.Validate(); err != nil {
		return err
	}
	tag, err := s.db.Exec(ctx, s.roll, next.ID, next.Hash[:], next.Licensee, string(next.Environment), next.CreatedAt,
		credNullTime(next.ExpiresAt), next.Permissions, end, old)
	if s.cache != nil {
		s.cache.dropIf(func(c apikey.Credential) bool { return c.ID == old })
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return fmt.Errorf("%w: %s", apikey.ErrDuplicateCredential, next.ID)
		}
		return fmt.Errorf("pgstore: roll credential %s: %w", old, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	// Nothing happened: tell an unknown key from one that has ended.
	if _, err := s.Lookup(ctx, old); err != nil {
		return fmt.Errorf("pgstore: roll credential %s: %w", old, err)
	}
	return fmt.Errorf("pgstore: roll credential %s: %w", old, apikey.ErrCredentialEnded)
}

// MarkUsed implements apikey.CredentialStore in one statement. It changes no cached credential and
// notifies no cache: LastUsedAt from Get may lag by as long as a credential stays cached.
func (s *CredentialStore) MarkUsed(ctx context.Context, used map[string]time.Time) error {
	if s == nil || s.db == nil {
		return errZeroCredentialStore
	}
	if len(used) == 0 {
		return nil
	}
	ids := make([]string, 0, len(used))
	ats := make([]time.Time, 0, len(used))
	for id, at := range used {
		ids = append(ids, id)
		ats = append(ats, at)
	}
	if _, err := s.db.Exec(ctx, s.used, ids, ats); err != nil {
		return fmt.Errorf("pgstore: mark %d credentials used: %w", len(ids), err)
	}
	return nil
}

// credErr maps no row to ErrCredentialNotFound and wraps anything else.
func credErr(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return apikey.ErrCredentialNotFound
	}
	return fmt.Errorf("pgstore: %s: %w", what, err)
}

// parseKeyHash reads a notification of the credentials table: the key's hash in hex.
func parseKeyHash(payload string) (apikey.KeyHash, bool) {
	var h apikey.KeyHash
	if len(payload) != 2*len(h) {
		return h, false
	}
	_, err := hex.Decode(h[:], []byte(payload))
	return h, err == nil
}

// Get implements apikey.CredentialStore. With a cache, a credential read before comes from memory
// (see CredentialStoreOptions.CacheSize); an unknown hash always reads the table.
func (s *CredentialStore) Get(ctx context.Context, h apikey.KeyHash) (apikey.Credential, error) {
	if s == nil || s.db == nil {
		return apikey.Credential{}, errZeroCredentialStore
	}
	if s.cache == nil {
		return s.read(ctx, h)
	}
	c, ok, ticket := s.cache.get(h)
	if ok {
		// A cancelled request fails as it would at the table.
		if err := ctx.Err(); err != nil {
			return apikey.Credential{}, fmt.Errorf("pgstore: get credential: %w", err)
		}
		// The cached slice is shared: the caller gets its own (nil, for a full key, allocates nothing).
		c.Permissions = slices.Clone(c.Permissions)
		return c, nil
	}
	c, err := s.read(ctx, h)
	if err == nil {
		s.cache.fill(h, c, ticket)
	}
	return c, err
}

// Listen keeps the cache (CredentialStoreOptions.CacheSize) true to the table until ctx ends, and
// then returns nil; run it once per store, next to it, and stop it by cancelling ctx:
//
//	go creds.Listen(ctx, logger)
//
// It holds one connection of its own, made like the pool's (outside the pool's MaxConns and its
// tracer), which LISTENs on the table's channel: each change the trigger reports drops that
// credential, on every replica, as soon as the changing transaction commits. The cache serves only
// while that connection has proved, within the last second, that it missed nothing (a ping every
// 250 ms): while it is down, reconnecting or stalled, Get reads the table, and on every new
// connection the cache starts empty. So a change committed at T is served by no replica from T + 1 s
// on. Failures are retried for as long as ctx lasts, at once and then with a backoff up to 5 s,
// each logged at Warn on logger (nil: nothing is logged).
//
// Listen needs the table's migration 2 (Migrate creates the trigger), a connection to the
// primary (a standby delivers no notifications), and that nobody disables the trigger (it is enabled
// ALWAYS, so logical replication and session_replication_role = replica fire it too). It is an error
// on a store without a cache, or when Listen already runs on the store.
func (s *CredentialStore) Listen(ctx context.Context, logger *slog.Logger) error {
	if s == nil || s.db == nil {
		return errZeroCredentialStore
	}
	if s.cache == nil {
		return errNoCache("CredentialStore", "CredentialStoreOptions.CacheSize")
	}
	return s.cache.listen(ctx, s.pool, logger, "CredentialStore")
}

// read reads the credential of h from the table.
func (s *CredentialStore) read(ctx context.Context, h apikey.KeyHash) (apikey.Credential, error) {
	c, err := scanCredential(s.db.QueryRow(ctx, s.get, h[:]))
	if err != nil {
		return apikey.Credential{}, credErr(err, "get credential")
	}
	return c, nil
}

// scanCredential reads one row of the store's columns.
func scanCredential(row pgx.Row) (apikey.Credential, error) {
	var (
		c                      apikey.Credential
		hash                   []byte
		env                    string
		expires, revoked, used *time.Time
		createdAt              time.Time
	)
	if err := row.Scan(&c.ID, &hash, &c.Licensee, &env, &createdAt, &expires, &revoked, &c.Permissions, &used); err != nil {
		return apikey.Credential{}, err
	}
	if len(hash) != len(c.Hash) {
		return apikey.Credential{}, fmt.Errorf("pgstore: credential %s has a %d-byte hash", c.ID, len(hash))
	}
	copy(c.Hash[:], hash)
	c.Environment = apikey.Environment(env)
	c.CreatedAt = createdAt.UTC()
	if expires != nil {
		c.ExpiresAt = expires.UTC()
	}
	if revoked != nil {
		c.RevokedAt = revoked.UTC()
	}
	if used != nil {
		c.LastUsedAt = used.UTC()
	}
	return c, nil
}

// Revoke implements apikey.CredentialStore.
func (s *CredentialStore) Revoke(ctx context.Context, id string, at time.Time) error {
	if s == nil || s.db == nil {
		return errZeroCredentialStore
	}
	if at.IsZero() {
		return apikey.ErrZeroRevocation
	}
	tag, err := s.db.Exec(ctx, s.revoke, id, at)
	if s.cache != nil {
		// At once for this replica (the trigger's notification follows), whatever the outcome: a
		// failed statement may still have committed.
		s.cache.dropIf(func(c apikey.Credential) bool { return c.ID == id })
	}
	if err != nil {
		return fmt.Errorf("pgstore: revoke credential %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return apikey.ErrCredentialNotFound
	}
	return nil
}

// RevokeAll implements apikey.CredentialStore.
func (s *CredentialStore) RevokeAll(ctx context.Context, licensee string, env apikey.Environment, at time.Time) (int, error) {
	if s == nil || s.db == nil {
		return 0, errZeroCredentialStore
	}
	if at.IsZero() {
		return 0, apikey.ErrZeroRevocation
	}
	tag, err := s.db.Exec(ctx, s.revokeAll, licensee, string(env), at)
	if s.cache != nil {
		s.cache.dropIf(func(c apikey.Credential) bool { return c.Licensee == licensee && c.Environment == env })
	}
	if err != nil {
		return 0, fmt.Errorf("pgstore: revoke credentials of %s: %w", licensee, err)
	}
	return int(tag.RowsAffected()), nil
}

// credNullTime maps the zero time ("never") to NULL.
func credNullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
