package pgserver_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/examples/orderserver/server/pgserver"
	"github.com/svcplatform/conventions/examples/orderserver/server/storetest"
	idemdriver "github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// TestStore runs the Store conformance suite on PostgreSQL, with the checks only a transaction
// passes: an order whose outbox failed leaves no event and no gap.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) server.Store {
		ctx := context.Background()
		pool, _ := testenv.PostgresPool(t)
		require.NoError(t, pgserver.Migrate(ctx, pool))
		require.NoError(t, pgserver.Migrate(ctx, pool), "migrations must be rerunnable")
		s, err := pgserver.NewStore(pool, nil)
		require.NoError(t, err)
		return s
	}, &storetest.Options{Transactional: true})
}

// TestMigrateOrdersOldEndpoints: a webhook_endpoints table made before endpoints kept their order of
// registration gets the column that keeps it, once; the endpoints it held are listed as stored, and
// those registered afterwards after them.
func TestMigrateOrdersOldEndpoints(t *testing.T) {
	ctx := context.Background()
	pool, _ := testenv.PostgresPool(t)
	_, err := pool.Exec(ctx, `CREATE TABLE webhook_endpoints (
    id          text   PRIMARY KEY,
    owner       text   NOT NULL,
    url         text   NOT NULL,
    secrets     text[] NOT NULL,
    api_version text   NOT NULL
)`)
	require.NoError(t, err)
	const scope = "sandbox:lic_old"
	old := []string{"we_zz", "we_aa"} // not in ID order
	for _, id := range old {
		_, err := pool.Exec(ctx, `INSERT INTO webhook_endpoints (id, owner, url, secrets, api_version)
VALUES ($1, $2, 'http://127.0.0.1:1/hook', '{whsec_x}', 'v1')`, id, scope)
		require.NoError(t, err)
	}
	require.NoError(t, pgserver.Migrate(ctx, pool))
	require.NoError(t, pgserver.Migrate(ctx, pool), "migrations must be rerunnable")
	s, err := pgserver.NewStore(pool, nil)
	require.NoError(t, err)
	ep := producer.Endpoint{ID: "we_mm", URL: "http://127.0.0.1:1/hook", Secrets: []string{"whsec_x"}, Owner: scope, APIVersion: "v1"}
	require.NoError(t, s.CreateEndpoint(ctx, ep, 0))
	ids, err := s.EndpointIDs(ctx, scope)
	require.NoError(t, err)
	require.Equal(t, []string{"we_zz", "we_aa", "we_mm"}, ids)
}

// TestNilDB: every function that needs a database says so instead of failing later.
func TestNilDB(t *testing.T) {
	ctx := context.Background()
	_, err := pgserver.NewStore(nil, nil)
	require.EqualError(t, err, "pgserver: NewStore: nil DB")
	_, err = pgserver.Config(nil, nil)
	require.EqualError(t, err, "pgserver: Config: nil DB")
	require.EqualError(t, pgserver.Migrate(ctx, nil), "pgserver: Migrate: nil DB")
	require.EqualError(t, pgserver.RunCleanup(ctx, nil, nil), "pgserver: RunCleanup: nil DB")
}

// TestStoreInRequestTransaction runs the store inside the transaction of the idempotency
// middleware's transactional mode, as the server does with Config.
func TestStoreInRequestTransaction(t *testing.T) {
	ctx := context.Background()
	pool, _ := testenv.PostgresPool(t)
	require.NoError(t, pgserver.Migrate(ctx, pool))
	s, err := pgserver.NewStore(pool, nil)
	require.NoError(t, err)
	tr := must(pgstore.NewTransactor(pool, nil))
	const scope = "sandbox:lic_tx"
	ep := producer.Endpoint{ID: storetest.NewID("we_"), URL: "http://127.0.0.1:1/hook", Secrets: []string{"whsec_x"}, Owner: scope, APIVersion: "v1"}
	require.NoError(t, s.CreateEndpoint(ctx, ep, 0))
	events := func() int {
		storetest.NumberEvents(t, s)
		evs, _, err := s.Log().Range(ctx, ep.ID, 1, 100, 100)
		require.NoError(t, err)
		return len(evs)
	}

	t.Run("a failing outbox takes back the order but not the request's transaction", func(t *testing.T) {
		o := storetest.NewOrder("acc_1")
		boom := errors.New("boom")
		require.NoError(t, tr.InTx(ctx, func(ctx context.Context, _ idemdriver.Store) error {
			err := s.CreateOrder(ctx, scope, o, func(ctx context.Context, log driver.Log, eps []producer.Endpoint) error {
				if err := storetest.Outbox(o)(ctx, log, eps); err != nil {
					return err
				}
				return boom
			})
			require.ErrorIs(t, err, boom)
			return nil // the middleware commits the transaction, with its stored 500
		}))
		_, err := s.Order(ctx, scope, o.ID)
		require.ErrorIs(t, err, server.ErrNotFound, "an order must never commit without its events")
		require.Zero(t, events())
	})

	t.Run("a request that rolls back leaves nothing", func(t *testing.T) {
		o := storetest.NewOrder("acc_2")
		rollback := errors.New("rollback")
		err := tr.InTx(ctx, func(ctx context.Context, _ idemdriver.Store) error {
			require.NoError(t, s.CreateOrder(ctx, scope, o, storetest.Outbox(o)))
			got, err := s.Order(ctx, scope, o.ID)
			require.NoError(t, err, "the request sees its own order")
			require.Equal(t, o, got)
			return rollback
		})
		require.ErrorIs(t, err, rollback)
		_, err = s.Order(ctx, scope, o.ID)
		require.ErrorIs(t, err, server.ErrNotFound)
		require.Zero(t, events())
	})

	t.Run("a request that commits keeps both", func(t *testing.T) {
		o := storetest.NewOrder("acc_3")
		require.NoError(t, tr.InTx(ctx, func(ctx context.Context, _ idemdriver.Store) error {
			return s.CreateOrder(ctx, scope, o, storetest.Outbox(o))
		}))
		_, err := s.Order(ctx, scope, o.ID)
		require.NoError(t, err)
		require.Equal(t, 1, events())
	})
}

// TestEndpointLimitReplicas: 40 registrations at once for one licensee, spread over two replicas
// sharing a PostgreSQL database in transactional mode (Config), against a limit of 16: exactly 16
// endpoints exist afterwards, and every other request got the 422.
func TestEndpointLimitReplicas(t *testing.T) {
	ctx := context.Background()
	pool, _ := testenv.PostgresPool(t)
	require.NoError(t, pgserver.Migrate(ctx, pool))
	replica := func() *server.Server {
		cfg, err := pgserver.Config(pool, nil)
		require.NoError(t, err)
		cfg.Webhooks.MaxEndpoints = 16
		s, err := server.New(cfg)
		require.NoError(t, err)
		return s
	}
	a, b := replica(), replica()
	creds, err := a.IssueCredentials(ctx, apikey.Sandbox)
	require.NoError(t, err)
	do := func(s *server.Server, method, path, idemKey, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+creds.APIKey)
		if idemKey != "" {
			r.Header.Set("Idempotency-Key", idemKey)
			r.Header.Set("Content-Type", "application/json")
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w
	}
	// The first request pins the licensee's version; do it before the race so that the race is about
	// the endpoints alone.
	require.Equal(t, http.StatusNotFound, do(a, "GET", "/v1/orders/ord_x", "", "").Code)

	const tries = 40
	codes := make(chan int, tries)
	var wg sync.WaitGroup
	for i := range tries {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			w := do(s, "POST", "/v1/webhook_endpoints", fmt.Sprintf("ep-%d", i), `{"url":"https://hooks.example.com/"}`)
			if w.Code != http.StatusCreated {
				require.NoError(t, apierror.Check(w.Code, w.Header(), w.Body.Bytes()))
			}
			codes <- w.Code
		})
	}
	wg.Wait()
	close(codes)
	byCode := map[int]int{}
	for c := range codes {
		byCode[c]++
	}
	require.Equal(t, map[int]int{http.StatusCreated: 16, http.StatusUnprocessableEntity: tries - 16}, byCode)
	st, err := pgserver.NewStore(pool, nil)
	require.NoError(t, err)
	ids, err := st.EndpointIDs(ctx, "sandbox:"+creds.Licensee)
	require.NoError(t, err)
	require.Len(t, ids, 16)
}

// TestRunCleanupEndsWithItsContext: the cleanup loops of both idempotency tables stop when ctx ends,
// and RunCleanup then returns nil.
func TestRunCleanupEndsWithItsContext(t *testing.T) {
	pool, _ := testenv.PostgresPool(t)
	require.NoError(t, pgserver.Migrate(context.Background(), pool))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, pgserver.RunCleanup(ctx, pool, nil))
}
