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
type Endpoints interface {
	// Lookup returns the endpoint with the given ID, or an error wrapping ErrUnknownEndpoint.
	Lookup(ctx context.Context, id string) (Endpoint, error)
}

var (
	// ErrUnknownEndpoint: no endpoint has that ID.
	ErrUnknownEndpoint = errors.New("producer: unknown webhook endpoint")
	// ErrInvalidEndpoint: a registration lacks an ID, owner, secret or usable URL.
	ErrInvalidEndpoint = errors.New("producer: invalid webhook endpoint")
)

// MemoryEndpoints is an in-memory Endpoints registry. The zero value is empty and ready to use. It is
// safe for concurrent use and must not be copied after first use.
type MemoryEndpoints struct {
	mu sync.RWMutex
	m  map[string]Endpoint
}

var _ Endpoints = (*MemoryEndpoints)(nil)

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
// secrets, and later with the new one only).
func (m *MemoryEndpoints) Put(ep Endpoint) error {
	if err := ep.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[string]Endpoint)
	}
	m.m[ep.ID] = ep.clone()
	return nil
}

// Delete removes the endpoint; its pending deliveries are then abandoned by the Dispatcher.
func (m *MemoryEndpoints) Delete(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, id)
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
