package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/svcplatform/conventions/webhook/producer"
)

// DefaultEndpointTable is the table an EndpointStore uses when EndpointStoreOptions.Table is empty.
const DefaultEndpointTable = "webhook_endpoints"

// EndpointStoreOptions configures an EndpointStore and its migration. A nil *EndpointStoreOptions and
// the zero value mean the defaults.
type EndpointStoreOptions struct {
	// Schema holds the table. Default "": the name is unqualified and resolves through the
	// connection's search_path.
	Schema string
	// Table is the table's name; its index is named Table+"_owner_idx". Default
	// DefaultEndpointTable.
	Table string
}

// pgMaxIdent is the longest identifier PostgreSQL keeps (NAMEDATALEN - 1 bytes). It cuts longer ones
// without an error, so a long table name and its index's name could become one name, and the index
// would then silently not be created.
const pgMaxIdent = 63

// endpointConfig is EndpointStoreOptions with the defaults applied and the names quoted.
type endpointConfig struct {
	EndpointStoreOptions
	table string // qualified, quoted
}

func endpointResolve(opts *EndpointStoreOptions) (endpointConfig, error) {
	var o endpointConfig
	if opts != nil {
		o.EndpointStoreOptions = *opts
	}
	if o.Table == "" {
		o.Table = DefaultEndpointTable
	}
	for _, n := range []struct{ what, name string }{{"schema", o.Schema}, {"table", o.Table + "_owner_idx"}} {
		if len(n.name) > pgMaxIdent || strings.ContainsRune(n.name, 0) || !utf8.ValidString(n.name) {
			return endpointConfig{}, fmt.Errorf("pgstore: endpoint store: invalid %s name %q (at most %d bytes with the index suffix, UTF-8, no NUL)",
				n.what, n.name, pgMaxIdent)
		}
	}
	o.table = qualify(o.Schema, o.Table)
	return o, nil
}

// EndpointStoreMigration returns the SQL that creates the endpoint table (and its schema, when one is
// configured) for opts; nil opts mean the defaults. It is idempotent (IF NOT EXISTS throughout), so it
// can run at every start or be copied into a migration tool's files. It fails when a name is one
// PostgreSQL would cut or refuse.
//
// The table, for the defaults:
//
//	CREATE TABLE IF NOT EXISTS "webhook_endpoints" (
//	    id          text COLLATE "C" PRIMARY KEY, -- we_…, the endpoint's event stream
//	    owner       text COLLATE "C" NOT NULL,    -- the licensee
//	    url         text   NOT NULL,
//	    secrets     text[] NOT NULL,              -- signing secrets, as issued (see EndpointStore)
//	    api_version text   NOT NULL DEFAULT ''
//	);
//	CREATE INDEX IF NOT EXISTS "webhook_endpoints_owner_idx" ON "webhook_endpoints" (owner, id);
//
// The index serves ListEndpoints: an owner's endpoints in byte order of ID, read from the index alone
// and only the owner's.
func EndpointStoreMigration(opts *EndpointStoreOptions) (string, error) {
	o, err := endpointResolve(opts)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if o.Schema != "" {
		fmt.Fprintf(&b, "CREATE SCHEMA IF NOT EXISTS %s;\n", quoteIdent(o.Schema))
	}
	fmt.Fprintf(&b, `CREATE TABLE IF NOT EXISTS %s (
    id          text COLLATE "C" PRIMARY KEY,
    owner       text COLLATE "C" NOT NULL,
    url         text   NOT NULL,
    secrets     text[] NOT NULL,
    api_version text   NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS %s ON %s (owner, id);
`, o.table, quoteIdent(o.Table+"_owner_idx"), o.table)
	return b.String(), nil
}

// MigrateEndpointStore creates the endpoint table for opts if it does not exist (see
// EndpointStoreMigration). It runs in one transaction under an advisory lock, so replicas that start
// together do not race each other's CREATE statements.
func MigrateEndpointStore(ctx context.Context, db DB, opts *EndpointStoreOptions) error {
	sql, err := EndpointStoreMigration(opts)
	if err != nil {
		return err
	}
	o, _ := endpointResolve(opts)
	return migrate(ctx, db, "endpoint store", "pgstore.endpoints.migrate\x00"+o.table, sql)
}

// EndpointStore is a webhook endpoint registry on PostgreSQL — a producer.Endpoints and
// producer.EndpointLister — in the table EndpointStoreMigration creates, shared by every replica. Put
// is one upsert, Lookup one read by primary key, ListEndpoints one read of the (owner, id) index, so
// Publisher.PublishToOwner lists a licensee's endpoints without an owner index of the team's own.
// IDs and owners are ordered and compared byte by byte (the "C" collation), as MemoryEndpoints does,
// whatever the database's locale.
//
// Secrets are stored as given, in plain text: they are the HMAC keys that sign deliveries, so the
// producer needs them back and cannot keep a hash. Treat the table as a secret store: encrypt the
// database (or the column) at rest, keep it out of replicas and dumps that are less protected,
// and grant it only to the roles that publish and deliver. No method returns an error that contains a
// secret.
//
// An EndpointStore built on a pgx.Tx (NewEndpointStore(tx, opts) is cheap) reads and writes inside
// that transaction: with Publisher.WithEndpoints and an EventLog on the same transaction, the listing
// of a licensee's endpoints and the append of their events see one snapshot and commit or roll back
// with the business change. It does not bound how many endpoints an owner registers; do that at
// registration, where the licensee can be told (PublishToOwner refuses an owner with more than its
// MaxFanOut).
//
// An EndpointStore is safe for concurrent use when its DB is (a pool is; a pgx.Conn or pgx.Tx is not).
// It never closes the DB and never reads the clock. Its zero value is not usable: its methods return
// an error that wraps ErrNotBuilt. Call NewEndpointStore.
type EndpointStore struct {
	db  DB
	sql endpointSQL
}

var (
	_ producer.Endpoints      = (*EndpointStore)(nil)
	_ producer.EndpointLister = (*EndpointStore)(nil)
)

type endpointSQL struct {
	put, del, lookup, list string
}

// NewEndpointStore returns an EndpointStore on db with the table named by opts (nil means the
// defaults). Run MigrateEndpointStore (or Migrate) once first. It fails when db is nil or a name is
// one PostgreSQL would cut or refuse.
func NewEndpointStore(db DB, opts *EndpointStoreOptions) (*EndpointStore, error) {
	if db == nil {
		return nil, errNoDB("NewEndpointStore")
	}
	o, err := endpointResolve(opts)
	if err != nil {
		return nil, err
	}
	t := o.table
	return &EndpointStore{db: db, sql: endpointSQL{
		put: `INSERT INTO ` + t + ` (id, owner, url, secrets, api_version) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner, url = EXCLUDED.url, secrets = EXCLUDED.secrets,
    api_version = EXCLUDED.api_version`,
		del:    `DELETE FROM ` + t + ` WHERE id = $1`,
		lookup: `SELECT owner, url, secrets, api_version FROM ` + t + ` WHERE id = $1`,
		// COLLATE "C" spelled out: byte order even on a table created with the database's collation
		// (then the owner's few rows are sorted; on the table EndpointStoreMigration creates, the
		// index is read in order).
		list: `SELECT id, owner, url, secrets, api_version FROM ` + t + `
WHERE owner = $1 AND id COLLATE "C" > $2
ORDER BY id COLLATE "C"
LIMIT $3`,
	}}, nil
}

// storable reports whether PostgreSQL can store s as text: valid UTF-8 without NUL bytes.
func storable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// Put registers ep, replacing the endpoint with its ID — its owner included, so an endpoint Put with
// another owner moves to that owner. To rotate a secret, Put the endpoint with both secrets, and later
// with the new one only. An invalid ep (producer.Endpoint.Validate), or one with a field PostgreSQL
// cannot store as text (invalid UTF-8, a NUL byte), is an error wrapping producer.ErrInvalidEndpoint
// and stores nothing.
func (s *EndpointStore) Put(ctx context.Context, ep producer.Endpoint) error {
	if s == nil || s.db == nil {
		return errZeroEndpointStore
	}
	if err := ep.Validate(); err != nil {
		return err
	}
	ok := storable(ep.ID) && storable(ep.Owner) && storable(ep.URL) && storable(ep.APIVersion)
	for _, sec := range ep.Secrets {
		ok = ok && storable(sec)
	}
	if !ok {
		// Checked here, not left to the server: its error would quote the offending bytes, which may
		// belong to a secret.
		return fmt.Errorf("%w: a field holds invalid UTF-8 or a NUL byte", producer.ErrInvalidEndpoint)
	}
	if _, err := s.db.Exec(ctx, s.sql.put, ep.ID, ep.Owner, ep.URL, ep.Secrets, ep.APIVersion); err != nil {
		return fmt.Errorf("pgstore: put webhook endpoint: %w", err)
	}
	return nil
}

// Delete removes the endpoint; the Dispatcher then abandons its pending deliveries. Deleting an ID
// that is not registered changes nothing and is not an error.
func (s *EndpointStore) Delete(ctx context.Context, id string) error {
	if s == nil || s.db == nil {
		return errZeroEndpointStore
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !storable(id) {
		return nil // no such endpoint can exist
	}
	if _, err := s.db.Exec(ctx, s.sql.del, id); err != nil {
		return fmt.Errorf("pgstore: delete webhook endpoint: %w", err)
	}
	return nil
}

// Lookup implements producer.Endpoints.
func (s *EndpointStore) Lookup(ctx context.Context, id string) (producer.Endpoint, error) {
	if s == nil || s.db == nil {
		return producer.Endpoint{}, errZeroEndpointStore
	}
	if err := ctx.Err(); err != nil {
		return producer.Endpoint{}, err
	}
	if id == "" || !storable(id) {
		return producer.Endpoint{}, producer.ErrUnknownEndpoint
	}
	ep := producer.Endpoint{ID: id}
	err := s.db.QueryRow(ctx, s.sql.lookup, id).Scan(&ep.Owner, &ep.URL, &ep.Secrets, &ep.APIVersion)
	if errors.Is(err, pgx.ErrNoRows) {
		return producer.Endpoint{}, producer.ErrUnknownEndpoint
	}
	if err != nil {
		return producer.Endpoint{}, fmt.Errorf("pgstore: look up webhook endpoint: %w", err)
	}
	return ep, nil
}

// ListEndpoints implements producer.EndpointLister: one read of the (owner, id) index, at most
// q.Limit+1 rows (the one past the page says whether more follow).
func (s *EndpointStore) ListEndpoints(ctx context.Context, q producer.EndpointQuery) ([]producer.Endpoint, bool, error) {
	if s == nil || s.db == nil {
		return nil, false, errZeroEndpointStore
	}
	if err := producer.CheckEndpointQuery(q); err != nil {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if !storable(q.After) {
		return nil, false, fmt.Errorf("%w: the cursor is not an endpoint ID", producer.ErrInvalidRange)
	}
	if !storable(q.Owner) {
		return []producer.Endpoint{}, false, nil // no such owner can exist
	}
	rows, err := s.db.Query(ctx, s.sql.list, q.Owner, q.After, int64(q.Limit)+1)
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: list webhook endpoints: %w", err)
	}
	eps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (producer.Endpoint, error) {
		var ep producer.Endpoint
		err := row.Scan(&ep.ID, &ep.Owner, &ep.URL, &ep.Secrets, &ep.APIVersion)
		return ep, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: list webhook endpoints: %w", err)
	}
	more := len(eps) > q.Limit
	if more {
		eps = eps[:q.Limit]
	}
	return eps, more, nil
}
