package memstore

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// Endpoints is an in-memory driver.Endpoints registry, driver.EndpointLister and
// driver.EndpointEditor: it keeps an index of each owner's live endpoints, so listing a licensee's
// endpoints reads only theirs, and runs each update under its lock. It holds signing secrets in the process's
// memory only, where signing needs them, and never writes them anywhere; a registry that stores them
// seals them at rest with a key ring of package seal (pgstore.EndpointStoreOptions.Sealer). The zero
// value is empty and ready to use. It is safe for concurrent use and must not be copied after first
// use.
type Endpoints struct {
	mu sync.RWMutex
	m  map[string]driver.Endpoint
	// byOwner holds each owner's endpoint IDs in ascending order; an owner without endpoints has no
	// entry.
	byOwner map[string][]string
}

var (
	_ driver.Endpoints      = (*Endpoints)(nil)
	_ driver.EndpointLister = (*Endpoints)(nil)
	_ driver.EndpointEditor = (*Endpoints)(nil)
)

// NewEndpoints returns a registry holding eps, or an error for the first invalid one.
func NewEndpoints(eps ...driver.Endpoint) (*Endpoints, error) {
	m := &Endpoints{}
	for _, ep := range eps {
		if err := m.Put(ep); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Put registers ep, replacing any endpoint with the same ID (to rotate a secret, Put it with both
// secrets, and later with the new one only). An endpoint Put with another owner moves to that owner.
func (m *Endpoints) Put(ep driver.Endpoint) error {
	if err := ep.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[string]driver.Endpoint)
		m.byOwner = make(map[string][]string)
	}
	m.store(ep.Clone())
	return nil
}

// store puts ep (the registry's own copy) in the map and keeps the owner index: an endpoint is
// indexed under its owner unless deleted. m.mu is held and m.m is not nil.
func (m *Endpoints) store(ep driver.Endpoint) {
	old, had := m.m[ep.ID]
	m.m[ep.ID] = ep
	wasIndexed, indexed := had && old.DeletedAt.IsZero(), ep.DeletedAt.IsZero()
	if wasIndexed && indexed && old.Owner == ep.Owner {
		return
	}
	if wasIndexed {
		m.unindex(old)
	}
	if indexed {
		ids := m.byOwner[ep.Owner]
		i, _ := slices.BinarySearch(ids, ep.ID)
		m.byOwner[ep.Owner] = slices.Insert(ids, i, ep.ID)
	}
}

// CreateEndpoint implements driver.EndpointEditor: the count and the insert hold the registry's lock.
func (m *Endpoints) CreateEndpoint(ctx context.Context, ep driver.Endpoint, limit int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ep.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.m[ep.ID]; ok {
		return fmt.Errorf("%w: %s is registered already", driver.ErrInvalidEndpoint, ep.ID)
	}
	if limit > 0 && len(m.byOwner[ep.Owner]) >= limit {
		return driver.ErrEndpointLimit
	}
	if m.m == nil {
		m.m = make(map[string]driver.Endpoint)
		m.byOwner = make(map[string][]string)
	}
	m.store(ep.Clone())
	return nil
}

// UpdateEndpoint implements driver.EndpointEditor: change runs under the registry's lock, once.
func (m *Endpoints) UpdateEndpoint(ctx context.Context, id string, change func(*driver.Endpoint) error) (driver.Endpoint, error) {
	if err := ctx.Err(); err != nil {
		return driver.Endpoint{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.m[id]
	if !ok || !old.DeletedAt.IsZero() {
		return driver.Endpoint{}, driver.ErrUnknownEndpoint
	}
	ep := old.Clone()
	if err := change(&ep); err != nil {
		return driver.Endpoint{}, err
	}
	if ep.ID != old.ID || ep.Owner != old.Owner {
		return driver.Endpoint{}, fmt.Errorf("%w: %s: an update may not change the ID or the owner", driver.ErrInvalidEndpoint, id)
	}
	if err := ep.Validate(); err != nil {
		return driver.Endpoint{}, err
	}
	ep = ep.Clone() // change may keep references to what it set
	m.store(ep)
	return ep.Clone(), nil
}

// unindex removes ep from its owner's index; m.mu is held.
func (m *Endpoints) unindex(ep driver.Endpoint) {
	ids := m.byOwner[ep.Owner]
	if i, ok := slices.BinarySearch(ids, ep.ID); ok {
		ids = slices.Delete(ids, i, i+1)
	}
	if len(ids) == 0 {
		delete(m.byOwner, ep.Owner)
		return
	}
	m.byOwner[ep.Owner] = ids
}

// Delete removes the endpoint from the registry, deleted or not: Lookup no longer finds it, its
// pending deliveries are abandoned by the Dispatcher and range retrieval of its stream answers 404.
// The endpoint lifecycle's delete, which keeps the stream readable, sets DeletedAt through
// UpdateEndpoint instead; Delete then removes what is left once the retention has emptied the
// stream. Deleting an ID that is not registered changes nothing.
func (m *Endpoints) Delete(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.m[id]; ok {
		delete(m.m, id)
		if old.DeletedAt.IsZero() {
			m.unindex(old)
		}
	}
}

// Lookup implements driver.Endpoints.
func (m *Endpoints) Lookup(ctx context.Context, id string) (driver.Endpoint, error) {
	if err := ctx.Err(); err != nil {
		return driver.Endpoint{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	ep, ok := m.m[id]
	if !ok {
		return driver.Endpoint{}, driver.ErrUnknownEndpoint
	}
	return ep.Clone(), nil
}

// ListEndpoints implements driver.EndpointLister from the owner index: it reads the owner's endpoints only.
func (m *Endpoints) ListEndpoints(ctx context.Context, q driver.EndpointQuery) ([]driver.Endpoint, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	ids := m.byOwner[q.Owner]
	if q.After != "" {
		i, found := slices.BinarySearch(ids, q.After)
		if found {
			i++
		}
		ids = ids[i:]
	}
	more := len(ids) > q.Limit
	if more {
		ids = ids[:q.Limit]
	}
	out := make([]driver.Endpoint, len(ids))
	for i, id := range ids {
		out[i] = m.m[id].Clone()
	}
	return out, more, nil
}
