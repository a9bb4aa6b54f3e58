package pgserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/seal"
)

// SandboxIdempotencyTable is the table of the sandbox's idempotency records. Production's are in
// pgstore's default table: a sandbox flood (sandbox keys have no rate ceiling) fills a table of its
// own, never production's.
const SandboxIdempotencyTable = "idempotency_keys_sandbox"

// CacheSize is how many credentials, and how many version pins, each replica keeps in memory
// (pgstore.CredentialStoreOptions.CacheSize, PinStoreOptions.CacheSize): every request authenticates
// and is routed by its licensee's pin, and with the caches neither reads the database. Ten thousand
// of each is a few megabytes. A revocation, an expiry change or a re-pin made on any replica, or in
// SQL, reaches every replica within one second (Listen).
const CacheSize = 10_000

// sandboxIdempotency configures the sandbox's idempotency store, transactor and migration.
func sandboxIdempotency() *pgstore.IdempotencyStoreOptions {
	return &pgstore.IdempotencyStoreOptions{Table: SandboxIdempotencyTable}
}

// Migrate creates every table Config's stores use, if they do not exist: the server's own (orders,
// webhook endpoints, with pgstore.EndpointStore's columns), the event log's, the credentials', both
// idempotency tables, the version pins', the request log's and the webhook portal's; a table an
// earlier version made gets the columns it lacks. The server's own migration is idempotent and
// pgstore's are versioned (pgstore.Migrate), both serialised by advisory locks: run Migrate at every
// start of every replica, replicas starting together included. The tables go to the first schema of
// the connection's search_path.
func Migrate(ctx context.Context, db pgstore.DB) error {
	if db == nil {
		return errors.New("pgserver: Migrate: nil DB")
	}
	return errors.Join(
		migrateOrders(ctx, db),
		// After the server's own: the table exists, with pos; this adds sealed_secrets when missing.
		pgstore.Migrate(ctx, db, &pgstore.EndpointStoreOptions{}, &pgstore.CredentialStoreOptions{},
			&pgstore.IdempotencyStoreOptions{}, sandboxIdempotency(), &pgstore.PinStoreOptions{},
			&pgstore.RequestLogStoreOptions{}, &pgstore.PortalStoreOptions{}),
	)
}

// Config returns a server.Config whose every store is on db, which must be migrated (Migrate) and is
// never closed: credentials, orders, webhook endpoints and events (Store), version pins, the request
// log (written in batches, off every request's path, and pruned after 7 days by the server's
// requestlog.Log), the webhook portal's one-time links and sessions (pgstore.PortalStore: a link
// minted on one replica opens on any, once), and the idempotency records of production and of the
// sandbox in tables of their own, in transactional mode (pgstore.Transactor) — a mutating request's
// claim, its writes and its stored response commit in one transaction. On a *pgxpool.Pool the
// credentials and the pins are cached (CacheSize), and the caches serve while Listen runs; on another
// DB every lookup reads the table. ring, when not nil, seals both at rest — the idempotency records
// (Config.Sealer) and the webhook signing secrets (NewStore) — so that one SVC_SEAL_KEYS covers
// them; run Store.Reseal after a rotation. The other fields are zero, for the caller to set. A nil
// db is an error.
//
// To keep idempotency records elsewhere (Redis), replace Idempotency and SandboxIdempotency and set
// both Transactor fields to nil: a store outside the database cannot join its transactions.
func Config(db pgstore.DB, ring *seal.Ring) (server.Config, error) {
	if db == nil {
		return server.Config{}, errors.New("pgserver: Config: nil DB")
	}
	store, err := NewStore(db, ring)
	if err != nil {
		return server.Config{}, err
	}
	sbx := sandboxIdempotency()
	cfg := server.Config{Store: store, Sealer: ring}
	cacheSize := 0
	if _, ok := db.(*pgxpool.Pool); ok {
		cacheSize = CacheSize
	}
	var errs [8]error
	cfg.Credentials, errs[0] = pgstore.NewCredentialStore(db, &pgstore.CredentialStoreOptions{CacheSize: cacheSize})
	cfg.Pins, errs[1] = pgstore.NewPinStore(db, &pgstore.PinStoreOptions{CacheSize: cacheSize})
	cfg.RequestLog, errs[6] = pgstore.NewRequestLogStore(db, nil)
	cfg.Portal, errs[7] = pgstore.NewPortalStore(db, nil)
	live, errLive := pgstore.NewIdempotencyStore(db, nil)
	sandbox, errSandbox := pgstore.NewIdempotencyStore(db, sbx)
	cfg.Idempotency, cfg.SandboxIdempotency, errs[2], errs[3] = live, sandbox, errLive, errSandbox
	cfg.Transactor, errs[4] = pgstore.NewTransactor(db, nil)
	cfg.SandboxTransactor, errs[5] = pgstore.NewTransactor(db, sbx)
	if err := errors.Join(errs[:]...); err != nil {
		return server.Config{}, fmt.Errorf("pgserver: Config: %w", err)
	}
	return cfg, nil
}

// RunCleanup removes expired idempotency records from both of Config's idempotency tables, in short
// bounded batches (pgstore.IdempotencyStore.RunCleanup, every minute), until ctx ends; it then
// returns nil. Run it once per process (every replica may: the batches skip each other's rows).
// Without it, expired records are never served but stay on disk. logger may be nil.
func RunCleanup(ctx context.Context, db pgstore.DB, logger *slog.Logger) error {
	if db == nil {
		return errors.New("pgserver: RunCleanup: nil DB")
	}
	var stores []*pgstore.IdempotencyStore
	for _, opts := range []*pgstore.IdempotencyStoreOptions{nil, sandboxIdempotency()} {
		st, err := pgstore.NewIdempotencyStore(db, opts)
		if err != nil {
			return fmt.Errorf("pgserver: RunCleanup: %w", err)
		}
		stores = append(stores, st)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, st := range stores {
		wg.Go(func() { errs[i] = st.RunCleanup(ctx, &pgstore.CleanupOptions{Logger: logger}) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Listen keeps the caches of cfg's credentials and version pins true until ctx ends, and then
// returns nil: pgstore's CredentialStore.Listen and PinStore.Listen, each on a connection of its own
// (outside the pool), which drop what another replica, or SQL typed by hand, changed, as soon as
// the change commits. Run it once per process, next to RunCleanup; without it the caches serve
// nothing and every request reads both tables. While a listening connection is down its cache reads
// the table, so a revocation or a re-pin never takes more than a second to reach this replica.
// Failures are retried until ctx ends, and logged at Warn on logger (nil: nothing is logged). cfg
// must be Config's, on a *pgxpool.Pool: other stores have no cache, and Listen is an error.
func Listen(ctx context.Context, cfg server.Config, logger *slog.Logger) error {
	creds, okCreds := cfg.Credentials.(*pgstore.CredentialStore)
	pins, okPins := cfg.Pins.(*pgstore.PinStore)
	if !okCreds || !okPins {
		return fmt.Errorf("pgserver: Listen: cfg's Credentials (%T) and Pins (%T) are not Config's", cfg.Credentials, cfg.Pins)
	}
	// One failing at once (no cache) stops the other: Listen returns with its error.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		errs [2]error
	)
	for i, listen := range []func(context.Context, *slog.Logger) error{creds.Listen, pins.Listen} {
		wg.Go(func() {
			if errs[i] = listen(ctx, logger); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return fmt.Errorf("pgserver: Listen: %w", err)
	}
	return nil
}
