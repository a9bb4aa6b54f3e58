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

// ErrEndpointLimit is returned by Store.CreateEndpoint when the owner already has as many webhook
// endpoints as the limit allows.
var ErrEndpointLimit = errors.New("server: webhook endpoint limit reached")

// OutboxFunc appends the events that a new order causes to log, for the given webhook endpoints. A
// Store calls it inside the unit of work that stores the order, so the order and its events are kept
// or lost together: the transactional outbox. Without it, a crash between "order saved" and "event
// appended" would lose the event for good, and no range fetch could ever bring it back.
type OutboxFunc func(ctx context.Context, log driver.Log, endpointIDs []string) error

// Store keeps the server's own records: orders and webhook endpoints. Every record belongs to a scope,
// the principal's "<environment>:<licensee>" (apikey.Principal.Scope), and is invisible from any
// other: that is what makes a foreign order ID a 404 and keeps sandbox and production data apart.
// Implementations must be safe for concurrent use; MemoryStore and pgserver.Store are the two here,
// and both pass the conformance suite in package storetest.
type Store interface {
	// CreateOrder stores o in scope and, in the same unit of work, runs outbox with the event log and
	// the IDs of scope's webhook endpoints. If outbox fails, the order is not stored.
	CreateOrder(ctx context.Context, scope string, o Order, outbox OutboxFunc) error
	// Order returns the order with the given ID in scope, or ErrNotFound.
	Order(ctx context.Context, scope, id string) (Order, error)
	// CreateEndpoint registers a webhook endpoint; ep.Owner is its scope. With limit > 0 it returns
	// ErrEndpointLimit, and registers nothing, if the scope already has limit endpoints. The count
	// and the insert are one atomic step, also between replicas: concurrent registrations never
	// take a scope past the limit.
	CreateEndpoint(ctx context.Context, ep producer.Endpoint, limit int) error
	// EndpointIDs lists the IDs of scope's webhook endpoints in the order they were registered,
	// oldest first: GET /v1/webhook_endpoints lists them in this order.
	EndpointIDs(ctx context.Context, scope string) ([]string, error)
	// DeleteOrders removes every order of scope and reports how many (the sandbox's reset).
	DeleteOrders(ctx context.Context, scope string) (int, error)
	// Endpoints looks an endpoint up by ID, for the Dispatcher and the range handler.
	driver.Endpoints
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
	if err := outbox(ctx, m.log, slices.Clone(m.byScope[scope])); err != nil {
		return err
	}
	if m.orders[scope] == nil {
		m.orders[scope] = make(map[string]Order)
	}
	m.orders[scope][o.ID] = o
	return nil
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

// CreateEndpoint implements Store: the count and the insert hold the store's mutex.
func (m *MemoryStore) CreateEndpoint(ctx context.Context, ep producer.Endpoint, limit int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if limit > 0 && len(m.byScope[ep.Owner]) >= limit {
		return ErrEndpointLimit
	}
	if err := m.endpoints.Put(ep); err != nil {
		return err
	}
	m.byScope[ep.Owner] = append(m.byScope[ep.Owner], ep.ID)
	return nil
}

// EndpointIDs implements Store: byScope keeps each scope's IDs in the order they were registered.
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
