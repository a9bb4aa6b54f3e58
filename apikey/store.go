package apikey

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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
	// ErrCredentialEnded: a key to roll has ended (expired or revoked), or is already set to end (it
	// was rolled or revoked with a later instant): a key is rolled once.
	ErrCredentialEnded = errors.New("apikey: credential has ended")
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
	// Permissions restrict the key to these permissions ("orders:write", see Require); nil means
	// the full key, which may do everything its licensee may. A restricted key has at least one.
	Permissions []string
	// LastUsedAt is when the key last authenticated a request, to the minute (see Issuer.Run);
	// zero means never. Stores keep the latest instant they were told.
	LastUsedAt time.Time
}

// EndsAt is when the key stops working, the earlier of its expiry and its revocation; zero means
// never.
func (c Credential) EndsAt() time.Time {
	switch {
	case c.ExpiresAt.IsZero():
		return c.RevokedAt
	case c.RevokedAt.IsZero() || c.ExpiresAt.Before(c.RevokedAt):
		return c.ExpiresAt
	}
	return c.RevokedAt
}

// activeAt reports whether the key works at t.
func (c Credential) activeAt(t time.Time) bool {
	end := c.EndsAt()
	return end.IsZero() || t.Before(end)
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
	case c.Permissions != nil && len(c.Permissions) == 0:
		return fmt.Errorf("%w: %s is restricted to no permission", ErrInvalidCredential, c.ID)
	}
	for _, p := range c.Permissions {
		if err := checkPermission(p); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidCredential, c.ID, err)
		}
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
	// Lookup returns the credential with the given ID, or ErrCredentialNotFound.
	Lookup(ctx context.Context, id string) (Credential, error)
	// List returns the credentials of licensee in env that still work at at (neither expired nor
	// revoked by then), oldest first.
	List(ctx context.Context, licensee string, env Environment, at time.Time) ([]Credential, error)
	// Roll stores next, as Put does, and revokes the credential with the ID old at end, as Revoke
	// does, in one step: both happen or neither does. It returns ErrCredentialNotFound for an
	// unknown old, and ErrCredentialEnded when old no longer works at next.CreatedAt or already has a
	// revocation instant (it was rolled or revoked before): a key is rolled once, so concurrent rolls
	// of one key replace it once.
	Roll(ctx context.Context, old string, next Credential, end time.Time) error
	// MarkUsed records when each credential, by ID, was last used: a credential's LastUsedAt becomes
	// the later of its own and the one given. Unknown IDs are skipped.
	MarkUsed(ctx context.Context, used map[string]time.Time) error
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
	return m.putLocked(c)
}

// putLocked is Put under m.mu, for a valid c.
func (m *MemoryCredentialStore) putLocked(c Credential) error {
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
	stored := c.clone()
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
	return c.clone(), nil
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

// Lookup implements CredentialStore.
func (m *MemoryCredentialStore) Lookup(ctx context.Context, id string) (Credential, error) {
	if err := ctx.Err(); err != nil {
		return Credential{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.byID[id]
	if !ok {
		return Credential{}, ErrCredentialNotFound
	}
	return c.clone(), nil
}

// List implements CredentialStore.
func (m *MemoryCredentialStore) List(ctx context.Context, licensee string, env Environment, at time.Time) ([]Credential, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	var out []Credential
	for _, c := range m.byID {
		if c.Licensee == licensee && c.Environment == env && c.activeAt(at) {
			out = append(out, c.clone())
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(a, b Credential) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// Roll implements CredentialStore.
func (m *MemoryCredentialStore) Roll(ctx context.Context, old string, next Credential, end time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if end.IsZero() {
		return ErrZeroRevocation
	}
	if err := next.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.byID[old]
	switch {
	case !ok:
		return ErrCredentialNotFound
	case !c.activeAt(next.CreatedAt) || !c.RevokedAt.IsZero():
		return fmt.Errorf("%w: %s", ErrCredentialEnded, old)
	}
	if err := m.putLocked(next); err != nil {
		return err
	}
	revokeAt(c, end)
	return nil
}

// MarkUsed implements CredentialStore.
func (m *MemoryCredentialStore) MarkUsed(ctx context.Context, used map[string]time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, at := range used {
		if c, ok := m.byID[id]; ok && at.After(c.LastUsedAt) {
			c.LastUsedAt = at
		}
	}
	return nil
}

// clone copies c, its permissions included, so a caller cannot change what the store holds.
func (c *Credential) clone() Credential {
	out := *c
	out.Permissions = slices.Clone(c.Permissions)
	return out
}

// revokeAt applies the earlier-wins rule and reports whether c changed.
func revokeAt(c *Credential, at time.Time) bool {
	if !c.RevokedAt.IsZero() && !at.Before(c.RevokedAt) {
		return false
	}
	c.RevokedAt = at
	return true
}
