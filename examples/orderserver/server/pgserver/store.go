package pgserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/seal"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// ordersMigration creates the server's own tables. The webhook endpoint table is the one
// pgstore.EndpointStore reads and writes (Migrate then adds its sealed_secrets column), with one
// column of the server's own, pos. Webhook secrets are sealed at rest with the key ring of
// SVC_SEAL_KEYS (see NewStore); without one they are stored as issued, since the producer needs them
// to sign (an HMAC key cannot be hashed away), and the table then deserves the protection of any
// other secret store.
//
// An endpoint's pos is its place in the order of registration, which the IDs (random) do not keep.
// A table made before pos existed gets the column once: ALTER TABLE takes the table's strongest lock,
// so it runs only when the column is missing, and a migration at every start locks nothing on a table
// up to date. The endpoints registered before then are numbered in the order the table stores them,
// which is their order of registration unless the table was rewritten since. No index covers it: an
// owner has few endpoints (server.WebhookOptions.MaxEndpoints, 16 by default), found by the owner
// index and sorted in memory.
const ordersMigration = `
CREATE TABLE IF NOT EXISTS orders (
    scope   text   NOT NULL, -- "<environment>:<licensee>": every read filters by it
    id      text   NOT NULL,
    account text   NOT NULL,
    side    text   NOT NULL,
    status  text   NOT NULL,
    created bigint NOT NULL, -- unix seconds, as on the wire
    PRIMARY KEY (scope, id)
);
CREATE TABLE IF NOT EXISTS webhook_endpoints (
    id          text   PRIMARY KEY,
    owner       text   NOT NULL, -- the scope the endpoint belongs to
    url         text   NOT NULL,
    secrets     text[] NOT NULL,
    api_version text   NOT NULL,
    pos         bigint GENERATED ALWAYS AS IDENTITY -- registration order: an owner's endpoints are listed by it
);
DO $orders$ BEGIN -- a table made before pos gets it
    IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'webhook_endpoints'::regclass
        AND attname = 'pos' AND NOT attisdropped) THEN
        ALTER TABLE webhook_endpoints ADD COLUMN IF NOT EXISTS pos bigint GENERATED ALWAYS AS IDENTITY;
    END IF;
END $orders$;
`

// migrateLockKey serialises the migrations of replicas that start together: concurrent CREATE TABLE
// IF NOT EXISTS statements can still collide in the catalog.
const migrateLockKey = 0x6f72646572736572 // "orderser"

// migrateOrders creates the server's own tables (ordersMigration) and the event log's.
func migrateOrders(ctx context.Context, db pgstore.DB) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgserver: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLockKey)); err != nil {
		return fmt.Errorf("pgserver: migrate: %w", err)
	}
	if _, err := tx.Exec(ctx, ordersMigration, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("pgserver: migrate: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgserver: migrate: %w", err)
	}
	return pgstore.Migrate(ctx, db, eventLogOptions)
}

// eventLogOptions are the event log's: the tables' default names, and the reference server's bound
// on the events of one endpoint (its migration creates the index that the bound counts with).
var eventLogOptions = &pgstore.EventLogOptions{MaxStreamEvents: server.DefaultMaxStreamEvents}

// Store is the server.Store on PostgreSQL: every replica started with the same database sees the same
// orders, endpoints and events. An order and its order.created events commit in one transaction (the
// transactional outbox), through a pgstore.EventLog built on that transaction. Inside a request that
// the idempotency middleware runs in transactional mode, every method writes through the request's
// transaction (pgstore.TxFromContext). A Store is safe for concurrent use when its DB is (a pool is).
// Its zero value is not usable: build one with NewStore, after Migrate.
type Store struct {
	db     pgstore.DB
	log    *pgstore.EventLog
	epOpts *pgstore.EndpointStoreOptions
	eps    *pgstore.EndpointStore // on db
}

var _ server.Store = (*Store)(nil)

// NewStore returns a store on db, which it never closes. A nil db is an error. With a ring, webhook
// signing secrets are sealed at rest (pgstore.EndpointStoreOptions.Sealer) under its first key; run
// Reseal after a rotation, and once when a ring is first set, before the endpoints can be read.
func NewStore(db pgstore.DB, ring *seal.Ring) (*Store, error) {
	if db == nil {
		return nil, errors.New("pgserver: NewStore: nil DB")
	}
	log, err := pgstore.NewEventLog(db, eventLogOptions)
	if err != nil {
		return nil, fmt.Errorf("pgserver: NewStore: %w", err)
	}
	epOpts := &pgstore.EndpointStoreOptions{Sealer: ring}
	eps, err := pgstore.NewEndpointStore(db, epOpts)
	if err != nil {
		return nil, fmt.Errorf("pgserver: NewStore: %w", err)
	}
	return &Store{db: db, log: log, epOpts: epOpts, eps: eps}, nil
}

// endpoints returns the endpoint store on the request's transaction (transactional mode) or the
// pool: building one is cheap.
func (s *Store) endpoints(db pgstore.DB) *pgstore.EndpointStore {
	if db == s.db {
		return s.eps
	}
	eps, _ := pgstore.NewEndpointStore(db, s.epOpts) // the options were checked by NewStore
	return eps
}

// Reseal seals every webhook endpoint's secrets under the ring's newest key: those stored in clear
// before a ring was set, and those sealed under an older key (pgstore.EndpointStore.Reseal). It
// returns how many rows changed; without a ring it is an error.
func (s *Store) Reseal(ctx context.Context) (int, error) { return s.eps.Reseal(ctx) }

// Log implements server.Store.
func (s *Store) Log() driver.Log { return s.log }

// RequestLog implements server.Store.
func (s *Store) RequestLog(ctx context.Context) driver.Log {
	if tx, ok := pgstore.TxFromContext(ctx); ok {
		return s.log.WithDB(tx)
	}
	return s.log
}

// dbFor returns the transaction the idempotency middleware's transactional mode opened for this
// request (pgstore.Transactor), or the pool. Writing through that transaction is what makes a
// request's effects and its stored response commit together: a crash before the commit leaves
// neither, so a retry simply runs again, and no retry can ever run twice.
func (s *Store) dbFor(ctx context.Context) pgstore.DB {
	if tx, ok := pgstore.TxFromContext(ctx); ok {
		return tx
	}
	return s.db
}

// CreateOrder implements server.Store: the order row, the read of the scope's endpoints and every event
// append share one transaction. On the pool that is a new transaction; inside the request's own
// (transactional mode) it is a savepoint, so that a failure takes back the order and its events but
// leaves the request's transaction usable for its stored answer — the order is never committed
// without its events.
func (s *Store) CreateOrder(ctx context.Context, scope string, o server.Order, outbox server.OutboxFunc) error {
	tx, err := s.dbFor(ctx).Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgserver: create order: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := s.createOrderTx(ctx, tx, scope, o, outbox); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgserver: create order: %w", err)
	}
	return nil
}

func (s *Store) createOrderTx(ctx context.Context, tx pgx.Tx, scope string, o server.Order, outbox server.OutboxFunc) error {
	// One statement, one round trip: the order's INSERT and the read of the scope's live endpoints
	// with their subscriptions (the outbox publishes to those subscribed only).
	rows, err := tx.Query(ctx, `WITH o AS (INSERT INTO orders (scope, id, account, side, status, created)
VALUES ($1, $2, $3, $4, $5, $6))
SELECT id, enabled_events FROM webhook_endpoints WHERE owner = $1 AND deleted_at IS NULL ORDER BY id`,
		scope, o.ID, o.Account, o.Direction, o.Status, o.Created)
	if err != nil {
		return fmt.Errorf("pgserver: create order: %w", err)
	}
	eps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (producer.Endpoint, error) {
		ep := producer.Endpoint{Owner: scope}
		err := row.Scan(&ep.ID, &ep.EnabledEvents)
		return ep, err
	})
	if err != nil {
		return fmt.Errorf("pgserver: create order: %w", err)
	}
	// An EventLog on the transaction is cheap to build and joins it: the events commit with the order.
	return outbox(ctx, s.log.WithDB(tx), eps)
}

// Order implements server.Store.
func (s *Store) Order(ctx context.Context, scope, id string) (server.Order, error) {
	o := server.Order{Object: "order"}
	err := s.dbFor(ctx).QueryRow(ctx, `SELECT id, account, side, status, created FROM orders WHERE scope = $1 AND id = $2`,
		scope, id).Scan(&o.ID, &o.Account, &o.Direction, &o.Status, &o.Created)
	if errors.Is(err, pgx.ErrNoRows) {
		return server.Order{}, server.ErrNotFound
	}
	if err != nil {
		return server.Order{}, unavailable("read order", err)
	}
	return o, nil
}

// unavailable wraps an error of the orders' tables for the problem writer: a 503 with Retry-After
// when the database could not be reached or the connection broke mid-statement (an outage the
// client retries, as when authentication cannot reach the credentials; with the credential cache
// serving, the order's own statement may be the first to meet it), the opaque 500 otherwise. The
// cause stays in the chain for the logs.
func unavailable(op string, err error) error {
	var ne net.Error
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) {
		return &storeError{op: op, cause: err, problem: apierror.Unavailable(time.Second, "",
			"the service cannot reach its database; retry after the time Retry-After gives")}
	}
	return fmt.Errorf("pgserver: %s: %w", op, err)
}

// storeError is an error of the orders' tables with the problem it is answered with.
type storeError struct {
	op      string
	cause   error
	problem *apierror.Error
}

func (e *storeError) Error() string   { return "pgserver: " + e.op + ": " + e.cause.Error() }
func (e *storeError) Unwrap() []error { return []error{e.cause, e.problem} }

// CreateEndpoint implements driver.EndpointEditor through pgstore's endpoint store on the request's
// transaction (or the pool): the count and the insert run under an advisory lock on the owner, which
// inside the request's transaction is held until that transaction commits, when the new row becomes
// visible to the other replicas. The secrets are sealed when a ring is set.
func (s *Store) CreateEndpoint(ctx context.Context, ep producer.Endpoint, limit int) error {
	return s.endpoints(s.dbFor(ctx)).CreateEndpoint(ctx, ep, limit)
}

// UpdateEndpoint implements driver.EndpointEditor through pgstore's endpoint store: the row is read
// FOR UPDATE and written back in one transaction (a savepoint of the request's), so that replicas
// changing one endpoint at once never lose a change.
func (s *Store) UpdateEndpoint(ctx context.Context, id string, change func(*producer.Endpoint) error) (producer.Endpoint, error) {
	return s.endpoints(s.dbFor(ctx)).UpdateEndpoint(ctx, id, change)
}

// ListEndpoints implements driver.EndpointLister through pgstore's endpoint store.
func (s *Store) ListEndpoints(ctx context.Context, q driver.EndpointQuery) ([]producer.Endpoint, bool, error) {
	return s.endpoints(s.dbFor(ctx)).ListEndpoints(ctx, q)
}

// EndpointIDs implements server.Store: the live endpoints, oldest first, by pos (see ordersMigration).
func (s *Store) EndpointIDs(ctx context.Context, scope string) ([]string, error) {
	return endpointIDs(ctx, s.dbFor(ctx), scope)
}

func endpointIDs(ctx context.Context, db pgstore.DB, scope string) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT id FROM webhook_endpoints WHERE owner = $1 AND deleted_at IS NULL ORDER BY pos`, scope)
	if err != nil {
		return nil, fmt.Errorf("pgserver: list webhook endpoints: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgserver: list webhook endpoints: %w", err)
	}
	return ids, nil
}

// Lookup implements driver.Endpoints, through pgstore's endpoint store: secrets sealed at rest are
// opened, and a row that is not sealed, or does not open, under a ring is an error.
func (s *Store) Lookup(ctx context.Context, id string) (producer.Endpoint, error) {
	return s.endpoints(s.dbFor(ctx)).Lookup(ctx, id)
}

// DeleteOrders implements server.Store.
func (s *Store) DeleteOrders(ctx context.Context, scope string) (int, error) {
	tag, err := s.dbFor(ctx).Exec(ctx, `DELETE FROM orders WHERE scope = $1`, scope)
	if err != nil {
		return 0, fmt.Errorf("pgserver: delete orders: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
