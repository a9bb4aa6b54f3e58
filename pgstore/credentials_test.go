package pgstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/apikey/credentialtest"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
)

func TestCredentialStoreConformance(t *testing.T) {
	credentialtest.Run(t, func(t *testing.T) apikey.CredentialStore {
		pool, schema := pgtest.Pool(t)
		opts := &pgstore.CredentialStoreOptions{Schema: schema}
		require.NoError(t, pgstore.Migrate(context.Background(), pool, opts))
		return must(pgstore.NewCredentialStore(pool, opts))
	})
}

func TestCredentialMigration(t *testing.T) {
	pool, schema := pgtest.Pool(t)
	ctx := context.Background()
	opts := &pgstore.CredentialStoreOptions{Schema: schema + "_creds", Table: "api_keys"}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+opts.Schema+`" CASCADE`) })

	sql := must(pgstore.MigrationSQL(opts))
	require.Contains(t, sql, `CREATE SCHEMA IF NOT EXISTS "`+opts.Schema+`"`)
	require.Contains(t, sql, `"`+opts.Schema+`"."api_keys"`)
	require.NotContains(t, must(pgstore.MigrationSQL(&pgstore.CredentialStoreOptions{})), "CREATE SCHEMA")
	require.Contains(t, must(pgstore.MigrationSQL(&pgstore.CredentialStoreOptions{})), `"`+pgstore.DefaultCredentialTable+`"`)

	// Replicas starting together: concurrent migrations all succeed, and a rerun is harmless.
	migrateAsReplicas(t, pool, opts)

	s := must(pgstore.NewCredentialStore(pool, opts))
	c := credentialtest.Credential(1, "lic_a", apikey.Sandbox)
	require.NoError(t, s.Put(ctx, c))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM "`+opts.Schema+`"."api_keys"`).Scan(&n))
	require.Equal(t, 1, n)

	// The table's own checks back the store's validation up.
	_, err := pool.Exec(ctx, `INSERT INTO "`+opts.Schema+`"."api_keys" (id, hash, licensee, environment, created_at) VALUES ('key_x', '\x00', 'lic', 'sandbox', now())`)
	require.Error(t, err, "a hash that is not 32 bytes")
	_, err = pool.Exec(ctx, `INSERT INTO "`+opts.Schema+`"."api_keys" (id, hash, licensee, environment, created_at) VALUES ('key_y', decode(repeat('ab', 32), 'hex'), 'lic', 'test', now())`)
	require.Error(t, err, "an unknown environment")
}

// The key itself never reaches the database: only its SHA-256.
func TestCredentialStoreKeepsOnlyHashes(t *testing.T) {
	pool, schema := pgtest.Pool(t)
	ctx := context.Background()
	opts := &pgstore.CredentialStoreOptions{Schema: schema}
	require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	iss := must(apikey.NewIssuer(must(pgstore.NewCredentialStore(pool, opts)), nil))
	c, err := iss.Issue(ctx, apikey.Evaluation{Licensee: "lic_a"})
	require.NoError(t, err)

	var dump string
	require.NoError(t, pool.QueryRow(ctx, `SELECT string_agg(t::text, ' ') FROM "`+schema+`"."sandbox_credentials" t`).Scan(&dump))
	require.Contains(t, dump, c.KeyID)
	require.NotContains(t, dump, c.APIKey)
	require.NotContains(t, dump, strings.TrimPrefix(c.APIKey, "sk_sandbox_"))
	h := apikey.HashKey(c.APIKey)
	require.Contains(t, dump, `\x`+h.String())
}

// The whole path on PostgreSQL: issue, authenticate over HTTP, expire, revoke, end the evaluation.
func TestCredentialStoreWithAuthenticator(t *testing.T) {
	pool, schema := pgtest.Pool(t)
	ctx := context.Background()
	opts := &pgstore.CredentialStoreOptions{Schema: schema}
	require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }

	iss := must(apikey.NewIssuer(must(pgstore.NewCredentialStore(pool, opts)), &apikey.IssuerOptions{Now: clock, SandboxTTL: 24 * time.Hour}))
	h := must(apikey.NewAuthenticator(iss, nil)).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := apikey.FromContext(r.Context())
		_, _ = w.Write([]byte(p.Scope()))
	}))
	get := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
		r.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	sb, err := iss.Issue(ctx, apikey.Evaluation{Licensee: "lic_a"})
	require.NoError(t, err)
	sb2, err := iss.Issue(ctx, apikey.Evaluation{Licensee: "lic_a"})
	require.NoError(t, err)
	live, err := iss.Issue(ctx, apikey.Evaluation{Licensee: "lic_a", Environment: apikey.Live})
	require.NoError(t, err)

	rec := get(sb.APIKey)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "sandbox:lic_a", rec.Body.String())
	require.Equal(t, "live:lic_a", get(live.APIKey).Body.String())

	require.NoError(t, iss.Revoke(ctx, sb.KeyID))
	require.Equal(t, http.StatusUnauthorized, get(sb.APIKey).Code)
	require.Equal(t, http.StatusOK, get(sb2.APIKey).Code)

	advance(24 * time.Hour)
	require.Equal(t, http.StatusUnauthorized, get(sb2.APIKey).Code, "expired")
	require.Equal(t, http.StatusOK, get(live.APIKey).Code, "production keys do not expire by default")

	n, err := iss.EndEvaluation(ctx, "lic_a")
	require.NoError(t, err)
	require.Equal(t, 1, n, "sb2 only: sb was revoked already, live is production")
	require.Equal(t, http.StatusOK, get(live.APIKey).Code)
}

// A failing database is an error, never "unknown key": the Authenticator then answers 503, not 401.
func TestCredentialStoreDatabaseDown(t *testing.T) {
	pool, schema := pgtest.Pool(t)
	ctx := context.Background()
	opts := &pgstore.CredentialStoreOptions{Schema: schema}
	require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	s := must(pgstore.NewCredentialStore(pool, opts))
	iss := must(apikey.NewIssuer(s, nil))
	c, err := iss.Issue(ctx, apikey.Evaluation{Licensee: "lic_a"})
	require.NoError(t, err)

	_, err = pool.Exec(ctx, `DROP TABLE "`+schema+`"."sandbox_credentials"`)
	require.NoError(t, err)
	_, err = s.Get(ctx, apikey.HashKey(c.APIKey))
	require.Error(t, err)
	require.NotErrorIs(t, err, apikey.ErrCredentialNotFound)
	require.Error(t, s.Revoke(ctx, c.KeyID, time.Now()))
	_, err = s.RevokeAll(ctx, "lic_a", apikey.Sandbox, time.Now())
	require.Error(t, err)
	require.Error(t, s.Put(ctx, credentialtest.Credential(9, "lic_a", apikey.Sandbox)))

	r := httptest.NewRequest(http.MethodGet, "/v1/orders", nil)
	r.Header.Set("Authorization", "Bearer "+c.APIKey)
	rec := httptest.NewRecorder()
	must(apikey.NewAuthenticator(iss, nil)).Handler(http.NotFoundHandler()).ServeHTTP(rec, r)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
}

// Inside a caller's transaction, a rolled-back issuance leaves nothing behind.
func TestCredentialStoreInTransaction(t *testing.T) {
	pool, schema := pgtest.Pool(t)
	ctx := context.Background()
	opts := &pgstore.CredentialStoreOptions{Schema: schema}
	require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	c, err := must(apikey.NewIssuer(must(pgstore.NewCredentialStore(tx, opts)), nil)).Issue(ctx, apikey.Evaluation{Licensee: "lic_a"})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	_, err = must(pgstore.NewCredentialStore(pool, opts)).Get(ctx, apikey.HashKey(c.APIKey))
	require.ErrorIs(t, err, apikey.ErrCredentialNotFound)
}

func BenchmarkCredentialStoreGet(b *testing.B) {
	pool, schema := pgtest.Pool(b)
	ctx := context.Background()
	opts := &pgstore.CredentialStoreOptions{Schema: schema}
	require.NoError(b, pgstore.Migrate(ctx, pool, opts))
	s := must(pgstore.NewCredentialStore(pool, opts))
	c := credentialtest.Credential(1, "lic_a", apikey.Sandbox)
	require.NoError(b, s.Put(ctx, c))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get(ctx, c.Hash); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCredentialLastUseNotifiesNoCache: recording a key's last use changes no cached field, so it
// sends no notification (each would drop the key from every replica's cache, once a minute per key,
// and take the commit lock notifications need); a revocation still does. Notifications arrive in
// commit order, so the first one after both writes must be the revoked key's.
func TestCredentialLastUseNotifiesNoCache(t *testing.T) {
	pool, schema := pgtest.Pool(t)
	ctx := context.Background()
	opts := &pgstore.CredentialStoreOptions{Schema: schema}
	require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	s := must(pgstore.NewCredentialStore(pool, opts))
	used, revoked := credentialtest.Credential(1, "lic_a", apikey.Live), credentialtest.Credential(2, "lic_a", apikey.Live)
	require.NoError(t, s.Put(ctx, used))
	require.NoError(t, s.Put(ctx, revoked))

	conn := must(pool.Acquire(ctx))
	defer conn.Release()
	_, err := conn.Exec(ctx, `LISTEN "`+pgstore.CredentialChannel(opts)+`"`)
	require.NoError(t, err)
	require.NoError(t, s.MarkUsed(ctx, map[string]time.Time{used.ID: time.Now()}))
	require.NoError(t, s.Revoke(ctx, revoked.ID, time.Now()))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := conn.Conn().WaitForNotification(wctx)
	require.NoError(t, err)
	require.Equal(t, revoked.Hash.String(), n.Payload, "the first notification is the revocation's, not the last use's")
	got, err := s.Lookup(ctx, used.ID)
	require.NoError(t, err)
	require.False(t, got.LastUsedAt.IsZero(), "the last use was written")
}
