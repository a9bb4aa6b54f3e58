package pgserver

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/pgstore"
)

// SandboxIdempotencyTable is the table of the sandbox's idempotency records. Production's are in
// pgstore's default table: a sandbox flood (sandbox keys have no rate ceiling) fills a table of its
// own, never production's.
const SandboxIdempotencyTable = "idempotency_keys_sandbox"

// sandboxIdempotency configures the sandbox's idempotency store, transactor and migration.
func sandboxIdempotency() *pgstore.IdempotencyOptions {
	return &pgstore.IdempotencyOptions{Table: SandboxIdempotencyTable}
}

// Migrate creates every table Config's stores use, if they do not exist: the server's own (orders,
// webhook endpoints), the event log's, the credentials', both idempotency tables and the version
// pins'. The migrations are idempotent and serialised by advisory locks: run Migrate at every start
// of every replica, replicas starting together included. The tables go to the first schema of the
// connection's search_path.
func Migrate(ctx context.Context, db pgstore.DB) error {
	if db == nil {
		return errors.New("pgserver: Migrate: nil DB")
	}
	return errors.Join(
		migrateOrders(ctx, db),
		pgstore.MigrateCredentials(ctx, db, nil),
		pgstore.MigrateIdempotency(ctx, db, nil),
		pgstore.MigrateIdempotency(ctx, db, sandboxIdempotency()),
		pgstore.MigratePinStore(ctx, db, nil),
	)
}

// Config returns a server.Config whose every store is on db, which must be migrated (Migrate) and is
// never closed: credentials, orders, webhook endpoints and events (Store), version pins, and the
// idempotency records of production and of the sandbox in tables of their own, in transactional mode
// (pgstore.Transactor) — a mutating request's claim, its writes and its stored response commit in
// one transaction. The other fields are zero, for the caller to set. A nil db is an error.
//
// To keep idempotency records elsewhere (Redis), replace Idempotency and SandboxIdempotency and set
// both Transactor fields to nil: a store outside the database cannot join its transactions.
func Config(db pgstore.DB) (server.Config, error) {
	if db == nil {
		return server.Config{}, errors.New("pgserver: Config: nil DB")
	}
	store, err := NewStore(db)
	if err != nil {
		return server.Config{}, err
	}
	sbx := sandboxIdempotency()
	return server.Config{
		Store:              store,
		Credentials:        pgstore.NewCredentialStore(db, nil),
		Pins:               pgstore.NewPinStore(db, nil),
		Idempotency:        pgstore.NewIdempotencyStore(db, nil),
		SandboxIdempotency: pgstore.NewIdempotencyStore(db, sbx),
		Transactor:         pgstore.NewTransactor(db, nil),
		SandboxTransactor:  pgstore.NewTransactor(db, sbx),
	}, nil
}

// RunCleanup removes expired idempotency records from both of Config's idempotency tables, in short
// bounded batches (pgstore.IdempotencyStore.RunCleanup, every minute), until ctx ends; it then
// returns nil. Run it once per process (every replica may: the batches skip each other's rows).
// Without it, expired records are never served but stay on disk. logger may be nil.
func RunCleanup(ctx context.Context, db pgstore.DB, logger *slog.Logger) error {
	if db == nil {
		return errors.New("pgserver: RunCleanup: nil DB")
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, opts := range []*pgstore.IdempotencyOptions{nil, sandboxIdempotency()} {
		st := pgstore.NewIdempotencyStore(db, opts)
		wg.Go(func() { errs[i] = st.RunCleanup(ctx, &pgstore.CleanupOptions{Logger: logger}) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
