package pgstore_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/seal"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/driver/drivertest"
)

func sealKey(t *testing.T, id uint32) seal.Key {
	t.Helper()
	k, err := seal.GenerateKey(id)
	require.NoError(t, err)
	return k
}

func sealedEndpointStore(t *testing.T, pool *pgxpool.Pool, schema string, keys ...seal.Key) *pgstore.EndpointStore {
	t.Helper()
	var ring *seal.Ring
	if len(keys) > 0 {
		ring = must(seal.NewRing(keys...))
	}
	return must(pgstore.NewEndpointStore(pool, &pgstore.EndpointStoreOptions{Schema: schema, Sealer: ring}))
}

// requireDumpHoldsNoSecret reads every row of the endpoint table as an operator's SELECT * (or
// pg_dump) shows it, and checks that no secret is there: not its text, not its random part, not
// its bytes in the hex form bytea columns print.
func requireDumpHoldsNoSecret(t *testing.T, pool *pgxpool.Pool, schema string, secrets ...string) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT t::text FROM `+pgx.Identifier{schema, pgstore.DefaultEndpointTable}.Sanitize()+` AS t`)
	require.NoError(t, err)
	dump, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, dump)
	all := strings.Join(dump, "\n")
	require.NotContains(t, all, "whsec_")
	for _, s := range secrets {
		random := strings.TrimPrefix(s, "whsec_")
		require.NotContains(t, all, random)
		require.NotContains(t, all, hex.EncodeToString([]byte(s)))
		require.NotContains(t, all, hex.EncodeToString([]byte(random)))
	}
}

func TestSealedEndpointStoreConformance(t *testing.T) {
	k := sealKey(t, 1)
	drivertest.RunEndpoints(t, func(t *testing.T) drivertest.Registry {
		pool, schema := pgtest.Pool(t)
		require.NoError(t, pgstore.Migrate(context.Background(), pool, &pgstore.EndpointStoreOptions{Schema: schema}))
		return sealedEndpointStore(t, pool, schema, k)
	})
}

// TestEndpointSecretsSealedAtRest: with a Sealer, a dump of the table shows no signing secret, and
// the store still returns them; without one (as before), the dump shows them all.
func TestEndpointSecretsSealedAtRest(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	require.NoError(t, pgstore.Migrate(ctx, pool, &pgstore.EndpointStoreOptions{Schema: schema}))
	s := sealedEndpointStore(t, pool, schema, sealKey(t, 1))
	var secrets []string
	for _, id := range []string{"we_a", "we_b"} {
		a, b := webhook.NewSecret(), webhook.NewSecret()
		secrets = append(secrets, a, b)
		require.NoError(t, s.Put(ctx, producer.Endpoint{ID: id, URL: "https://a.example/" + id, Owner: "lic_1", Secrets: []string{a, b}}))
	}
	requireDumpHoldsNoSecret(t, pool, schema, secrets...)
	ep, err := s.Lookup(ctx, "we_b")
	require.NoError(t, err)
	require.Equal(t, secrets[2:], ep.Secrets)
	eps, _, err := s.ListEndpoints(ctx, driver.EndpointQuery{Owner: "lic_1", Limit: 10})
	require.NoError(t, err)
	require.Equal(t, secrets[:2], eps[0].Secrets)
	require.Equal(t, secrets[2:], eps[1].Secrets)
}

// TestSealedEndpointsFailClosed: with a Sealer, a row a writer of the table made or changed is an
// error, never an endpoint whose secrets the producer would sign with — secrets in clear, sealed
// secrets copied from another endpoint, an endpoint pointed at another URL or moved to another owner
// — and no error shows a secret.
func TestSealedEndpointsFailClosed(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	require.NoError(t, pgstore.Migrate(ctx, pool, &pgstore.EndpointStoreOptions{Schema: schema}))
	s := sealedEndpointStore(t, pool, schema, sealKey(t, 1))
	table := pgx.Identifier{schema, pgstore.DefaultEndpointTable}.Sanitize()
	victim, donor := webhook.NewSecret(), webhook.NewSecret()
	for _, tc := range []struct{ name, sql string }{
		{"secrets in clear", `UPDATE ` + table + ` SET secrets = ARRAY['whsec_planted'], sealed_secrets = NULL WHERE id = 'we_v'`},
		{"secrets in clear beside the seal", `UPDATE ` + table + ` SET secrets = ARRAY['whsec_planted'] WHERE id = 'we_v'`},
		{"sealed secrets of another endpoint", `UPDATE ` + table + ` AS t SET sealed_secrets = d.sealed_secrets FROM ` + table + ` AS d
WHERE t.id = 'we_v' AND d.id = 'we_d'`},
		{"pointed at another URL", `UPDATE ` + table + ` SET url = 'https://evil.example/' WHERE id = 'we_v'`},
		{"moved to another owner", `UPDATE ` + table + ` SET owner = 'lic_evil' WHERE id = 'we_v'`},
		{"sealed secrets cut short", `UPDATE ` + table + ` SET sealed_secrets = substring(sealed_secrets from 1 for 40) WHERE id = 'we_v'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, s.Put(ctx, producer.Endpoint{ID: "we_v", URL: "https://v.example/", Owner: "lic_1", Secrets: []string{victim}}))
			require.NoError(t, s.Put(ctx, producer.Endpoint{ID: "we_d", URL: "https://v.example/", Owner: "lic_1", Secrets: []string{donor}}))
			_, err := pool.Exec(ctx, tc.sql)
			require.NoError(t, err)
			_, err = s.Lookup(ctx, "we_v")
			require.Error(t, err)
			require.NotErrorIs(t, err, producer.ErrUnknownEndpoint)
			require.ErrorContains(t, err, "we_v")
			for _, owner := range []string{"lic_1", "lic_evil"} {
				_, _, lerr := s.ListEndpoints(ctx, driver.EndpointQuery{Owner: owner, Limit: 10})
				if owner == "lic_1" && tc.name == "moved to another owner" {
					require.NoError(t, lerr) // we_v is not lic_1's any more
					continue
				}
				if owner == "lic_evil" && tc.name != "moved to another owner" {
					continue
				}
				require.Error(t, lerr)
			}
			for _, e := range []error{err} {
				require.NotContains(t, e.Error(), "whsec_")
			}
		})
	}
}

// TestEndpointSecretRotation, end to end: secrets sealed under key A; the ring rotated to [B, A]
// still reads them; Reseal moves every row to B (and seals rows stored before the Sealer was set);
// with A dropped from the ring, everything reads; a ring without the key a row needs is an error,
// which Reseal reports without touching the row.
func TestEndpointSecretRotation(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	require.NoError(t, pgstore.Migrate(ctx, pool, &pgstore.EndpointStoreOptions{Schema: schema}))
	table := pgx.Identifier{schema, pgstore.DefaultEndpointTable}.Sanitize()
	keyIDs := func() map[string]uint32 {
		rows, err := pool.Query(ctx, `SELECT id, sealed_secrets FROM `+table)
		require.NoError(t, err)
		out := map[string]uint32{}
		for rows.Next() {
			var id string
			var b []byte
			require.NoError(t, rows.Scan(&id, &b))
			out[id] = seal.KeyID(b)
		}
		require.NoError(t, rows.Err())
		return out
	}
	a, b := sealKey(t, 1), sealKey(t, 2)
	want := map[string][]string{}
	put := func(s *pgstore.EndpointStore, id string) {
		sec := []string{webhook.NewSecret()}
		want[id] = sec
		require.NoError(t, s.Put(ctx, producer.Endpoint{ID: id, URL: "https://a.example/", Owner: "lic_1", Secrets: sec}))
	}
	readAll := func(s *pgstore.EndpointStore) {
		t.Helper()
		for id, sec := range want {
			ep, err := s.Lookup(ctx, id)
			require.NoError(t, err, id)
			require.Equal(t, sec, ep.Secrets, id)
		}
	}

	plain := sealedEndpointStore(t, pool, schema) // before sealing was turned on
	put(plain, "we_plain")
	underA := sealedEndpointStore(t, pool, schema, a)
	_, err := underA.Lookup(ctx, "we_plain")
	require.ErrorContains(t, err, "not sealed; run EndpointStore.Reseal")
	n, err := underA.Reseal(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the row in clear is sealed")
	for i := range 150 { // more than one page of Reseal
		put(underA, "we_"+string(rune('a'+i/26))+string(rune('a'+i%26)))
	}
	readAll(underA)
	for id, kid := range keyIDs() {
		require.Equal(t, a.ID, kid, id)
	}

	rotated := sealedEndpointStore(t, pool, schema, b, a)
	readAll(rotated) // A still opens
	onlyB := sealedEndpointStore(t, pool, schema, b)
	_, err = onlyB.Lookup(ctx, "we_plain")
	require.ErrorIs(t, err, seal.ErrUnknownKey, "dropping A before resealing loses the rows")
	put(rotated, "we_new") // a Put seals under the newest key at once

	n, err = rotated.Reseal(ctx)
	require.NoError(t, err)
	require.Equal(t, 151, n, "every row sealed under A, and only those")
	for id, kid := range keyIDs() {
		require.Equal(t, b.ID, kid, id)
	}
	n, err = rotated.Reseal(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "idempotent")

	readAll(onlyB) // A dropped: everything still reads
	requireDumpHoldsNoSecret(t, pool, schema, want["we_plain"]...)

	// A row the ring cannot open is reported by Reseal and left alone.
	c := sealKey(t, 3)
	underC := sealedEndpointStore(t, pool, schema, c)
	put(underC, "we_c")
	n, err = onlyB.Reseal(ctx)
	require.ErrorContains(t, err, "the secrets of 1 webhook endpoints do not open and were left as they are: we_c")
	require.Zero(t, n)
	require.Equal(t, c.ID, keyIDs()["we_c"])

	// Without a Sealer, a sealed row is an error rather than an endpoint without secrets.
	_, err = plain.Lookup(ctx, "we_new")
	require.ErrorContains(t, err, "its secrets are sealed; set EndpointStoreOptions.Sealer")
	_, err = plain.Reseal(ctx)
	require.ErrorContains(t, err, "Sealer is not set")
}

// TestEndpointMigrationAddsSealedColumn: a table an earlier version made, and wrote to, gets
// sealed_secrets (and the lifecycle's columns) from the migration, and its secrets are sealed by Reseal.
func TestEndpointMigrationAddsSealedColumn(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	table := pgx.Identifier{schema, pgstore.DefaultEndpointTable}.Sanitize()
	_, err := pool.Exec(ctx, `CREATE TABLE `+table+` (id text COLLATE "C" PRIMARY KEY, owner text COLLATE "C" NOT NULL,
    url text NOT NULL, secrets text[] NOT NULL, api_version text NOT NULL DEFAULT '')`)
	require.NoError(t, err)
	sec := webhook.NewSecret()
	_, err = pool.Exec(ctx, `INSERT INTO `+table+` (id, owner, url, secrets) VALUES ('we_a', 'lic_1', 'https://a.example/', $1)`, []string{sec})
	require.NoError(t, err)

	for range 2 {
		require.NoError(t, pgstore.Migrate(ctx, pool, &pgstore.EndpointStoreOptions{Schema: schema}))
	}
	s := sealedEndpointStore(t, pool, schema, sealKey(t, 1))
	n, err := s.Reseal(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	ep, err := s.Lookup(ctx, "we_a")
	require.NoError(t, err)
	require.Equal(t, []string{sec}, ep.Secrets)
	requireDumpHoldsNoSecret(t, pool, schema, sec)
}
