package producer

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
)

// Endpoint is a registered webhook endpoint: where its events go, how they are signed and whose
// they are. Its ID names its stream in the Log. It is a plain value; MemoryEndpoints copies its Secrets
// on the way in and out. The zero value is not a valid registration (see Validate).
type Endpoint struct {
	// ID identifies the endpoint ("we_…") and its event stream.
	ID string
	// URL receives the deliveries by POST.
	URL string
	// Secrets sign deliveries and range responses. Normally one; two while a secret rotates, and then
	// every signature carries one v1 per secret so the consumer can switch at its own pace.
	Secrets []string
	// Owner is the licensee the endpoint belongs to. Range retrieval answers only its owner.
	Owner string
	// APIVersion is the API version the endpoint's licensee is pinned to; events are rendered at it
	// through the Render hook. Empty means events go out as they were stored.
	APIVersion string
}

// Validate reports what is wrong with an endpoint's registration, without echoing its secrets.
func (e Endpoint) Validate() error {
	switch {
	case e.ID == "":
		return fmt.Errorf("%w: empty ID", ErrInvalidEndpoint)
	case e.Owner == "":
		return fmt.Errorf("%w: %s has no owner", ErrInvalidEndpoint, e.ID)
	case len(e.Secrets) == 0:
		return fmt.Errorf("%w: %s has no signing secret", ErrInvalidEndpoint, e.ID)
	case slices.Contains(e.Secrets, ""):
		return fmt.Errorf("%w: %s has an empty signing secret", ErrInvalidEndpoint, e.ID)
	}
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%w: %s needs an absolute http or https URL", ErrInvalidEndpoint, e.ID)
	}
	return nil
}

func (e Endpoint) clone() Endpoint {
	e.Secrets = slices.Clone(e.Secrets)
	return e
}

// Endpoints looks up registered webhook endpoints. Implementations must be safe for concurrent use.
// A registry that can also list a licensee's endpoints implements EndpointLister.
type Endpoints interface {
	// Lookup returns the endpoint with the given ID, or an error wrapping ErrUnknownEndpoint.
	Lookup(ctx context.Context, id string) (Endpoint, error)
}

// EndpointLister is implemented by Endpoints registries that can list the endpoints of one owner
// (licensee): MemoryEndpoints and pgstore.EndpointStore. Publisher.PublishToOwner needs it, so that no
// team keeps an owner index of its own beside the registry. It is an interface of its own, not a
// method of Endpoints, so that registries that only look up keep implementing Endpoints.
// Implementations must be safe for concurrent use; endpointtest.Run is their conformance suite.
type EndpointLister interface {
	// ListEndpoints returns the endpoints whose Owner is q.Owner and whose ID sorts after q.After,
	// in ascending byte order of ID, at most q.Limit of them, and whether more follow. An owner
	// without endpoints is an empty list, not an error. q is checked as CheckEndpointQuery does.
	ListEndpoints(ctx context.Context, q EndpointQuery) ([]Endpoint, bool, error)
}

// EndpointQuery selects one owner's endpoints for EndpointLister.ListEndpoints. It is a plain value;
// the zero value has no owner and is refused with ErrInvalidRange.
type EndpointQuery struct {
	// Owner is the licensee whose endpoints are listed; required.
	Owner string
	// After, when not empty, keeps the endpoints whose ID sorts after it (byte order): the cursor of
	// the next page, the last ID of the previous one.
	After string
	// Limit is the most endpoints returned; it must be at least 1.
	Limit int
}

// CheckEndpointQuery validates ListEndpoints' query: an empty owner or a limit below 1 is an error
// wrapping ErrInvalidRange. EndpointLister implementations call it first.
func CheckEndpointQuery(q EndpointQuery) error {
	switch {
	case q.Owner == "":
		return fmt.Errorf("%w: endpoints of an empty owner", ErrInvalidRange)
	case q.Limit < 1:
		return fmt.Errorf("%w: limit must be at least 1", ErrInvalidRange)
	}
	return nil
}

var (
	// ErrUnknownEndpoint: no endpoint has that ID.
	ErrUnknownEndpoint = errors.New("producer: unknown webhook endpoint")
	// ErrInvalidEndpoint: a registration lacks an ID, owner, secret or usable URL.
	ErrInvalidEndpoint = errors.New("producer: invalid webhook endpoint")
)

// MemoryEndpoints is an in-memory Endpoints registry and EndpointLister: it keeps an index by owner,
// so listing a licensee's endpoints reads only theirs. It holds signing secrets in the process's
// memory only, where signing needs them, and never writes them anywhere; a registry that stores them
// seals them at rest with a key ring of package seal (pgstore.EndpointStoreOptions.Sealer). The zero
// value is empty and ready to use. It is safe for concurrent use and must not be copied after first
// use.
type MemoryEndpoints struct {
	mu sync.RWMutex
	m  map[string]Endpoint
	// byOwner holds each owner's endpoint IDs in ascending order; an owner without endpoints has no
	// entry.
	byOwner map[string][]string
}

var (
	_ Endpoints      = (*MemoryEndpoints)(nil)
	_ EndpointLister = (*MemoryEndpoints)(nil)
)

// NewMemoryEndpoints returns a registry holding eps, or an error for the first invalid one.
func NewMemoryEndpoints(eps ...Endpoint) (*MemoryEndpoints, error) {
	m := &MemoryEndpoints{}
	for _, ep := range eps {
		if err := m.Put(ep); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Put registers ep, replacing any endpoint with the same ID (to rotate a secret, Put it with both
// secrets, and later with the new one only). An endpoint Put with another owner moves to that owner.
func (m *MemoryEndpoints) Put(ep Endpoint) error {
	if err := ep.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[string]Endpoint)
		m.byOwner = make(map[string][]string)
	}
	if old, ok := m.m[ep.ID]; ok {
		if old.Owner == ep.Owner {
			m.m[ep.ID] = ep.clone()
			return nil
		}
		m.unindex(old)
	}
	m.m[ep.ID] = ep.clone()
	ids := m.byOwner[ep.Owner]
	i, _ := slices.BinarySearch(ids, ep.ID)
	m.byOwner[ep.Owner] = slices.Insert(ids, i, ep.ID)
	return nil
}

// unindex removes ep from its owner's index; m.mu is held.
func (m *MemoryEndpoints) unindex(ep Endpoint) {
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
func (m *MemoryEndpoints) Delete(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.m[id]; ok {
		delete(m.m, id)
		m.unindex(old)
	}
}

// Lookup implements Endpoints.
func (m *MemoryEndpoints) Lookup(ctx context.Context, id string) (Endpoint, error) {
	if err := ctx.Err(); err != nil {
		return Endpoint{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	ep, ok := m.m[id]
	if !ok {
		return Endpoint{}, ErrUnknownEndpoint
	}
	return ep.clone(), nil
}

// ListEndpoints implements EndpointLister from the owner index: it reads the owner's endpoints only.
func (m *MemoryEndpoints) ListEndpoints(ctx context.Context, q EndpointQuery) ([]Endpoint, bool, error) {
	if err := CheckEndpointQuery(q); err != nil {
		return nil, false, err
	}
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
	out := make([]Endpoint, len(ids))
	for i, id := range ids {
		out[i] = m.m[id].clone()
	}
	return out, more, nil
}
