package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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

// CredentialStore is an apikey.CredentialStore on PostgreSQL, one row per API key in the table that
// Migrate creates. Each method is one statement. Times are timestamptz, which keeps
// microseconds: pass times at that precision if they must compare equal after a round trip.
//
// A CredentialStore is safe for concurrent use when its DB is (a pool is; a pgx.Conn or pgx.Tx is
// not). It never closes the DB. Its zero value is not usable: its methods return an error that wraps
// ErrNotBuilt. Call NewCredentialStore.
type CredentialStore struct {
	db                          DB
	put, get, revoke, revokeAll string
}

var _ apikey.CredentialStore = (*CredentialStore)(nil)

// NewCredentialStore returns a store on db with opts (nil means the defaults). Run Migrate with the
// same opts (or MigrationSQL's SQL) first.
func NewCredentialStore(db DB, opts *CredentialStoreOptions) (*CredentialStore, error) {
	if db == nil {
		return nil, errNoDB("NewCredentialStore")
	}
	o := credResolve(opts)
	t := o.qualified
	return &CredentialStore{
		db: db,
		put: `INSERT INTO ` + t + ` (id, hash, licensee, environment, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6)`,
		get: `SELECT id, hash, licensee, environment, created_at, expires_at, revoked_at FROM ` + t + ` WHERE hash = $1`,
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
	_, err := s.db.Exec(ctx, s.put, c.ID, c.Hash[:], c.Licensee, string(c.Environment), c.CreatedAt, credNullTime(c.ExpiresAt))
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation: the ID or the hash
			return fmt.Errorf("%w: %s", apikey.ErrDuplicateCredential, c.ID)
		}
		return fmt.Errorf("pgstore: put credential %s: %w", c.ID, err)
	}
	return nil
}

// Get implements apikey.CredentialStore.
func (s *CredentialStore) Get(ctx context.Context, h apikey.KeyHash) (apikey.Credential, error) {
	if s == nil || s.db == nil {
		return apikey.Credential{}, errZeroCredentialStore
	}
	var (
		c                apikey.Credential
		hash             []byte
		env              string
		expires, revoked *time.Time
		createdAt        time.Time
	)
	err := s.db.QueryRow(ctx, s.get, h[:]).Scan(&c.ID, &hash, &c.Licensee, &env, &createdAt, &expires, &revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return apikey.Credential{}, apikey.ErrCredentialNotFound
	}
	if err != nil {
		return apikey.Credential{}, fmt.Errorf("pgstore: get credential: %w", err)
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
