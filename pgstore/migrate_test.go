package pgstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/versioning"
)

// Migrate creates every store's tables; replicas that start together may all run it at once, and
// running it again changes nothing.
func TestMigrateCreatesEveryStore(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = pgstore.Migrate(ctx, pool, schema) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, pgstore.Migrate(ctx, pool, schema))

	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, schema)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"idempotency_keys", "sandbox_credentials", "version_pins", "webhook_cursors", "webhook_endpoints",
		"webhook_events", "webhook_events_attempts", "webhook_events_pending", "webhook_events_streams"}, tables)

	// Each store works on what Migrate made.
	_, err = must(pgstore.NewPinStore(pool, &pgstore.PinStoreOptions{Schema: schema})).Get(ctx, "lic_nobody")
	require.ErrorIs(t, err, versioning.ErrNotPinned, "the table exists: not pinned, not \"no such table\"")
}

func TestMigrateReportsFailure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pool, schema := pgtest.Pool(t)
	require.Error(t, pgstore.Migrate(ctx, pool, schema))
}
