package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
)

// TestStores runs the same checks against every Store, so the memory default and PostgreSQL agree.
func TestStores(t *testing.T) {
	stores := []struct {
		name string
		new  func(t *testing.T) Store
	}{
		{"memory", func(*testing.T) Store { return NewMemoryStore() }},
		{"postgres", func(t *testing.T) Store {
			pool, _ := testenv.PostgresPool(t)
			require.NoError(t, MigratePostgres(context.Background(), pool))
			require.NoError(t, MigratePostgres(context.Background(), pool), "migrations must be rerunnable")
			return must(NewPostgresStore(pool))
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) { testStore(t, st.new) })
	}
}

// TestPostgresStoreInRequestTransaction runs the store inside the transaction of the idempotency
// middleware's transactional mode, as the server does with -postgres.
func TestPostgresStoreInRequestTransaction(t *testing.T) {
	ctx := context.Background()
	pool, _ := testenv.PostgresPool(t)
	require.NoError(t, MigratePostgres(ctx, pool))
	require.NoError(t, pgstore.MigrateIdempotency(ctx, pool, nil))
	s := must(NewPostgresStore(pool))
	tr := must(pgstore.NewTransactor(pool, nil))
	const scope = "sandbox:lic_tx"
	ep := producer.Endpoint{ID: newID("we_"), URL: "http://127.0.0.1:1/hook", Secrets: []string{"whsec_x"}, Owner: scope, APIVersion: "v1"}
	require.NoError(t, s.CreateEndpoint(ctx, ep, 0))
	events := func() int {
		numberEvents(t, s)
		evs, _, err := s.Log().Range(ctx, ep.ID, 1, 100, 100)
		require.NoError(t, err)
		return len(evs)
	}

	t.Run("a failing outbox takes back the order but not the request's transaction", func(t *testing.T) {
		o := testOrder("acc_1")
		boom := errors.New("boom")
		require.NoError(t, tr.InTx(ctx, func(ctx context.Context, _ idempotency.Store) error {
			err := s.CreateOrder(ctx, scope, o, func(ctx context.Context, log producer.Log, ids []string) error {
				if err := emitTo(o)(ctx, log, ids); err != nil {
					return err
				}
				return boom
			})
			require.ErrorIs(t, err, boom)
			return nil // the middleware commits the transaction, with its stored 500
		}))
		_, err := s.Order(ctx, scope, o.ID)
		require.ErrorIs(t, err, ErrNotFound, "an order must never commit without its events")
		require.Zero(t, events())
	})

	t.Run("a request that rolls back leaves nothing", func(t *testing.T) {
		o := testOrder("acc_2")
		rollback := errors.New("rollback")
		err := tr.InTx(ctx, func(ctx context.Context, _ idempotency.Store) error {
			require.NoError(t, s.CreateOrder(ctx, scope, o, emitTo(o)))
			got, err := s.Order(ctx, scope, o.ID)
			require.NoError(t, err, "the request sees its own order")
			require.Equal(t, o, got)
			return rollback
		})
		require.ErrorIs(t, err, rollback)
		_, err = s.Order(ctx, scope, o.ID)
		require.ErrorIs(t, err, ErrNotFound)
		require.Zero(t, events())
	})

	t.Run("a request that commits keeps both", func(t *testing.T) {
		o := testOrder("acc_3")
		require.NoError(t, tr.InTx(ctx, func(ctx context.Context, _ idempotency.Store) error {
			return s.CreateOrder(ctx, scope, o, emitTo(o))
		}))
		_, err := s.Order(ctx, scope, o.ID)
		require.NoError(t, err)
		require.Equal(t, 1, events())
	})
}

// numberEvents numbers the store's committed events when its log numbers them after the commit
// (PostgreSQL), as the server's dispatcher does in the background.
func numberEvents(t *testing.T, s Store) {
	t.Helper()
	sq, ok := s.Log().(producer.Sequencing)
	if !ok {
		return
	}
	for {
		runs, err := sq.Sequence(context.Background(), 1000)
		require.NoError(t, err)
		if len(runs) == 0 {
			return
		}
	}
}

func testOrder(account string) Order {
	return Order{ID: newID("ord_"), Object: "order", Account: account, Direction: SideBuy, Status: "created",
		Created: time.Unix(1767225600, 0).Unix()}
}

// emitTo is the outbox the server uses, reduced to what the tests need.
func emitTo(o Order) OutboxFunc {
	return func(ctx context.Context, log producer.Log, ids []string) error {
		data := fmt.Appendf(nil, `{"id":%q}`, o.ID)
		for _, id := range ids {
			if _, err := log.Append(ctx, id, eventFor(data)); err != nil {
				return err
			}
		}
		return nil
	}
}

func testStore(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()
	const scopeA, scopeB = "sandbox:lic_a", "sandbox:lic_b"
	endpoint := func(owner string) producer.Endpoint {
		return producer.Endpoint{ID: newID("we_"), URL: "http://127.0.0.1:1/hook", Secrets: []string{"whsec_x"},
			Owner: owner, APIVersion: "v1"}
	}

	t.Run("orders are visible only in their scope", func(t *testing.T) {
		s := newStore(t)
		o := testOrder("acc_1")
		require.NoError(t, s.CreateOrder(ctx, scopeA, o, emitTo(o)))
		got, err := s.Order(ctx, scopeA, o.ID)
		require.NoError(t, err)
		require.Equal(t, o, got)
		_, err = s.Order(ctx, scopeB, o.ID)
		require.ErrorIs(t, err, ErrNotFound)
		_, err = s.Order(ctx, "live:lic_a", o.ID)
		require.ErrorIs(t, err, ErrNotFound, "the same licensee's production scope must not see sandbox data")
		_, err = s.Order(ctx, scopeA, "ord_missing")
		require.ErrorIs(t, err, ErrNotFound)
	})

	t.Run("endpoints are listed per scope and looked up by ID", func(t *testing.T) {
		s := newStore(t)
		a1, a2, b := endpoint(scopeA), endpoint(scopeA), endpoint(scopeB)
		for _, ep := range []producer.Endpoint{a1, a2, b} {
			require.NoError(t, s.CreateEndpoint(ctx, ep, 0))
		}
		ids, err := s.EndpointIDs(ctx, scopeA)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{a1.ID, a2.ID}, ids)
		got, err := s.Lookup(ctx, b.ID)
		require.NoError(t, err)
		require.Equal(t, b, got)
		_, err = s.Lookup(ctx, "we_missing")
		require.ErrorIs(t, err, producer.ErrUnknownEndpoint)
		require.Error(t, s.CreateEndpoint(ctx, producer.Endpoint{ID: newID("we_"), Owner: scopeA}, 0),
			"an endpoint without URL and secret must be refused")
	})

	t.Run("an order's events reach every endpoint of its scope and no other", func(t *testing.T) {
		s := newStore(t)
		a1, a2, b := endpoint(scopeA), endpoint(scopeA), endpoint(scopeB)
		for _, ep := range []producer.Endpoint{a1, a2, b} {
			require.NoError(t, s.CreateEndpoint(ctx, ep, 0))
		}
		o := testOrder("acc_1")
		require.NoError(t, s.CreateOrder(ctx, scopeA, o, emitTo(o)))
		numberEvents(t, s)
		for _, id := range []string{a1.ID, a2.ID} {
			evs, more, err := s.Log().Range(ctx, id, 1, 10, 10)
			require.NoError(t, err)
			require.False(t, more)
			require.Len(t, evs, 1)
			require.Equal(t, uint64(1), evs[0].Sequence)
			require.JSONEq(t, fmt.Sprintf(`{"id":%q}`, o.ID), string(evs[0].Data))
		}
		evs, _, err := s.Log().Range(ctx, b.ID, 1, 10, 10)
		require.NoError(t, err)
		require.Empty(t, evs)
	})

	t.Run("a failing outbox stores neither the order nor its events", func(t *testing.T) {
		s := newStore(t)
		ep := endpoint(scopeA)
		require.NoError(t, s.CreateEndpoint(ctx, ep, 0))
		o := testOrder("acc_1")
		boom := errors.New("boom")
		err := s.CreateOrder(ctx, scopeA, o, func(ctx context.Context, log producer.Log, ids []string) error {
			if err := emitTo(o)(ctx, log, ids); err != nil {
				return err
			}
			return boom
		})
		require.ErrorIs(t, err, boom)
		_, err = s.Order(ctx, scopeA, o.ID)
		require.ErrorIs(t, err, ErrNotFound)
		if _, ok := s.(*PostgresStore); ok {
			// Only a transaction can take back an append; the memory log cannot, as documented.
			numberEvents(t, s)
			evs, _, err := s.Log().Range(ctx, ep.ID, 1, 10, 10)
			require.NoError(t, err)
			require.Empty(t, evs, "the rolled-back order's event must be gone too")
			o2 := testOrder("acc_2")
			require.NoError(t, s.CreateOrder(ctx, scopeA, o2, emitTo(o2)))
			numberEvents(t, s)
			evs, _, err = s.Log().Range(ctx, ep.ID, 1, 10, 10)
			require.NoError(t, err)
			require.Len(t, evs, 1)
			require.Equal(t, uint64(1), evs[0].Sequence, "a rollback must leave no gap in the sequence")
		}
	})

	t.Run("concurrent orders get gap-free sequences", func(t *testing.T) {
		s := newStore(t)
		ep := endpoint(scopeA)
		require.NoError(t, s.CreateEndpoint(ctx, ep, 0))
		const n = 24
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				o := testOrder(fmt.Sprintf("acc_%d", i))
				errs <- s.CreateOrder(ctx, scopeA, o, emitTo(o))
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		numberEvents(t, s)
		evs, more, err := s.Log().Range(ctx, ep.ID, 1, 1000, 1000)
		require.NoError(t, err)
		require.False(t, more)
		require.Len(t, evs, n)
		for i, ev := range evs {
			require.Equal(t, uint64(i+1), ev.Sequence)
		}
	})

	t.Run("the endpoint limit holds per scope under concurrent registrations", func(t *testing.T) {
		s := newStore(t)
		const limit, tries = 5, 20
		var wg sync.WaitGroup
		errs := make(chan error, tries)
		for range tries {
			wg.Go(func() { errs <- s.CreateEndpoint(ctx, endpoint(scopeA), limit) })
		}
		wg.Wait()
		close(errs)
		created := 0
		for err := range errs {
			if err == nil {
				created++
				continue
			}
			require.ErrorIs(t, err, ErrEndpointLimit)
		}
		require.Equal(t, limit, created)
		ids, err := s.EndpointIDs(ctx, scopeA)
		require.NoError(t, err)
		require.Len(t, ids, limit)
		require.NoError(t, s.CreateEndpoint(ctx, endpoint(scopeB), limit), "another scope has a limit of its own")
		require.NoError(t, s.CreateEndpoint(ctx, endpoint(scopeA), 0), "0 means no limit")
	})

	t.Run("deleting a scope's orders leaves other scopes alone", func(t *testing.T) {
		s := newStore(t)
		oa, ob := testOrder("acc_a"), testOrder("acc_b")
		require.NoError(t, s.CreateOrder(ctx, scopeA, oa, emitTo(oa)))
		require.NoError(t, s.CreateOrder(ctx, scopeB, ob, emitTo(ob)))
		n, err := s.DeleteOrders(ctx, scopeA)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		_, err = s.Order(ctx, scopeA, oa.ID)
		require.ErrorIs(t, err, ErrNotFound)
		_, err = s.Order(ctx, scopeB, ob.ID)
		require.NoError(t, err)
	})
}

func eventFor(data []byte) webhook.Event {
	return webhook.Event{Type: "order.created", Created: 1767225600, APIVersion: "v1", Data: data}
}
