package pgserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/examples/orderserver/server/pgserver"
	"github.com/svcplatform/conventions/examples/orderserver/server/storetest"
	"github.com/svcplatform/conventions/seal"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
)

func newRing(t *testing.T, ids ...uint32) (*seal.Ring, []seal.Key) {
	t.Helper()
	var keys []seal.Key
	for _, id := range ids {
		k, err := seal.GenerateKey(id)
		require.NoError(t, err)
		keys = append(keys, k)
	}
	r, err := seal.NewRing(keys...)
	require.NoError(t, err)
	return r, keys
}

// TestStoreSealed runs the Store conformance suite with webhook secrets sealed.
func TestStoreSealed(t *testing.T) {
	ring, _ := newRing(t, 1)
	storetest.Run(t, func(t *testing.T) server.Store {
		pool, _ := testenv.PostgresPool(t)
		require.NoError(t, pgserver.Migrate(context.Background(), pool))
		s, err := pgserver.NewStore(pool, ring)
		require.NoError(t, err)
		return s
	}, &storetest.Options{Transactional: true})
}

// TestSealedEndpointSecrets: with the ring of SVC_SEAL_KEYS, SELECT * of the server's endpoint table
// shows no signing secret; an endpoint registered before the ring was set is sealed by Reseal; after
// a rotation Reseal moves every secret to the new key, and the old key can go.
func TestSealedEndpointSecrets(t *testing.T) {
	ctx := context.Background()
	pool, _ := testenv.PostgresPool(t)
	require.NoError(t, pgserver.Migrate(ctx, pool))
	dump := func() string {
		rows, err := pool.Query(ctx, `SELECT t::text FROM webhook_endpoints AS t`)
		require.NoError(t, err)
		all, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return strings.Join(all, "\n")
	}
	secrets := map[string]string{}
	register := func(s *pgserver.Store, id string) {
		secrets[id] = webhook.NewSecret()
		require.NoError(t, s.CreateEndpoint(ctx, producer.Endpoint{ID: id, URL: "https://a.example/hook", Owner: "sandbox:lic_1",
			Secrets: []string{secrets[id]}, APIVersion: "v1"}, 16))
	}
	readAll := func(s *pgserver.Store) {
		t.Helper()
		for id, sec := range secrets {
			ep, err := s.Lookup(ctx, id)
			require.NoError(t, err, id)
			require.Equal(t, []string{sec}, ep.Secrets)
		}
	}

	plain, err := pgserver.NewStore(pool, nil)
	require.NoError(t, err)
	register(plain, "we_before")
	require.Contains(t, dump(), "whsec_", "without a ring the secret is stored as issued")

	ringA, keysA := newRing(t, 1)
	a, err := pgserver.NewStore(pool, ringA)
	require.NoError(t, err)
	n, err := a.Reseal(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	register(a, "we_after")
	readAll(a)
	require.NotContains(t, dump(), "whsec_")

	_, keysB := newRing(t, 2)
	rotated, err := seal.NewRing(keysB[0], keysA[0])
	require.NoError(t, err)
	ba, err := pgserver.NewStore(pool, rotated)
	require.NoError(t, err)
	readAll(ba)
	n, err = ba.Reseal(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	onlyB, err := seal.NewRing(keysB[0])
	require.NoError(t, err)
	b, err := pgserver.NewStore(pool, onlyB)
	require.NoError(t, err)
	readAll(b)
	require.NotContains(t, dump(), "whsec_")
	for _, sec := range secrets {
		require.NotContains(t, dump(), strings.TrimPrefix(sec, "whsec_"))
	}
}
