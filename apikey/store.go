package apikey

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Errors of a CredentialStore. Implementations translate their drivers' errors into these.
var (
	// ErrCredentialNotFound: no credential has that hash or ID.
	ErrCredentialNotFound = errors.New("apikey: credential not found")
	// ErrDuplicateCredential: a credential with that ID or hash already exists.
	ErrDuplicateCredential = errors.New("apikey: duplicate credential")
	// ErrInvalidCredential: a credential lacks an ID, a licensee or a valid environment.
	ErrInvalidCredential = errors.New("apikey: invalid credential")
	// ErrInvalidEnvironment: an environment is neither Sandbox nor Live.
	ErrInvalidEnvironment = errors.New("apikey: invalid environment")
	// ErrZeroRevocation: a revocation instant is the zero time, which would read as "not revoked".
	ErrZeroRevocation = errors.New("apikey: zero revocation time")
)

// Credential is a stored API key: its hash and what it grants. The key itself is never stored. It is a
// plain value; the zero Credential fails Validate.
type Credential struct {
	// ID names the key ("key_…"); it is not secret and is what operators revoke by.
	ID string
	// Hash is the SHA-256 of the key (HashKey).
	Hash KeyHash
	// Licensee and Environment are what the key authenticates as.
	Licensee    string
	Environment Environment
	// CreatedAt is when the key was issued.
	CreatedAt time.Time
	// ExpiresAt is when the key stops working; zero means never.
	ExpiresAt time.Time
	// RevokedAt is when the key was (or will be) revoked; zero means not revoked.
	RevokedAt time.Time
}

// Validate reports what is missing from c, without echoing anything secret.
func (c Credential) Validate() error {
	switch {
	case c.ID == "":
		return fmt.Errorf("%w: empty ID", ErrInvalidCredential)
	case c.Licensee == "":
		return fmt.Errorf("%w: %s has no licensee", ErrInvalidCredential, c.ID)
	case !c.Environment.Valid():
		return fmt.Errorf("%w: %s has environment %q", ErrInvalidCredential, c.ID, c.Environment)
	case c.Hash == KeyHash{}:
		return fmt.Errorf("%w: %s has no hash", ErrInvalidCredential, c.ID)
	}
	return nil
}

// CredentialStore keeps credentials by hash. Implementations must be safe for concurrent use, must
// not read the clock (every time is passed in) and are checked by apikey/credentialtest.
type CredentialStore interface {
	// Put stores a new credential. It returns an error wrapping ErrInvalidCredential when
	// c.Validate fails, and ErrDuplicateCredential when a credential with c's ID or hash exists.
	Put(ctx context.Context, c Credential) error
	// Get returns the credential whose key hashes to h, or ErrCredentialNotFound. It returns expired
	// and revoked credentials too: deciding whether one is usable needs the clock, which the caller has.
	Get(ctx context.Context, h KeyHash) (Credential, error)
	// Revoke marks the credential with the given ID revoked from at on. Revoking again keeps the earlier
	// of the two instants, so a later call can bring a scheduled revocation forward but never postpone
	// or undo one. It returns ErrCredentialNotFound for an unknown ID and ErrZeroRevocation for a zero at.
	Revoke(ctx context.Context, id string, at time.Time) error
	// RevokeAll revokes, as Revoke does, every credential of licensee in env, and returns how many
	// credentials it changed. It ends an evaluation in one call.
	RevokeAll(ctx context.Context, licensee string, env Environment, at time.Time) (int, error)
}

// MemoryCredentialStore is the in-memory CredentialStore: the default, for tests and single-process
// deployments. The zero value is empty and ready to use. It is safe for concurrent use and must not be
// copied after first use.
type MemoryCredentialStore struct {
	mu     sync.RWMutex
	byHash map[KeyHash]*Credential
	byID   map[string]*Credential
}

var _ CredentialStore = (*MemoryCredentialStore)(nil)

// NewMemoryCredentialStore returns an empty store.
func NewMemoryCredentialStore() *MemoryCredentialStore { return &MemoryCredentialStore{} }

// Put implements CredentialStore.
func (m *MemoryCredentialStore) Put(ctx context.Context, c Credential) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byHash == nil {
		m.byHash = make(map[KeyHash]*Credential)
		m.byID = make(map[string]*Credential)
	}
	if _, ok := m.byID[c.ID]; ok {
		return fmt.Errorf("%w: ID %s", ErrDuplicateCredential, c.ID)
	}
	if _, ok := m.byHash[c.Hash]; ok {
		return fmt.Errorf("%w: hash of %s", ErrDuplicateCredential, c.ID)
	}
	stored := c
	m.byHash[c.Hash] = &stored
	m.byID[c.ID] = &stored
	return nil
}

// Get implements CredentialStore.
func (m *MemoryCredentialStore) Get(ctx context.Context, h KeyHash) (Credential, error) {
	if err := ctx.Err(); err != nil {
		return Credential{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.byHash[h]
	if !ok {
		return Credential{}, ErrCredentialNotFound
	}
	return *c, nil
}

// Revoke implements CredentialStore.
func (m *MemoryCredentialStore) Revoke(ctx context.Context, id string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if at.IsZero() {
		return ErrZeroRevocation
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.byID[id]
	if !ok {
		return ErrCredentialNotFound
	}
	revokeAt(c, at)
	return nil
}

// RevokeAll implements CredentialStore.
func (m *MemoryCredentialStore) RevokeAll(ctx context.Context, licensee string, env Environment, at time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if at.IsZero() {
		return 0, ErrZeroRevocation
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.byID {
		if c.Licensee == licensee && c.Environment == env && revokeAt(c, at) {
			n++
		}
	}
	return n, nil
}

// revokeAt applies the earlier-wins rule and reports whether c changed.
func revokeAt(c *Credential, at time.Time) bool {
	if !c.RevokedAt.IsZero() && !at.Before(c.RevokedAt) {
		return false
	}
	c.RevokedAt = at
	return true
}
