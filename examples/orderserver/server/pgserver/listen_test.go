package pgserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/examples/orderserver/server/pgserver"
	"github.com/svcplatform/conventions/versioning"
)

// runListen runs pgserver.Listen on cfg until the test ends, and requires it to end without error.
func runListen(t *testing.T, cfg server.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pgserver.Listen(ctx, cfg, nil) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// waitFor polls cond every few milliseconds until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("after a minute: %s", what)
		}
	}
}

// TestListen: two replicas, each Config on a pool of its own with its caches listening. A key
// revoked on one is refused by the other, and a pin changed in SQL by hand is followed — within the
// second pgstore guarantees (its tests hold it to that; here the wiring is what is checked).
// Listen on a Config whose stores cannot cache is an error.
func TestListen(t *testing.T) {
	ctx := context.Background()
	poolA, dsn := testenv.PostgresPool(t)
	require.NoError(t, pgserver.Migrate(ctx, poolA))
	poolB, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(poolB.Close)
	a := must(pgserver.Config(poolA, nil))
	b := must(pgserver.Config(poolB, nil))
	runListen(t, a)
	runListen(t, b)

	issA := must(apikey.NewIssuer(a.Credentials, nil))
	issB := must(apikey.NewIssuer(b.Credentials, nil))
	creds, err := issA.Issue(ctx, apikey.Evaluation{Licensee: "lic_listen"})
	require.NoError(t, err)
	key, err := apikey.Parse(creds.APIKey)
	require.NoError(t, err)
	for range 3 {
		_, err = issB.Resolve(ctx, key)
		require.NoError(t, err)
	}
	require.NoError(t, issA.Revoke(ctx, creds.KeyID))
	revoked := time.Now()
	waitFor(t, "the other replica still accepts a revoked key", func() bool {
		_, err := issB.Resolve(ctx, key)
		return errors.Is(err, apikey.ErrRevoked)
	})
	t.Logf("revocation followed after %v", time.Since(revoked))

	_, _, err = a.Pins.SetIfAbsent(ctx, "lic_listen", "v1", time.Now())
	require.NoError(t, err)
	waitFor(t, "the other replica never saw the pin", func() bool {
		p, err := b.Pins.Get(ctx, "lic_listen")
		return err == nil && p.Version == "v1"
	})
	_, err = poolA.Exec(ctx, `UPDATE version_pins SET version = 'v2' WHERE licensee = 'lic_listen'`)
	require.NoError(t, err)
	waitFor(t, "the other replica still routes by the old pin", func() bool {
		p, err := b.Pins.Get(ctx, "lic_listen")
		return err == nil && p.Version == "v2"
	})

	tx, err := poolA.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	onTx := must(pgserver.Config(tx, nil))
	require.ErrorContains(t, pgserver.Listen(ctx, onTx, nil), "no cache")
	require.ErrorContains(t, pgserver.Listen(ctx, server.Config{Pins: versioning.NewMemoryPinStore()}, nil), "not Config's")
}
