package memstore

import (
	"context"
	"slices"
	"sync"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// Endpoints is an in-memory driver.Endpoints registry and driver.EndpointLister: it keeps an index by owner,
// so listing a licensee's endpoints reads only theirs. It holds signing secrets in the process's
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
	if old, ok := m.m[ep.ID]; ok {
		if old.Owner == ep.Owner {
			m.m[ep.ID] = clone(ep)
			return nil
		}
		m.unindex(old)
	}
	m.m[ep.ID] = clone(ep)
	ids := m.byOwner[ep.Owner]
	i, _ := slices.BinarySearch(ids, ep.ID)
	m.byOwner[ep.Owner] = slices.Insert(ids, i, ep.ID)
	return nil
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

// Delete removes the endpoint; its pending deliveries are then abandoned by the Dispatcher. Deleting
// an ID that is not registered changes nothing.
func (m *Endpoints) Delete(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.m[id]; ok {
		delete(m.m, id)
		m.unindex(old)
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
	return clone(ep), nil
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
		out[i] = clone(m.m[id])
	}
	return out, more, nil
}

// clone copies ep's Secrets, so that the registry and its callers never share them.
func clone(ep driver.Endpoint) driver.Endpoint {
	ep.Secrets = slices.Clone(ep.Secrets)
	return ep
}
