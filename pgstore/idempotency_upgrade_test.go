package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
)

// idemTableBeforeSuspicion is the table as the unversioned migration made it before the two-step take-over.
const idemTableBeforeSuspicion = `CREATE SEQUENCE idem_token_seq;
CREATE TABLE idem (
    scope       text        NOT NULL,
    key         text        NOT NULL,
    fingerprint bytea       NOT NULL,
    token       bigint      NOT NULL DEFAULT nextval('idem_token_seq'),
    completed   boolean     NOT NULL DEFAULT false,
    lease_until timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    status      integer,
    header      jsonb,
    body        bytea,
    PRIMARY KEY (scope, key)
);
ALTER SEQUENCE idem_token_seq OWNED BY idem.token;
CREATE INDEX idem_expires_at_idx ON idem (expires_at);`

// TestIdempotencyMigrationUpgradesEarlierTable: the migration adds the suspected column to a table an
// earlier version made, keeps its rows, and the store then runs the two-step take-over on a row that
// was in flight before the upgrade.
func TestIdempotencyMigrationUpgradesEarlierTable(t *testing.T) {
	pool, schema := pgtest.Pool(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, idemTableBeforeSuspicion, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	k := driver.Key{Scope: "lic_old", Key: "k"}
	_, err = pool.Exec(ctx, `INSERT INTO idem (scope, key, fingerprint, lease_until, expires_at) VALUES ($1, $2, $3, $4, $5)`,
		k.Scope, k.Key, idemFP1[:], idemT0.Add(idemLease), idemT0.Add(idemRetention))
	require.NoError(t, err)

	opts := &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}
	require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	require.NoError(t, pgstore.Migrate(ctx, pool, opts), "running it again changes nothing")
	var (
		nullable, def string
		marked        bool
	)
	require.NoError(t, pool.QueryRow(ctx, `SELECT is_nullable, column_default FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = 'idem' AND column_name = 'suspected'`, schema).Scan(&nullable, &def))
	require.Equal(t, "NO", nullable)
	require.Equal(t, "false", def)
	require.NoError(t, pool.QueryRow(ctx, `SELECT suspected FROM idem WHERE scope = $1 AND key = $2`, k.Scope, k.Key).Scan(&marked))
	require.False(t, marked, "rows from before the upgrade start unmarked")

	s := must(pgstore.NewIdempotencyStore(pool, opts))
	at := idemT0.Add(idemLease)
	require.Equal(t, driver.InFlight, idemClaim(t, s, k, idemFP1, at).Status, "the first claim after the lease marks")
	c := idemClaim(t, s, k, idemFP1, at.Add(idemLease))
	require.Equal(t, driver.Claimed, c.Status, "the claim after the extra lease takes over")
}

// TestIdempotencyMigrationUpToDateTakesNoLock: migrating a table that is up to date (as every replica
// does at every start) must not wait for transactions that wrote to it, nor make claims queue behind
// it: ALTER TABLE and CREATE INDEX, even with IF NOT EXISTS, would wait for their locks.
func TestIdempotencyMigrationUpToDateTakesNoLock(t *testing.T) {
	s, pool, schema := newIdemStore(t)
	ctx := context.Background()
	opts := &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}
	// A request in transactional mode holds its claim, uncommitted, in an open transaction.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	c, err := must(pgstore.NewIdempotencyStore(tx, opts)).Claim(ctx, driver.Key{Scope: "s", Key: "open"}, idemFP1, idemT0, idemT0.Add(idemLease), idemT0.Add(idemRetention))
	require.NoError(t, err)
	require.Equal(t, driver.Claimed, c.Status)

	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, pgstore.Migrate(mctx, pool, opts), "the migration waited for the open transaction")
	// Claims were not held up either.
	c = idemClaim(t, s, driver.Key{Scope: "s", Key: "other"}, idemFP1, idemT0)
	require.Equal(t, driver.Claimed, c.Status)
}
