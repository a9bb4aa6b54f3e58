package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/svcplatform/conventions/seal"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
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
	// Sealer, when set, seals every endpoint's signing secrets at rest (AES-256-GCM, bound to the
	// endpoint's ID, owner and URL) in the sealed_secrets column, so that no dump of the table holds a
	// secret, and opens them on every read. It fails closed: a row whose secrets are not sealed, or
	// do not open, is an error, never an endpoint. Rows stored before it was set are sealed by Reseal,
	// which also moves rows onto the ring's newest key after a rotation. Default nil: secrets are
	// stored as given, in the secrets column. See EndpointStore.
	Sealer *seal.Ring
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

// EndpointStore is a webhook endpoint registry on PostgreSQL — a driver.Endpoints,
// driver.EndpointLister and driver.EndpointEditor — in the table Migrate creates, shared by every
// replica. Put is one upsert, Lookup one read by primary key, ListEndpoints one read of the index of
// an owner's live endpoints, so Publisher.PublishToOwner lists a licensee's endpoints without an owner
// index of the team's own. CreateEndpoint counts the owner's live endpoints and inserts under a
// transaction-scoped advisory lock on the owner, and UpdateEndpoint reads the row FOR UPDATE and
// writes it back in one transaction, so that replicas registering or changing endpoints at once never
// pass a limit or lose a change. IDs and owners are ordered and compared byte by byte (the "C"
// collation), as memstore.Endpoints does, whatever the database's locale.
//
// Secrets are the HMAC keys that sign deliveries, so the producer needs them back and cannot keep a
// hash. With EndpointStoreOptions.Sealer they are sealed at rest (AES-256-GCM under the key ring of
// package seal, the one that seals idempotency records), bound to the endpoint's ID, owner and URL:
// a dump of the table shows no secret, a sealed value copied to another endpoint does not open, and
// a row that is not sealed or does not open is an error (change endpoints through Put and
// UpdateEndpoint, not SQL: a URL changed by hand leaves secrets that no longer open). After a key
// rotation — the new key first in the ring, the old ones after it — Reseal seals every row again
// under the new key; then the old key can leave the ring. Without a Sealer they are stored as given,
// in plain text: treat the table as a secret store then. No method returns an error that contains a
// secret.
//
// An EndpointStore built on a pgx.Tx (NewEndpointStore(tx, opts) is cheap) reads and writes inside
// that transaction — CreateEndpoint and UpdateEndpoint in a savepoint of it, whose locks last until
// the caller's transaction ends: with Publisher.WithEndpoints and an EventLog on the same transaction,
// the listing of a licensee's endpoints and the append of their events see one snapshot and commit or
// roll back with the business change.
//
// An EndpointStore is safe for concurrent use when its DB is (a pool is; a pgx.Conn or pgx.Tx is not).
// It never closes the DB and never reads the clock. Its zero value is not usable: its methods return
// an error that wraps ErrNotBuilt. Call NewEndpointStore.
type EndpointStore struct {
	db     DB
	sql    endpointSQL
	sealer *seal.Ring
}

var (
	_ driver.Endpoints      = (*EndpointStore)(nil)
	_ driver.EndpointLister = (*EndpointStore)(nil)
	_ driver.EndpointEditor = (*EndpointStore)(nil)
)

type endpointSQL struct {
	put, insert, del, lookup, forUpdate, list string
	lock, count, update                       string
	resealPage, reseal                        string
}

// endpointCols are the columns an endpoint is read from and written to, after id, owner, url and the
// secrets (one column or two, with a Sealer), in the order of endpointRow.
const endpointCols = `api_version, old_secrets_expire, enabled_events, description, metadata, headers, created,
    disabled_reason, disabled_at, deleted_at, rate_limit, failing_since`

// NewEndpointStore returns an EndpointStore on db with the table named by opts (nil means the
// defaults). Run Migrate with the same opts once first. It fails when db is nil or a name is
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
	// Without a Sealer the statements leave sealed_secrets alone, so that a table whose secrets are
	// sealed is refused row by row (see openSecrets) rather than overwritten.
	cols, put := "secrets", "$4"
	if o.Sealer != nil {
		cols, put = "secrets, sealed_secrets", "'{}', $4"
	}
	set := "secrets = EXCLUDED.secrets"
	if o.Sealer != nil {
		set += ", sealed_secrets = EXCLUDED.sealed_secrets"
	}
	values := `($1, $2, $3, ` + put + `, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`
	return &EndpointStore{db: db, sealer: o.Sealer, sql: endpointSQL{
		put: `INSERT INTO ` + t + ` (id, owner, url, ` + cols + `, ` + endpointCols + `) VALUES ` + values + `
ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner, url = EXCLUDED.url, ` + set + `,
    api_version = EXCLUDED.api_version, old_secrets_expire = EXCLUDED.old_secrets_expire,
    enabled_events = EXCLUDED.enabled_events, description = EXCLUDED.description,
    metadata = EXCLUDED.metadata, headers = EXCLUDED.headers, created = EXCLUDED.created,
    disabled_reason = EXCLUDED.disabled_reason, disabled_at = EXCLUDED.disabled_at,
    deleted_at = EXCLUDED.deleted_at, rate_limit = EXCLUDED.rate_limit, failing_since = EXCLUDED.failing_since`,
		insert: `INSERT INTO ` + t + ` (id, owner, url, ` + cols + `, ` + endpointCols + `) VALUES ` + values + `
ON CONFLICT (id) DO NOTHING`,
		// The update keeps id and owner, which UpdateEndpoint checks the change left alone.
		update: `UPDATE ` + t + ` SET url = $3, (` + cols + `) = ROW(` + put + `), (` + endpointCols + `) =
    ($5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
WHERE id = $1 AND owner = $2`,
		del:       `DELETE FROM ` + t + ` WHERE id = $1`,
		lookup:    `SELECT owner, url, ` + cols + `, ` + endpointCols + ` FROM ` + t + ` WHERE id = $1`,
		forUpdate: `SELECT owner, url, ` + cols + `, ` + endpointCols + ` FROM ` + t + ` WHERE id = $1 FOR UPDATE`,
		// COLLATE "C" spelled out: byte order even on a table created with the database's collation
		// (then the owner's few rows are sorted; on the table Migrate creates, the
		// index is read in order).
		list: `SELECT id, owner, url, ` + cols + `, ` + endpointCols + ` FROM ` + t + `
WHERE owner = $1 AND id COLLATE "C" > $2 AND deleted_at IS NULL
ORDER BY id COLLATE "C"
LIMIT $3`,
		// Two statements: the count's snapshot must be taken after the lock is granted.
		lock:  `SELECT pg_advisory_xact_lock($1, hashtext($2))`,
		count: `SELECT count(*) FROM ` + t + ` WHERE owner = $1 AND deleted_at IS NULL`,
		resealPage: `SELECT id, owner, url, secrets, sealed_secrets FROM ` + t + `
WHERE id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`,
		// Only the row as it was read: a Put in between wins, and has sealed under the newest key.
		reseal: `UPDATE ` + t + ` SET secrets = '{}', sealed_secrets = $6
WHERE id = $1 AND owner = $2 AND url = $3 AND secrets = $4 AND sealed_secrets IS NOT DISTINCT FROM $5`,
	}}, nil
}

// endpointLockClass is the first key of the per-owner advisory locks of CreateEndpoint (the second is
// hashtext(owner)). Two-key advisory locks never collide with one-key ones; two owners whose names
// hash alike, or one owner in two endpoint tables, merely wait for each other.
const endpointLockClass = 0x77656e64 // "wend"

// storable reports whether PostgreSQL can store s as text: valid UTF-8 without NUL bytes.
func storable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// check refuses what the registry cannot store: an invalid endpoint (producer.Endpoint.Validate), or
// a field PostgreSQL cannot store as text (invalid UTF-8, a NUL byte) — checked here, not left to the
// server, whose error would quote the offending bytes, which may belong to a secret.
func (s *EndpointStore) check(ep producer.Endpoint) error {
	if err := ep.Validate(); err != nil {
		return err
	}
	ok := storable(ep.ID) && storable(ep.Owner) && storable(ep.URL) && storable(ep.APIVersion)
	for _, sec := range ep.Secrets {
		ok = ok && storable(sec)
	}
	for _, e := range ep.EnabledEvents {
		ok = ok && storable(e)
	}
	if !ok {
		return fmt.Errorf("%w: a field holds invalid UTF-8 or a NUL byte", producer.ErrInvalidEndpoint)
	}
	return nil
}

// args are the statements' arguments for ep: $1 to $16 of put, insert and update.
func (s *EndpointStore) args(ep producer.Endpoint) []any {
	var secrets any = ep.Secrets
	if s.sealer != nil {
		secrets = s.sealSecrets(ep.ID, ep.Owner, ep.URL, ep.Secrets)
	}
	orEmpty := func(m map[string]string) map[string]string {
		if m == nil {
			return map[string]string{}
		}
		return m
	}
	events := ep.EnabledEvents
	if events == nil {
		events = []string{}
	}
	return []any{ep.ID, ep.Owner, ep.URL, secrets, ep.APIVersion, nullTime(ep.OldSecretsExpire), events, ep.Description,
		orEmpty(ep.Metadata), orEmpty(ep.Headers), nullTime(ep.Created), ep.DisabledReason, nullTime(ep.DisabledAt),
		nullTime(ep.DeletedAt), ep.RateLimit, nullTime(ep.FailingSince)}
}

// nullTime is t for a timestamptz column, NULL for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// endpointRow scans a row of the columns after id (owner, url, the secrets, endpointCols) into an
// endpoint whose ID is set, and opens its secrets.
type endpointRow struct {
	ep                                        producer.Endpoint
	sealed                                    []byte
	oldExpire, created, disabledAt, deletedAt *time.Time
	failingSince                              *time.Time
	rateLimit                                 int32
	// metadata and headers as stored: decoded only when not empty, which most endpoints' are (the
	// Dispatcher reads an endpoint for every delivery).
	metadata, headers []byte
}

func (r *endpointRow) dest(sealer bool) []any {
	ep := &r.ep
	d := []any{&ep.Owner, &ep.URL, &ep.Secrets}
	if sealer {
		d = append(d, &r.sealed)
	}
	return append(d, &ep.APIVersion, &r.oldExpire, &ep.EnabledEvents, &ep.Description, &r.metadata, &r.headers,
		&r.created, &ep.DisabledReason, &r.disabledAt, &r.deletedAt, &r.rateLimit, &r.failingSince)
}

// finish sets the times and opens the secrets.
func (s *EndpointStore) finish(r *endpointRow) (producer.Endpoint, error) {
	for _, t := range []struct {
		dst *time.Time
		src *time.Time
	}{{&r.ep.OldSecretsExpire, r.oldExpire}, {&r.ep.Created, r.created}, {&r.ep.DisabledAt, r.disabledAt}, {&r.ep.DeletedAt, r.deletedAt},
		{&r.ep.FailingSince, r.failingSince}} {
		if t.src != nil {
			*t.dst = t.src.UTC()
		}
	}
	r.ep.RateLimit = int(r.rateLimit)
	if len(r.ep.EnabledEvents) == 0 {
		r.ep.EnabledEvents = nil
	}
	for _, m := range []struct {
		raw []byte
		dst *map[string]string
	}{{r.metadata, &r.ep.Metadata}, {r.headers, &r.ep.Headers}} {
		if len(m.raw) > len("{}") {
			if err := json.Unmarshal(m.raw, m.dst); err != nil {
				return producer.Endpoint{}, fmt.Errorf("pgstore: webhook endpoint %s: %w", r.ep.ID, err)
			}
		}
	}
	if err := s.openSecrets(&r.ep, r.sealed); err != nil {
		return producer.Endpoint{}, err
	}
	return r.ep, nil
}

// Put registers ep, replacing the endpoint with its ID — its owner and its every setting included, so
// an endpoint Put with another owner moves to that owner, and a deleted one Put again lives again. To
// rotate a secret, Put the endpoint with both secrets, and later with the new one only; the
// endpoint lifecycle changes endpoints through UpdateEndpoint instead. An invalid ep
// (producer.Endpoint.Validate), or one with a field PostgreSQL cannot store as text (invalid UTF-8, a
// NUL byte), is an error wrapping producer.ErrInvalidEndpoint and stores nothing.
func (s *EndpointStore) Put(ctx context.Context, ep producer.Endpoint) error {
	if s == nil || s.db == nil {
		return errZeroEndpointStore
	}
	if err := s.check(ep); err != nil {
		return err
	}
	if _, err := s.db.Exec(ctx, s.sql.put, s.args(ep)...); err != nil {
		return fmt.Errorf("pgstore: put webhook endpoint: %w", err)
	}
	return nil
}

// CreateEndpoint implements driver.EndpointEditor. With a limit, the count and the insert run in one
// transaction under a transaction-scoped advisory lock on the owner: a second replica registering for
// the same owner waits until the first one's transaction ends, and then counts its endpoint. (Under
// READ COMMITTED a plain count-then-insert lets two transactions both count 15 and both insert.) On
// an EndpointStore built on the caller's transaction the lock is held until that transaction ends,
// which is when the new row becomes visible to the others: exactly as long as it must be.
func (s *EndpointStore) CreateEndpoint(ctx context.Context, ep producer.Endpoint, limit int) error {
	if s == nil || s.db == nil {
		return errZeroEndpointStore
	}
	if err := s.check(ep); err != nil {
		return err
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: create webhook endpoint: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if limit > 0 {
		if _, err := tx.Exec(ctx, s.sql.lock, int32(endpointLockClass), ep.Owner); err != nil {
			return fmt.Errorf("pgstore: create webhook endpoint: %w", err)
		}
		var n int64
		if err := tx.QueryRow(ctx, s.sql.count, ep.Owner).Scan(&n); err != nil {
			return fmt.Errorf("pgstore: create webhook endpoint: %w", err)
		}
		if n >= int64(limit) {
			return producer.ErrEndpointLimit
		}
	}
	tag, err := tx.Exec(ctx, s.sql.insert, s.args(ep)...)
	if err != nil {
		return fmt.Errorf("pgstore: create webhook endpoint: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s is registered already", producer.ErrInvalidEndpoint, ep.ID)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: create webhook endpoint: %w", err)
	}
	return nil
}

// UpdateEndpoint implements driver.EndpointEditor: in one transaction it reads the row FOR UPDATE —
// a concurrent update of the endpoint, on any replica, waits until this one commits and then reads
// what it wrote — calls change once, and writes the row back, its secrets sealed again (they are
// bound to the URL, which may have changed).
func (s *EndpointStore) UpdateEndpoint(ctx context.Context, id string, change func(*producer.Endpoint) error) (producer.Endpoint, error) {
	if s == nil || s.db == nil {
		return producer.Endpoint{}, errZeroEndpointStore
	}
	if err := ctx.Err(); err != nil {
		return producer.Endpoint{}, err
	}
	if id == "" || !storable(id) {
		return producer.Endpoint{}, producer.ErrUnknownEndpoint
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return producer.Endpoint{}, fmt.Errorf("pgstore: update webhook endpoint: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	old, err := s.read(ctx, tx, s.sql.forUpdate, id)
	if err != nil {
		return producer.Endpoint{}, err
	}
	if !old.DeletedAt.IsZero() {
		return producer.Endpoint{}, producer.ErrUnknownEndpoint
	}
	ep := old.Clone()
	if err := change(&ep); err != nil {
		return producer.Endpoint{}, err
	}
	if ep.ID != old.ID || ep.Owner != old.Owner {
		return producer.Endpoint{}, fmt.Errorf("%w: %s: an update may not change the ID or the owner", producer.ErrInvalidEndpoint, id)
	}
	if err := s.check(ep); err != nil {
		return producer.Endpoint{}, err
	}
	if _, err := tx.Exec(ctx, s.sql.update, s.args(ep)...); err != nil {
		return producer.Endpoint{}, fmt.Errorf("pgstore: update webhook endpoint: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return producer.Endpoint{}, fmt.Errorf("pgstore: update webhook endpoint: %w", err)
	}
	return ep.Clone(), nil
}

// read reads one endpoint by ID with query (lookup or forUpdate).
func (s *EndpointStore) read(ctx context.Context, db DB, query, id string) (producer.Endpoint, error) {
	r := endpointRow{ep: producer.Endpoint{ID: id}}
	err := db.QueryRow(ctx, query, id).Scan(r.dest(s.sealer != nil)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return producer.Endpoint{}, producer.ErrUnknownEndpoint
	}
	if err != nil {
		return producer.Endpoint{}, fmt.Errorf("pgstore: look up webhook endpoint: %w", err)
	}
	return s.finish(&r)
}

// Delete removes the endpoint's row, deleted or not: Lookup no longer finds it, the Dispatcher then
// abandons its pending deliveries and range retrieval of its stream answers 404. The endpoint
// lifecycle's delete, which keeps the stream readable, sets DeletedAt through UpdateEndpoint instead;
// Delete removes what is left once the retention has emptied the stream. Deleting an ID that is not
// registered changes nothing and is not an error.
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

// Lookup implements driver.Endpoints.
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
	return s.read(ctx, s.db, s.sql.lookup, id)
}

// ListEndpoints implements driver.EndpointLister: one read of the index of the owner's live
// endpoints, at most q.Limit+1 rows (the one past the page says whether more follow).
func (s *EndpointStore) ListEndpoints(ctx context.Context, q driver.EndpointQuery) ([]producer.Endpoint, bool, error) {
	if s == nil || s.db == nil {
		return nil, false, errZeroEndpointStore
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
		var r endpointRow
		if err := row.Scan(append([]any{&r.ep.ID}, r.dest(s.sealer != nil)...)...); err != nil {
			return producer.Endpoint{}, err
		}
		return s.finish(&r)
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

// endpointSealContext starts the associated data of sealed endpoint secrets: it keeps them apart from
// anything else the same key ring seals (idempotency records, say).
const endpointSealContext = "svc webhook endpoint secrets v1\x00"

// endpointAAD binds sealed secrets to their endpoint: its ID, owner and URL, each NUL-terminated (no
// stored text holds a NUL), so that sealed secrets copied to another endpoint, or left behind when
// a writer of the table points the endpoint elsewhere, do not open.
func endpointAAD(id, owner, url string) []byte {
	b := make([]byte, 0, len(endpointSealContext)+len(id)+len(owner)+len(url)+3)
	b = append(b, endpointSealContext...)
	for _, s := range [...]string{id, owner, url} {
		b = append(append(b, s...), 0)
	}
	return b
}

// sealSecrets seals an endpoint's secrets as one value: joined by NUL, which no stored secret holds.
func (s *EndpointStore) sealSecrets(id, owner, url string, secrets []string) []byte {
	return s.sealer.Seal(nil, []byte(strings.Join(secrets, "\x00")), endpointAAD(id, owner, url))
}

// openSecrets fills ep.Secrets from a row: with a Sealer from sealed, which must be there and open;
// without one from the secrets column, which a sealed row leaves empty. Errors name the endpoint and
// never a secret.
func (s *EndpointStore) openSecrets(ep *producer.Endpoint, sealed []byte) error {
	if s.sealer == nil {
		if len(ep.Secrets) == 0 {
			return fmt.Errorf("pgstore: webhook endpoint %s: its secrets are sealed; set EndpointStoreOptions.Sealer", ep.ID)
		}
		return nil
	}
	// Secrets in clear are newer than any sealed value beside them: only a Put without a Sealer
	// writes them, and it leaves sealed_secrets alone.
	if sealed == nil || len(ep.Secrets) > 0 {
		return fmt.Errorf("pgstore: webhook endpoint %s: its secrets are not sealed; run EndpointStore.Reseal", ep.ID)
	}
	plain, err := s.sealer.Open(nil, sealed, endpointAAD(ep.ID, ep.Owner, ep.URL))
	if err != nil {
		return fmt.Errorf("pgstore: webhook endpoint %s: its secrets do not open: %w", ep.ID, err)
	}
	ep.Secrets = strings.Split(string(plain), "\x00")
	return nil
}

// resealPageSize bounds the rows one step of Reseal reads.
const resealPageSize = 100

// Reseal seals the secrets of every endpoint under the Sealer's newest key (its first): rows stored
// before a Sealer was set, in plain text, and rows sealed under an older key of the ring. Run it
// after a rotation, before the old key leaves the ring; it is idempotent and safe beside live
// traffic (each row is rewritten only if no Put changed it since it was read), and reads the table
// in pages of 100 rows. It returns how many rows it sealed again. A row whose secrets do not open
// (sealed under a key no longer in the ring, or changed by a writer of the table) is left as it is,
// and the returned error names it; the others are still resealed. Without a Sealer it is an error.
func (s *EndpointStore) Reseal(ctx context.Context) (int, error) {
	if s == nil || s.db == nil {
		return 0, errZeroEndpointStore
	}
	if s.sealer == nil {
		return 0, errors.New("pgstore: Reseal: EndpointStoreOptions.Sealer is not set")
	}
	newest := s.sealer.KeyID()
	var (
		n     int
		after string
		bad   []string
	)
	for {
		rows, err := s.db.Query(ctx, s.sql.resealPage, after, resealPageSize)
		if err != nil {
			return n, fmt.Errorf("pgstore: Reseal: %w", err)
		}
		type row struct {
			id, owner, url string
			secrets        []string
			sealed         []byte
		}
		page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var x row
			err := r.Scan(&x.id, &x.owner, &x.url, &x.secrets, &x.sealed)
			return x, err
		})
		if err != nil {
			return n, fmt.Errorf("pgstore: Reseal: %w", err)
		}
		for _, r := range page {
			if len(r.secrets) == 0 && seal.KeyID(r.sealed) == newest {
				continue // sealed under the newest key already (it opens: Lookup checks)
			}
			ep := producer.Endpoint{ID: r.id, Owner: r.owner, URL: r.url, Secrets: r.secrets}
			if len(r.secrets) == 0 { // sealed under an older key: secrets in clear would be newer
				if err := s.openSecrets(&ep, r.sealed); err != nil {
					bad = append(bad, r.id)
					continue
				}
			}
			tag, err := s.db.Exec(ctx, s.sql.reseal, r.id, r.owner, r.url, r.secrets, r.sealed,
				s.sealSecrets(r.id, r.owner, r.url, ep.Secrets))
			if err != nil {
				return n, fmt.Errorf("pgstore: Reseal: webhook endpoint %s: %w", r.id, err)
			}
			n += int(tag.RowsAffected())
		}
		if len(page) < resealPageSize {
			break
		}
		after = page[len(page)-1].id
	}
	if total := len(bad); total > 0 {
		more := ""
		if total > 10 {
			bad, more = bad[:10], ", …"
		}
		return n, fmt.Errorf("pgstore: Reseal: the secrets of %d webhook endpoints do not open and were left as they are: %s%s",
			total, strings.Join(bad, ", "), more)
	}
	return n, nil
}
