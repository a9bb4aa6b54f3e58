package server

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// ErrNotFound is returned by a Store for an order that does not exist in the caller's scope.
var ErrNotFound = errors.New("server: not found")

// OutboxFunc appends the events that a new order causes to log, for the given webhook endpoints: the
// scope's live endpoints, with their subscriptions. A Store calls it inside the unit of work that
// stores the order, so the order and its events are kept or lost together: the transactional outbox.
// Without it, a crash between "order saved" and "event appended" would lose the event for good, and
// no range fetch could ever bring it back.
type OutboxFunc func(ctx context.Context, log driver.Log, endpoints []producer.Endpoint) error

// Store keeps the server's own records: orders and webhook endpoints. Every record belongs to a scope,
// the principal's "<environment>:<licensee>" (apikey.Principal.Scope), and is invisible from any
// other: that is what makes a foreign order ID a 404 and keeps sandbox and production data apart.
// Implementations must be safe for concurrent use; MemoryStore and pgserver.Store are the two here,
// and both pass the conformance suite in package storetest.
type Store interface {
	// CreateOrder stores o in scope and, in the same unit of work, runs outbox with the event log and
	// scope's live webhook endpoints. If outbox fails, the order is not stored.
	CreateOrder(ctx context.Context, scope string, o Order, outbox OutboxFunc) error
	// Order returns the order with the given ID in scope, or ErrNotFound.
	Order(ctx context.Context, scope, id string) (Order, error)
	// EndpointIDs lists the IDs of scope's live webhook endpoints (not deleted) in the order they were
	// registered, oldest first.
	EndpointIDs(ctx context.Context, scope string) ([]string, error)
	// DeleteOrders removes every order of scope and reports how many (the sandbox's reset).
	DeleteOrders(ctx context.Context, scope string) (int, error)
	// The webhook endpoint registry: looked up by the Dispatcher and the range handler, listed and
	// edited by the endpoints API (producer.EndpointsHandler). CreateEndpoint's count and insert are
	// one atomic step, also between replicas: concurrent registrations never take a scope past the
	// limit. An endpoint's Owner is its scope.
	driver.Endpoints
	driver.EndpointLister
	driver.EndpointEditor
	// Log is the event log every order's events go to, outside any transaction: the Dispatcher
	// delivers from it and the range handler reads it.
	Log() driver.Log
	// RequestLog is the event log for events a request appends by itself (the sandbox's trigger):
	// inside the request's transaction when it has one, so the events and the request's stored
	// response commit together.
	RequestLog(ctx context.Context) driver.Log
}

// MemoryStore is the in-memory Store, the server's zero-config default: everything is lost when the
// process ends, which is what a sandbox on a laptop wants. It is safe for concurrent use; build one
// with NewMemoryStore.
type MemoryStore struct {
	log driver.Log

	mu        sync.Mutex // held across an order and its events, so both appear together
	orders    map[string]map[string]Order
	endpoints memstore.Endpoints
	byScope   map[string][]string
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store whose events go to a fresh memstore.Log that keeps at
// most DefaultMaxStreamEvents events per webhook endpoint.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{log: &memstore.Log{MaxStreamEvents: DefaultMaxStreamEvents}, orders: make(map[string]map[string]Order),
		byScope: make(map[string][]string)}
}

// Log implements Store.
func (m *MemoryStore) Log() driver.Log { return m.log }

// RequestLog implements Store: memory has no transactions.
func (m *MemoryStore) RequestLog(context.Context) driver.Log { return m.log }

// CreateOrder implements Store. Memory cannot roll an append back, so a failing outbox after a partial
// append leaves those events in place; with the in-memory log an append fails only on a cancelled
// context, before anything is written.
func (m *MemoryStore) CreateOrder(ctx context.Context, scope string, o Order, outbox OutboxFunc) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	eps, err := m.liveEndpoints(ctx, scope)
	if err != nil {
		return err
	}
	if err := outbox(ctx, m.log, eps); err != nil {
		return err
	}
	if m.orders[scope] == nil {
		m.orders[scope] = make(map[string]Order)
	}
	m.orders[scope][o.ID] = o
	return nil
}

// liveEndpoints returns scope's live endpoints in the order they were registered; m.mu is held.
func (m *MemoryStore) liveEndpoints(ctx context.Context, scope string) ([]producer.Endpoint, error) {
	ids := m.byScope[scope]
	eps := make([]producer.Endpoint, 0, len(ids))
	for _, id := range ids {
		ep, err := m.endpoints.Lookup(ctx, id)
		if err != nil {
			return nil, err
		}
		eps = append(eps, ep)
	}
	return eps, nil
}

// Order implements Store.
func (m *MemoryStore) Order(ctx context.Context, scope, id string) (Order, error) {
	if err := ctx.Err(); err != nil {
		return Order{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.orders[scope][id]
	if !ok {
		return Order{}, ErrNotFound
	}
	return o, nil
}

// CreateEndpoint implements driver.EndpointEditor: the count and the insert hold the store's mutex.
func (m *MemoryStore) CreateEndpoint(ctx context.Context, ep producer.Endpoint, limit int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.endpoints.CreateEndpoint(ctx, ep, limit); err != nil {
		return err
	}
	m.byScope[ep.Owner] = append(m.byScope[ep.Owner], ep.ID)
	return nil
}

// UpdateEndpoint implements driver.EndpointEditor; a deleted endpoint leaves its scope's list.
func (m *MemoryStore) UpdateEndpoint(ctx context.Context, id string, change func(*producer.Endpoint) error) (producer.Endpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ep, err := m.endpoints.UpdateEndpoint(ctx, id, change)
	if err == nil && !ep.DeletedAt.IsZero() {
		m.byScope[ep.Owner] = slices.DeleteFunc(m.byScope[ep.Owner], func(x string) bool { return x == id })
	}
	return ep, err
}

// EndpointIDs implements Store: byScope keeps each scope's live IDs in the order they were registered.
func (m *MemoryStore) EndpointIDs(ctx context.Context, scope string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.byScope[scope]), nil
}

// Lookup implements driver.Endpoints.
func (m *MemoryStore) Lookup(ctx context.Context, id string) (producer.Endpoint, error) {
	return m.endpoints.Lookup(ctx, id)
}

// ListEndpoints implements driver.EndpointLister.
func (m *MemoryStore) ListEndpoints(ctx context.Context, q driver.EndpointQuery) ([]producer.Endpoint, bool, error) {
	return m.endpoints.ListEndpoints(ctx, q)
}

// DeleteOrders implements Store.
func (m *MemoryStore) DeleteOrders(ctx context.Context, scope string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.orders[scope])
	delete(m.orders, scope)
	return n, nil
}
