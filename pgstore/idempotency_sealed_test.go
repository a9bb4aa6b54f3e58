package pgstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/seal"
)

// TestSealedRecordsFailClosedOnPostgres: with a Sealer, a writer of the table who replaces a sealed
// record with plain text, swaps its status, injects Location or Set-Cookie beside the seal, replaces
// its body, or copies another key's sealed record over it, gets none of it replayed, and the handler
// does not run again: the client gets the opaque 500 problem and the row stays as it was. In the
// ordinary mode and in the transactional one.
func TestSealedRecordsFailClosedOnPostgres(t *testing.T) {
	pool, schema := pgtest.Pool(t)
	ctx := context.Background()
	opts := &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}
	require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	store := must(pgstore.NewIdempotencyStore(pool, opts))
	tr := must(pgstore.NewTransactor(pool, opts))
	table := pgx.Identifier{schema, "idem"}.Sanitize()
	k, err := seal.GenerateKey(1)
	require.NoError(t, err)
	ring := must(seal.NewRing(k))

	calls := 0
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/orders/ord_1")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ord_1","secret":"whsec_in_the_body"}`))
	})
	post := func(h http.Handler, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(`{"side":"buy"}`))
		r.Header.Set("Authorization", "Bearer sk_sandbox_pg")
		r.Header.Set(idempotency.HeaderKey, key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	type row struct {
		Status int
		Header []byte
		Body   []byte
	}
	read := func(key string) row {
		var r row
		require.NoError(t, pool.QueryRow(ctx, `SELECT status, header::text, body FROM `+table+` WHERE key = $1`, key).
			Scan(&r.Status, &r.Header, &r.Body))
		return r
	}

	for _, mode := range []struct {
		name string
		tx   driver.Transactor
	}{{"ordinary", nil}, {"transactional", tr}} {
		mw := must(idempotency.New(&idempotency.Options{Store: store, Transactor: mode.tx, Sealer: ring})).Handler(handler)
		for i, tc := range []struct {
			name, sql string // $1: the key tampered with; $2: the genuine record's key
		}{
			{"not sealed", `UPDATE ` + table + ` SET header = '{"Content-Type":["application/json"],"Location":["https://evil.example/"],"Set-Cookie":["session=evil"]}', body = '{"id":"ord_evil"}' WHERE key = $1 AND $2 <> ''`},
			{"status swapped", `UPDATE ` + table + ` SET status = 200 WHERE key = $1 AND $2 <> ''`},
			{"Location injected", `UPDATE ` + table + ` SET header = header || '{"Location":["https://evil.example/"]}' WHERE key = $1 AND $2 <> ''`},
			{"Set-Cookie injected", `UPDATE ` + table + ` SET header = header || '{"Set-Cookie":["session=evil"]}' WHERE key = $1 AND $2 <> ''`},
			{"body replaced by plain text", `UPDATE ` + table + ` SET body = '{"id":"ord_evil"}' WHERE key = $1 AND $2 <> ''`},
			{"moved from another key", `UPDATE ` + table + ` AS t SET status = g.status, header = g.header, body = g.body
FROM ` + table + ` AS g WHERE t.key = $1 AND g.key = $2`},
		} {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				victim, donor := mode.name+"-victim-"+string(rune('a'+i)), mode.name+"-donor-"+string(rune('a'+i))
				calls = 0
				for _, key := range []string{victim, donor} {
					require.Equal(t, http.StatusCreated, post(mw, key).Code)
				}
				require.Equal(t, 2, calls)
				genuine := read(victim)
				require.Equal(t, `{"Idempotent-Sealed-Body": ["v2"]}`, string(genuine.Header), "nothing but the mark beside the seal")
				require.False(t, bytes.Contains(genuine.Body, []byte("whsec_")))
				ok := post(mw, victim)
				require.Equal(t, http.StatusCreated, ok.Code, "the genuine record replays")
				require.Equal(t, "/v1/orders/ord_1", ok.Header().Get("Location"))

				tag, err := pool.Exec(ctx, tc.sql, victim, donor)
				require.NoError(t, err)
				require.EqualValues(t, 1, tag.RowsAffected())
				tampered := read(victim)
				require.NotEqual(t, genuine, tampered)

				for range 2 {
					requireRefusedRecord(t, post(mw, victim))
				}
				require.Equal(t, 2, calls, "the handler never runs again")
				require.Equal(t, tampered, read(victim), "the row is left as it is")
			})
		}
	}
}

// requireRefusedRecord checks the answer to a refused record: the opaque 500, nothing of the record.
func requireRefusedRecord(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	require.Equal(t, http.StatusInternalServerError, w.Code, "%s", w.Body)
	require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	require.Empty(t, w.Header().Values("Set-Cookie"))
	require.Empty(t, w.Header().Get("Location"))
	require.Empty(t, w.Header().Get(idempotency.HeaderReplayed))
	var p map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
	require.Equal(t, apierror.CodeInternal, p["code"])
	for _, leak := range []string{"evil", "seal", "whsec_", "ord_"} {
		require.NotContains(t, strings.ToLower(w.Body.String()), leak)
	}
}
