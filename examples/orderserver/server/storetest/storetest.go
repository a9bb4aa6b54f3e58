// Package storetest is the conformance suite of server.Store: every implementation runs it, so that
// the in-memory default (server.MemoryStore) and PostgreSQL (pgserver.Store) behave alike — records
// visible only in their scope, endpoints listed in the order they were registered, an order's events
// reaching exactly its scope's endpoints, gap-free sequences under concurrent orders, an endpoint
// limit that holds under concurrent registrations.
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) server.Store { return newMyStore(t) }, nil)
//	}
//
// It uses only the standard library's testing package.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// Options describe what the store under test promises beyond the interface. A nil *Options and the
// zero value describe a store without transactions, such as server.MemoryStore.
type Options struct {
	// Transactional says that CreateOrder takes back the events an outbox appended before it failed
	// (a database transaction does; memory cannot, as MemoryStore documents), and that a rolled-back
	// order leaves no gap in its endpoints' sequences. The suite then checks both.
	Transactional bool
}

// NewID returns prefix and 26 random base32 characters, the shape of the server's IDs.
func NewID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// NewOrder returns a new order of account with a fresh ID, created at a fixed instant.
func NewOrder(account string) server.Order {
	return server.Order{ID: NewID("ord_"), Object: "order", Account: account, Direction: server.SideBuy,
		Status: "created", Created: time.Unix(1767225600, 0).Unix()}
}

// Outbox is the server's outbox reduced to what the suite needs: one order.created event whose data is
// {"id":<the order's ID>} for each endpoint subscribed to order.created.
func Outbox(o server.Order) server.OutboxFunc {
	return func(ctx context.Context, log driver.Log, eps []producer.Endpoint) error {
		data := fmt.Appendf(nil, `{"id":%q}`, o.ID)
		for _, ep := range eps {
			if !ep.Subscribed("order.created") {
				continue
			}
			ev := webhook.Event{Type: "order.created", Created: o.Created, APIVersion: "v1", Data: data}
			if _, err := log.Append(ctx, driver.StreamEvent{Stream: ep.ID, Event: ev}); err != nil {
				return err
			}
		}
		return nil
	}
}

// NumberEvents numbers the store's committed events when its log numbers them after the commit
// (driver.Sequencing, as pgstore.EventLog does), as the server's dispatcher does in the background.
// With a log that numbers events as they are appended it does nothing.
func NumberEvents(t testing.TB, s server.Store) {
	t.Helper()
	sq, ok := s.Log().(driver.Sequencing)
	if !ok {
		return
	}
	for {
		runs, err := sq.Sequence(context.Background(), 1000)
		if err != nil {
			t.Fatalf("numbering events: %v", err)
		}
		if len(runs) == 0 {
			return
		}
	}
}

// Run runs the suite against stores that newStore returns, a fresh and empty one for each subtest.
func Run(t *testing.T, newStore func(t *testing.T) server.Store, opts *Options) {
	if opts == nil {
		opts = &Options{}
	}
	ctx := context.Background()
	const scopeA, scopeB = "sandbox:lic_a", "sandbox:lic_b"
	endpoint := func(owner string) producer.Endpoint {
		return producer.Endpoint{ID: NewID("we_"), URL: "http://127.0.0.1:1/hook", Secrets: []string{"whsec_x"},
			Owner: owner, APIVersion: "v1"}
	}
	events := func(t *testing.T, s server.Store, endpointID string) []webhook.Event {
		t.Helper()
		NumberEvents(t, s)
		evs, more, err := s.Log().Range(ctx, endpointID, 1, 1000, 1000)
		must(t, err, "range of %s", endpointID)
		if more {
			t.Fatalf("range of %s: has_more after fewer than 1000 events", endpointID)
		}
		return evs
	}

	t.Run("orders are visible only in their scope", func(t *testing.T) {
		s := newStore(t)
		o := NewOrder("acc_1")
		must(t, s.CreateOrder(ctx, scopeA, o, Outbox(o)), "create order")
		got, err := s.Order(ctx, scopeA, o.ID)
		must(t, err, "read the order in its scope")
		if got != o {
			t.Fatalf("read %+v, stored %+v", got, o)
		}
		for _, scope := range []string{scopeB, "live:lic_a"} { // another licensee; the same one in production
			if _, err := s.Order(ctx, scope, o.ID); !errors.Is(err, server.ErrNotFound) {
				t.Fatalf("order of %s read in %s: err = %v, want server.ErrNotFound", scopeA, scope, err)
			}
		}
		if _, err := s.Order(ctx, scopeA, "ord_missing"); !errors.Is(err, server.ErrNotFound) {
			t.Fatalf("unknown order: err = %v, want server.ErrNotFound", err)
		}
	})

	t.Run("endpoints are listed per scope and looked up by ID", func(t *testing.T) {
		s := newStore(t)
		a1, a2, b := endpoint(scopeA), endpoint(scopeA), endpoint(scopeB)
		for _, ep := range []producer.Endpoint{a1, a2, b} {
			must(t, s.CreateEndpoint(ctx, ep, 0), "create endpoint")
		}
		ids, err := s.EndpointIDs(ctx, scopeA)
		must(t, err, "list endpoints")
		if !sameSet(ids, []string{a1.ID, a2.ID}) {
			t.Fatalf("endpoints of %s: %v, want %v and %v", scopeA, ids, a1.ID, a2.ID)
		}
		if ids, err := s.EndpointIDs(ctx, "live:lic_a"); err != nil || len(ids) != 0 {
			t.Fatalf("endpoints of the same licensee in production: %v (err %v), want none", ids, err)
		}
		got, err := s.Lookup(ctx, b.ID)
		must(t, err, "look up endpoint")
		if !sameEndpoint(got, b) {
			t.Fatalf("looked up %+v, stored %+v", got, b)
		}
		if _, err := s.Lookup(ctx, "we_missing"); !errors.Is(err, producer.ErrUnknownEndpoint) {
			t.Fatalf("unknown endpoint: err = %v, want producer.ErrUnknownEndpoint", err)
		}
		if err := s.CreateEndpoint(ctx, producer.Endpoint{ID: NewID("we_"), Owner: scopeA}, 0); err == nil {
			t.Fatal("an endpoint without URL and secret was registered")
		}
	})

	t.Run("endpoints are listed in the order they were registered", func(t *testing.T) {
		s := newStore(t)
		// IDs in descending order, registered one after another and interleaved with another scope's:
		// a store that lists by ID, or in no particular order, fails.
		const n = 6
		want := make([]string, n)
		for i := range want {
			want[i] = NewID("we_")
		}
		slices.Sort(want)
		slices.Reverse(want)
		for _, id := range want {
			ep := endpoint(scopeA)
			ep.ID = id
			must(t, s.CreateEndpoint(ctx, ep, 0), "create endpoint")
			must(t, s.CreateEndpoint(ctx, endpoint(scopeB), 0), "create endpoint")
		}
		ids, err := s.EndpointIDs(ctx, scopeA)
		must(t, err, "list endpoints")
		if !slices.Equal(ids, want) {
			t.Fatalf("endpoints of %s: %v, want them as registered: %v", scopeA, ids, want)
		}
		if ids, err := s.EndpointIDs(ctx, "sandbox:lic_none"); err != nil || len(ids) != 0 {
			t.Fatalf("endpoints of a scope without any: %v (err %v), want none", ids, err)
		}
	})

	t.Run("an order's events reach every endpoint of its scope and no other", func(t *testing.T) {
		s := newStore(t)
		a1, a2, b := endpoint(scopeA), endpoint(scopeA), endpoint(scopeB)
		for _, ep := range []producer.Endpoint{a1, a2, b} {
			must(t, s.CreateEndpoint(ctx, ep, 0), "create endpoint")
		}
		o := NewOrder("acc_1")
		must(t, s.CreateOrder(ctx, scopeA, o, Outbox(o)), "create order")
		for _, id := range []string{a1.ID, a2.ID} {
			evs := events(t, s, id)
			if len(evs) != 1 || evs[0].Sequence != 1 || dataID(evs[0].Data) != o.ID {
				t.Fatalf("events of %s: %+v, want one, sequence 1, about %s", id, evs, o.ID)
			}
		}
		if evs := events(t, s, b.ID); len(evs) != 0 {
			t.Fatalf("another scope's endpoint got %d events", len(evs))
		}
	})

	t.Run("a failing outbox stores neither the order nor its events", func(t *testing.T) {
		s := newStore(t)
		ep := endpoint(scopeA)
		must(t, s.CreateEndpoint(ctx, ep, 0), "create endpoint")
		o := NewOrder("acc_1")
		boom := errors.New("boom")
		err := s.CreateOrder(ctx, scopeA, o, func(ctx context.Context, log driver.Log, eps []producer.Endpoint) error {
			if err := Outbox(o)(ctx, log, eps); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("CreateOrder: err = %v, want the outbox's", err)
		}
		if _, err := s.Order(ctx, scopeA, o.ID); !errors.Is(err, server.ErrNotFound) {
			t.Fatalf("the failed order: err = %v, want server.ErrNotFound", err)
		}
		if !opts.Transactional {
			return // only a transaction can take back an append
		}
		if evs := events(t, s, ep.ID); len(evs) != 0 {
			t.Fatalf("the rolled-back order left %d events", len(evs))
		}
		o2 := NewOrder("acc_2")
		must(t, s.CreateOrder(ctx, scopeA, o2, Outbox(o2)), "create order")
		if evs := events(t, s, ep.ID); len(evs) != 1 || evs[0].Sequence != 1 {
			t.Fatalf("after a rollback: %+v, want one event with sequence 1 (no gap)", evs)
		}
	})

	t.Run("concurrent orders get gap-free sequences", func(t *testing.T) {
		s := newStore(t)
		ep := endpoint(scopeA)
		must(t, s.CreateEndpoint(ctx, ep, 0), "create endpoint")
		const n = 24
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				o := NewOrder(fmt.Sprintf("acc_%d", i))
				errs <- s.CreateOrder(ctx, scopeA, o, Outbox(o))
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			must(t, err, "create order")
		}
		evs := events(t, s, ep.ID)
		if len(evs) != n {
			t.Fatalf("%d events, want %d", len(evs), n)
		}
		for i, ev := range evs {
			if ev.Sequence != uint64(i+1) {
				t.Fatalf("event %d has sequence %d", i+1, ev.Sequence)
			}
		}
	})

	t.Run("the endpoint limit holds per scope under concurrent registrations", func(t *testing.T) {
		s := newStore(t)
		const limit, tries = 5, 20
		errs := make(chan error, tries)
		var wg sync.WaitGroup
		for range tries {
			wg.Go(func() { errs <- s.CreateEndpoint(ctx, endpoint(scopeA), limit) })
		}
		wg.Wait()
		close(errs)
		created := 0
		for err := range errs {
			switch {
			case err == nil:
				created++
			case !errors.Is(err, producer.ErrEndpointLimit):
				t.Fatalf("CreateEndpoint: err = %v, want nil or producer.ErrEndpointLimit", err)
			}
		}
		ids, err := s.EndpointIDs(ctx, scopeA)
		must(t, err, "list endpoints")
		if created != limit || len(ids) != limit {
			t.Fatalf("%d registrations succeeded and %d endpoints exist, want %d", created, len(ids), limit)
		}
		must(t, s.CreateEndpoint(ctx, endpoint(scopeB), limit), "another scope has a limit of its own")
		must(t, s.CreateEndpoint(ctx, endpoint(scopeA), 0), "a limit of 0 means none")
	})

	t.Run("an order's events skip deleted and unsubscribed endpoints", func(t *testing.T) {
		s := newStore(t)
		all, created, deleted, other := endpoint(scopeA), endpoint(scopeA), endpoint(scopeA), endpoint(scopeA)
		created.EnabledEvents = []string{"order.created"}
		other.EnabledEvents = []string{"order.settled"}
		for _, ep := range []producer.Endpoint{all, created, deleted, other} {
			must(t, s.CreateEndpoint(ctx, ep, 0), "create endpoint")
		}
		_, err := s.UpdateEndpoint(ctx, deleted.ID, func(ep *producer.Endpoint) error { ep.DeletedAt = time.Unix(1767225600, 0); return nil })
		must(t, err, "delete endpoint")
		ids, err := s.EndpointIDs(ctx, scopeA)
		must(t, err, "list endpoints")
		if !slices.Equal(ids, []string{all.ID, created.ID, other.ID}) {
			t.Fatalf("endpoints of %s: %v, want the live ones as registered", scopeA, ids)
		}
		o := NewOrder("acc_1")
		must(t, s.CreateOrder(ctx, scopeA, o, Outbox(o)), "create order")
		for id, want := range map[string]int{all.ID: 1, created.ID: 1, deleted.ID: 0, other.ID: 0} {
			if evs := events(t, s, id); len(evs) != want {
				t.Fatalf("endpoint %s got %d events, want %d", id, len(evs), want)
			}
		}
		got, err := s.Lookup(ctx, deleted.ID)
		must(t, err, "look up the deleted endpoint")
		if got.DeletedAt.IsZero() {
			t.Fatal("a deleted endpoint is looked up without its DeletedAt")
		}
		listed, _, err := s.ListEndpoints(ctx, driver.EndpointQuery{Owner: scopeA, Limit: 10})
		must(t, err, "list endpoints")
		if len(listed) != 3 {
			t.Fatalf("ListEndpoints lists %d endpoints, want the 3 live ones", len(listed))
		}
	})

	t.Run("a deleted endpoint frees its slot under the limit", func(t *testing.T) {
		s := newStore(t)
		a, b := endpoint(scopeA), endpoint(scopeA)
		must(t, s.CreateEndpoint(ctx, a, 1), "create endpoint")
		if err := s.CreateEndpoint(ctx, b, 1); !errors.Is(err, producer.ErrEndpointLimit) {
			t.Fatalf("a second endpoint under a limit of 1: err = %v, want producer.ErrEndpointLimit", err)
		}
		_, err := s.UpdateEndpoint(ctx, a.ID, func(ep *producer.Endpoint) error { ep.DeletedAt = time.Unix(1767225600, 0); return nil })
		must(t, err, "delete endpoint")
		must(t, s.CreateEndpoint(ctx, b, 1), "create endpoint after the delete")
	})

	t.Run("deleting a scope's orders leaves other scopes alone", func(t *testing.T) {
		s := newStore(t)
		oa, ob := NewOrder("acc_a"), NewOrder("acc_b")
		must(t, s.CreateOrder(ctx, scopeA, oa, Outbox(oa)), "create order")
		must(t, s.CreateOrder(ctx, scopeB, ob, Outbox(ob)), "create order")
		n, err := s.DeleteOrders(ctx, scopeA)
		must(t, err, "delete orders")
		if n != 1 {
			t.Fatalf("deleted %d orders, want 1", n)
		}
		if _, err := s.Order(ctx, scopeA, oa.ID); !errors.Is(err, server.ErrNotFound) {
			t.Fatalf("deleted order: err = %v, want server.ErrNotFound", err)
		}
		_, err = s.Order(ctx, scopeB, ob.ID)
		must(t, err, "the other scope's order")
	})
}

func must(t *testing.T, err error, format string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf(format+": %v", append(args, err)...)
	}
}

// dataID is the "id" member of an event's data: the database may store the JSON in another spelling.
func dataID(data []byte) string {
	var v struct{ ID string }
	if json.Unmarshal(data, &v) != nil {
		return ""
	}
	return v.ID
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[string]int, len(a))
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

func sameEndpoint(a, b producer.Endpoint) bool {
	return a.ID == b.ID && a.URL == b.URL && a.Owner == b.Owner && a.APIVersion == b.APIVersion &&
		strings.Join(a.Secrets, "\x00") == strings.Join(b.Secrets, "\x00")
}
