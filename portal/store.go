package portal

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/svcplatform/conventions/apikey"
)

// ErrNotFound is what a Store returns for a key it does not hold, or holds past its ExpiresAt.
var ErrNotFound = errors.New("portal: no such link or session")

// Session is what a portal link and the session it opens are worth: whose portal it is and what it
// may do there. The portal acts as Licensee in Environment, with the Permissions of the API key
// that minted the link (nil: every permission) and at the API Version that key's request was served
// at, so that the portal can do nothing the key could not. It is a plain value; the zero Session
// belongs to nobody, and a Portal refuses to mint a link for it.
type Session struct {
	// Licensee and Environment are the owner: the principal of the key that minted the link.
	Licensee    string             `json:"licensee"`
	Environment apikey.Environment `json:"environment"`
	// KeyID names that key, for the request log: the portal's API requests are recorded as its.
	KeyID string `json:"key_id,omitempty"`
	// Permissions are that key's permissions; nil means the full key's, and an empty, non-nil
	// slice none at all. A Store must keep the difference (portaltest checks it): in this JSON form
	// they are null and [], which is why the member is never omitted.
	Permissions []string `json:"permissions"`
	// Version is the API version the portal's requests are made at: the one the minting request
	// was served at, which is the licensee's pinned version, so that the portal never moves a pin.
	// Empty means paths without a version segment.
	Version string `json:"version,omitempty"`
	// ExpiresAt is when the link, or the session, stops working.
	ExpiresAt time.Time `json:"expires_at"`
}

// principal is the API principal the portal's requests are made as.
func (s Session) principal() apikey.Principal {
	return apikey.Principal{Licensee: s.Licensee, Environment: s.Environment, KeyID: s.KeyID,
		Permissions: s.Permissions}
}

// Store keeps the portal's links and sessions, each under the key the Portal derives from its secret
// (a SHA-256 in hex: the store never sees a secret that works), until its ExpiresAt. Replicas that
// serve one portal share one Store (pgstore.PortalStore, redisstore.PortalStore); NewMemoryStore's
// serves one process. The portaltest package holds every Store to this contract.
//
// A Store is safe for concurrent use. It gives back every field of a Session as it was put
// (ExpiresAt to the microsecond at least), and Permissions nil exactly when they were nil: an empty list that came back nil would give a key
// without permissions the full key's. Its methods return ErrNotFound as documented, and any other
// error when the store could not be read or written, or ctx is done: the Portal then refuses to open
// a session (fail closed) and answers 503.
type Store interface {
	// Put stores s under key until s.ExpiresAt, replacing what key held. now is the caller's
	// clock, for stores that keep a time to live rather than a deadline; an s that expired at or
	// before now still replaces what key held, and is never found.
	Put(ctx context.Context, key string, s Session, now time.Time) error
	// Get returns what key holds, or ErrNotFound when it holds nothing or it expired at or before
	// now.
	Get(ctx context.Context, key string, now time.Time) (Session, error)
	// Take returns what key holds and removes it, atomically: of any number of concurrent Takes of
	// one key (on any replica), exactly one gets the session and the others ErrNotFound. An
	// expired entry is ErrNotFound, as for Get. A link is used once through it.
	Take(ctx context.Context, key string, now time.Time) (Session, error)
	// Delete removes what key holds; a key that holds nothing is not an error.
	Delete(ctx context.Context, key string) error
}

// MemoryStore is the in-memory Store: one process, lost at a restart. Expired entries are swept
// every 256 writes, so the map holds little more than the links and sessions still alive. It is safe
// for concurrent use. Build one with NewMemoryStore; the zero value is not usable (its Put panics on
// the nil map).
type MemoryStore struct {
	mu      sync.Mutex
	entries map[string]Session
	writes  int
}

// NewMemoryStore returns an empty in-memory Store.
func NewMemoryStore() *MemoryStore { return &MemoryStore{entries: make(map[string]Session)} }

var _ Store = (*MemoryStore)(nil)

// sweepEvery is how many writes pass between two sweeps of the expired entries.
const sweepEvery = 256

// Put implements Store.
func (m *MemoryStore) Put(ctx context.Context, key string, s Session, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.Permissions = slices.Clone(s.Permissions)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	if m.writes%sweepEvery == 0 {
		for k, e := range m.entries {
			if !e.ExpiresAt.After(now) {
				delete(m.entries, k)
			}
		}
	}
	m.entries[key] = s
	return nil
}

// Get implements Store.
func (m *MemoryStore) Get(ctx context.Context, key string, now time.Time) (Session, error) {
	if err := ctx.Err(); err != nil {
		return Session{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.entries[key]
	if !ok || !s.ExpiresAt.After(now) {
		return Session{}, ErrNotFound
	}
	s.Permissions = slices.Clone(s.Permissions)
	return s, nil
}

// Take implements Store.
func (m *MemoryStore) Take(ctx context.Context, key string, now time.Time) (Session, error) {
	if err := ctx.Err(); err != nil {
		return Session{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.entries[key]
	delete(m.entries, key)
	if !ok || !s.ExpiresAt.After(now) {
		return Session{}, ErrNotFound
	}
	return s, nil
}

// Delete implements Store.
func (m *MemoryStore) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, key)
	return nil
}
