// Package pgserver keeps the reference order server's data in PostgreSQL (pgx v5, through pgstore),
// for a server that runs as several replicas: every replica started on the same database serves
// the same credentials, orders, webhook endpoints, events, version pins, request log, webhook portal
// sessions and idempotency records.
// It lives apart from package server so that a program that runs the server in memory (the demo,
// the tests) neither builds nor links a database driver.
//
// Store is the server.Store on PostgreSQL: an order and its order.created events commit in one
// transaction (the transactional outbox). Config returns a server.Config with every store on the
// database and the idempotency middleware's transactional mode (pgstore.Transactor): a mutating
// request's claim, its writes and its stored response commit together, so a crash can neither lose
// an event nor let a retry create a second order. Credentials and version pins are read from
// bounded caches that Listen keeps true across replicas (a change reaches every replica within one
// second). The request log is pgstore.RequestLogStore, whose retention the server's log applies;
// the portal's links and sessions are pgstore.PortalStore, which prunes itself.
// Migrate creates every table, RunCleanup removes expired idempotency records.
//
//	pool, err := pgxpool.New(ctx, dsn)
//	if err != nil { … }
//	if err := pgserver.Migrate(ctx, pool); err != nil { … } // at every start: idempotent, replica-safe
//	cfg, err := pgserver.Config(pool, ring) // ring: seal.NewRing(keys...), or nil
//	if err != nil { … }
//	if ring != nil {
//		_, err = cfg.Store.(*pgserver.Store).Reseal(ctx) // secrets stored before, or under an older key
//	}
//	if err != nil { … }
//	go pgserver.RunCleanup(ctx, pool, logger) // until ctx ends
//	go pgserver.Listen(ctx, cfg, logger)      // the caches of credentials and pins, until ctx ends
//	srv, err := server.New(cfg)
package pgserver
