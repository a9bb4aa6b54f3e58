// Package pgstore implements the library's storage interfaces on PostgreSQL with pgx v5, for teams
// that run several replicas: every replica that shares the database shares idempotency records,
// webhook event logs, endpoints and cursors, version pins and credentials.
//
//   - IdempotencyStore (idempotency.Store): claims with INSERT … ON CONFLICT and a lease, an ended
//     lease marked suspected once before it is taken over, completion guarded by a fencing token, and
//     RunCleanup, the retention loop an application starts once per process (go store.RunCleanup(ctx,
//     nil)), which deletes expired records in short, bounded batches. Transactor runs the claim, the
//     handler's own writes (TxFromContext) and the stored response in one transaction, which a
//     client's disconnect does not stop; a duplicate that arrives meanwhile gets 409 for the same
//     payload and 422 for another at once.
//   - EventLog (producer.Log): per-endpoint streams with gap-free sequences, delivery leases shared by
//     every replica's Dispatcher, range reads; Append (and AppendBatch, one statement for many) joins
//     the caller's transaction as an outbox and locks no shared row: events are numbered after they
//     commit, by the Dispatcher's Sequencer, so one busy licensee's orders commit in parallel.
//   - EndpointStore (producer.Endpoints and producer.EndpointLister): webhook endpoints with an
//     (owner, id) index, so Publisher.PublishToOwner lists a licensee's endpoints in one indexed read,
//     in the caller's transaction when built on it. Signing secrets are sealed at rest with a key
//     ring (EndpointStoreOptions.Sealer, package seal) and sealed again under a new key by Reseal;
//     without a ring they are stored as given (they are HMAC keys): protect the table then.
//   - CursorStore (webhook.CursorStore): a consumer's per-stream position; AdvanceTx and ProcessInTx
//     commit the consumer's own effects with the cursor, exactly once.
//   - PinStore (versioning.PinStore) and CredentialStore (apikey.CredentialStore).
//
// Stores take a DB the caller owns — a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx — and never close it.
// Each store's tables live in a configurable schema and table; Migrate creates every store's tables,
// and each MigrateX function (or the SQL of XMigration, for a team's own migration tool) creates one
// store's. No store reads the clock: times are passed in by the packages that call it, so tests control
// time completely.
package pgstore
