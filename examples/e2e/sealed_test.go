package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/seal"
)

// TestSealedReplicas runs two replicas that share PostgreSQL and a seal key ring (SVC_SEAL_KEYS): an
// issued API key and a webhook secret are in no row in plain text — neither in the idempotency
// tables nor in the webhook endpoint table, whose SELECT * shows no whsec_ — and a retry of the
// issuance on the other replica gets the same key back, Cache-Control: no-store.
func TestSealedReplicas(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	k, err := seal.GenerateKey(7)
	require.NoError(t, err)
	t.Setenv("SVC_SEAL_KEYS", k.Reveal())
	admin := "adm_" + newKey()
	a := startOrderServerEnv(t, "replica-a", []string{loopbackAllow, postgresEnv(dsn), adminTokenEnv(admin)})
	b := startOrderServerEnv(t, "replica-b", []string{loopbackAllow, postgresEnv(dsn), adminTokenEnv(admin)})

	key := newKey()
	first := request{Method: "POST", URL: a.URL + "/v1/sandbox/credentials", Auth: bearer(admin), Key: key}.do(t)
	c := first.expectJSON(t, http.StatusCreated)
	apiKey := c["api_key"].(string)
	again := request{Method: "POST", URL: b.URL + "/v1/sandbox/credentials", Auth: bearer(admin), Key: key}.do(t)
	require.Equal(t, http.StatusCreated, again.Status, "%s", again.Body)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, "no-store", again.Header.Get("Cache-Control"))
	require.Equal(t, apiKey, again.object(t)["api_key"], "the other replica opens the sealed record")

	_, secret := registerEndpoint(t, a.URL, a.SandboxKey, "https://example.com/hook")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, table := range []string{"idempotency_keys", "idempotency_keys_sandbox"} {
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()+
			" WHERE position($1::bytea IN body) > 0 OR position($2::bytea IN body) > 0",
			[]byte(apiKey), []byte(secret)).Scan(&n))
		require.Zero(t, n, "a secret in plain text in %s", table)
	}
	var sealed int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys_sandbox WHERE body IS NOT NULL`).Scan(&sealed))
	require.Positive(t, sealed, "the records are there, sealed")
	var endpoints, leaked int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE strpos(t::text, 'whsec_') > 0 OR strpos(t::text, $1) > 0)
FROM webhook_endpoints AS t`, strings.TrimPrefix(secret, "whsec_")).Scan(&endpoints, &leaked))
	require.Equal(t, 1, endpoints)
	require.Zero(t, leaked, "a webhook signing secret in plain text in webhook_endpoints")
}
