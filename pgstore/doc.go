// Package pgstore implements the library's storage interfaces on PostgreSQL with pgx v5, for teams
// that run several replicas: every replica that shares the database shares idempotency records,
// webhook event logs, endpoints and cursors, version pins and credentials, the request log and the
// webhook portal's sessions.
//
//   - IdempotencyStore (idempotency/driver.Store): claims with INSERT … ON CONFLICT and a lease, an
//     ended lease marked suspected once before it is taken over, completion guarded by a fencing token,
//     and RunCleanup, the retention loop an application starts once per process
//     (go store.RunCleanup(ctx, nil)), which deletes expired records in short, bounded batches.
//     Transactor (idempotency/driver.Transactor) runs the claim, the handler's own writes
//     (TxFromContext) and the stored response in one transaction, which a client's disconnect does
//     not stop; a duplicate that arrives meanwhile gets 409 for the same payload and 422 for another
//     at once.
//   - EventLog (driver.Log): per-endpoint streams with gap-free sequences, delivery leases shared by
//     every replica's Dispatcher, range reads; Append (and AppendBatch, one statement for many) joins
//     the caller's transaction as an outbox and locks no shared row: events are numbered after they
//     commit, by the Dispatcher's Sequencer, so one busy licensee's orders commit in parallel.
//   - EndpointStore (driver.Endpoints and driver.EndpointLister): webhook endpoints with an
//     (owner, id) index, so Publisher.PublishToOwner lists a licensee's endpoints in one indexed read,
//     in the caller's transaction when built on it. Signing secrets are sealed at rest with a key
//     ring (EndpointStoreOptions.Sealer, package seal) and sealed again under a new key by Reseal;
//     without a ring they are stored as given (they are HMAC keys): protect the table then.
//   - CursorStore (webhook.CursorStore): a consumer's per-stream position; AdvanceTx and ProcessInTx
//     commit the consumer's own effects with the cursor, exactly once.
//   - PinStore (versioning.PinStore) and CredentialStore (apikey.CredentialStore), each with an
//     optional bounded cache in front of Get (CacheSize), for the lookups every request makes. The
//     transaction that changes a row — through the store, or by hand in SQL — sends a notification
//     from the table's trigger when it commits; each cached store's Listen receives it on a
//     connection of its own and drops the row. A cache serves only while its listener proves every
//     second that it missed nothing, so a revocation or a re-pin reaches every replica within one
//     second, usually within milliseconds, and a listener that is down makes Get read the table.
//   - RequestLogStore (requestlog.Store): the request log, one multi-row insert per batch, read by
//     owner and request ID or by owner, newest first, through its indexes, and pruned by time. Migrate
//     creates its table only when given its options (&RequestLogStoreOptions{}).
//   - PortalStore (portal.Store): the webhook portal's one-time links and browser sessions, under
//     the hashes the Portal derives; Take is one DELETE … RETURNING, so a link opens one session
//     whichever replicas race for it, and each Put prunes a bounded number of expired rows, with no
//     loop to run. Migrate creates its table only when given its options (&PortalStoreOptions{}).
//
// Stores take a DB the caller owns — a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx — and never close it.
// No store reads the clock for a time it stores or compares: times are passed in by the packages
// that call it, so tests control time completely (a cache reads the monotonic clock only to bound
// its own staleness).
//
// # Migrations
//
// Each store's tables live in a configurable schema and table. Migrate creates them and keeps them up
// to date, at every start of every replica:
//
//	err := pgstore.Migrate(ctx, pool) // every store, default names, in the search_path
//	err = pgstore.Migrate(ctx, pool,   // or the stores a service uses, with their options
//		&pgstore.EventLogOptions{Schema: "app", MaxStreamEvents: 10_000},
//		&pgstore.IdempotencyStoreOptions{Schema: "app"})
//
// Each store has numbered migrations (migrations/<store>/NNNN_….sql, embedded in the package), each
// applied in a transaction of its own and recorded in the version table pgstore_migrations, one per
// schema, keyed by the store and its Table: every set of names has a version of its own. The
// transactions hold an advisory lock of the schema, so replicas that start together apply each
// migration once; tables that are up to date are only read, with no lock on them. Tables a newer
// pgstore migrated are refused (ErrNewerDatabase). Migration 1 also adopts the tables that the
// unversioned migrations of earlier versions made, rows and all, without locking a table that lacks
// nothing. A team that runs migrations with its own tool takes MigrationSQL's script, which records
// the same versions.
//
// The event log's statements are .sql files too (sql/eventlog/, one a domain: append, sequence,
// range, claim, settle, status, attempts, cleanup), into which NewEventLog puts the tables' names,
// quoted.
package pgstore
