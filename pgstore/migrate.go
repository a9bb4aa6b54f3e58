package pgstore

import "context"

// Migrate creates, in schema, the tables of every store in this package with their default names:
// idempotency records, the webhook event log, webhook endpoints, webhook cursors, version pins and
// sandbox credentials.
// An empty schema means the connection's search_path. Each step is idempotent and holds an advisory
// lock, so replicas that start together may all call it. A team that uses only some stores, or other
// table names, calls the Migrate* function of each instead.
func Migrate(ctx context.Context, db DB, schema string) error {
	steps := []func() error{
		func() error { return MigrateIdempotency(ctx, db, &IdempotencyOptions{Schema: schema}) },
		func() error { return MigrateEventLog(ctx, db, &EventLogOptions{Schema: schema}) },
		func() error { return MigrateEndpointStore(ctx, db, &EndpointStoreOptions{Schema: schema}) },
		func() error { return MigrateCursors(ctx, db, &CursorOptions{Schema: schema}) },
		func() error { return MigratePinStore(ctx, db, &PinStoreOptions{Schema: schema}) },
		func() error { return MigrateCredentials(ctx, db, &CredentialOptions{Schema: schema}) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}
