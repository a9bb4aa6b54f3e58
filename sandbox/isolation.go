package sandbox

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
)

// ScopedKey returns a storage key inside p's scope: "<environment>/<licensee>/<part>/…", each element
// path-escaped so that no part can contain '/' and reach into another scope. Every record a product
// stores under a ScopedKey is invisible to a key of the other environment and to other licensees.
// ScopedKey panics when p is not a valid principal: storing data for nobody is a programming error,
// and failing loudly is what stops a team from forgetting the environment.
func ScopedKey(p Principal, parts ...string) string {
	var b strings.Builder
	b.WriteString(ScopePrefix(p))
	for i, part := range parts {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(url.PathEscape(part))
	}
	return b.String()
}

// ScopePrefix returns the prefix every ScopedKey of p starts with, "<environment>/<licensee>/", for
// listing or deleting a scope's data. It panics when p is not a valid principal.
func ScopePrefix(p Principal) string {
	if !p.Valid() {
		panic("sandbox: ScopedKey needs an authenticated principal (licensee and environment)")
	}
	return string(p.Environment) + "/" + url.PathEscape(p.Licensee) + "/"
}

// ScopedKeyFromContext is ScopedKey for the principal in ctx; it returns ErrNoPrincipal instead of
// panicking when there is none.
func ScopedKeyFromContext(ctx context.Context, parts ...string) (string, error) {
	p, ok := FromContext(ctx)
	if !ok {
		return "", ErrNoPrincipal
	}
	return ScopedKey(p, parts...), nil
}

// ErrNotFound: a KV has no value under the key (or, through Scoped, none in the caller's scope).
var ErrNotFound = errors.New("sandbox: not found")

// ErrNotSandbox: a sandbox-only operation (Scoped.Reset) was asked for with a production principal.
var ErrNotSandbox = errors.New("sandbox: operation is for sandbox credentials only")

// KV is the shape of a simple key-value store a product team might keep its records in; Scoped wraps
// one so that every key is environment- and licensee-scoped. Implementations must be safe for
// concurrent use.
type KV[V any] interface {
	// Get returns the value under key, or ErrNotFound.
	Get(ctx context.Context, key string) (V, error)
	// Put stores v under key, replacing any value.
	Put(ctx context.Context, key string, v V) error
	// Delete removes key; removing an absent key is not an error.
	Delete(ctx context.Context, key string) error
	// DeletePrefix removes every key that starts with prefix and returns how many it removed.
	DeletePrefix(ctx context.Context, prefix string) (int, error)
}

// Scoped is a KV whose keys are scoped by the principal in each call's context: handlers pass their
// own keys ("ord_123") and can neither forget the environment nor reach another scope. Without a
// principal in the context every method returns ErrNoPrincipal. A Scoped is safe for concurrent use
// when its KV is. Build one with NewScoped; the zero value is not usable: every method returns
// ErrNotBuilt.
type Scoped[V any] struct {
	kv KV[V]
}

// NewScoped returns kv scoped by the context's principal; a nil kv is an error.
func NewScoped[V any](kv KV[V]) (*Scoped[V], error) {
	if kv == nil {
		return nil, errors.New("sandbox: NewScoped needs a KV")
	}
	return &Scoped[V]{kv: kv}, nil
}

// Get returns the value under key in the caller's scope, or ErrNotFound.
func (s *Scoped[V]) Get(ctx context.Context, key string) (V, error) {
	if s == nil || s.kv == nil {
		var zero V
		return zero, errZeroScoped
	}
	k, err := ScopedKeyFromContext(ctx, key)
	if err != nil {
		var zero V
		return zero, err
	}
	return s.kv.Get(ctx, k)
}

// Put stores v under key in the caller's scope.
func (s *Scoped[V]) Put(ctx context.Context, key string, v V) error {
	if s == nil || s.kv == nil {
		return errZeroScoped
	}
	k, err := ScopedKeyFromContext(ctx, key)
	if err != nil {
		return err
	}
	return s.kv.Put(ctx, k, v)
}

// Delete removes key from the caller's scope.
func (s *Scoped[V]) Delete(ctx context.Context, key string) error {
	if s == nil || s.kv == nil {
		return errZeroScoped
	}
	k, err := ScopedKeyFromContext(ctx, key)
	if err != nil {
		return err
	}
	return s.kv.Delete(ctx, k)
}

// Reset deletes all of the caller's data in this store and returns how many values it removed. It is
// for sandbox principals only (ErrNotSandbox otherwise): it is how a Controls Reset hook empties an
// evaluation, and it can never touch production data.
func (s *Scoped[V]) Reset(ctx context.Context) (int, error) {
	if s == nil || s.kv == nil {
		return 0, errZeroScoped
	}
	p, ok := FromContext(ctx)
	if !ok {
		return 0, ErrNoPrincipal
	}
	if p.Environment != Sandbox {
		return 0, ErrNotSandbox
	}
	return s.kv.DeletePrefix(ctx, ScopePrefix(p))
}

// MemoryKV is an in-memory KV. The zero value is empty and ready to use. It is safe for concurrent use
// and must not be copied after first use.
type MemoryKV[V any] struct {
	mu sync.RWMutex
	m  map[string]V
}

var _ KV[int] = (*MemoryKV[int])(nil)

// Get implements KV.
func (m *MemoryKV[V]) Get(ctx context.Context, key string) (V, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v, ok := m.m[key]
	if !ok {
		return v, ErrNotFound
	}
	return v, nil
}

// Put implements KV.
func (m *MemoryKV[V]) Put(ctx context.Context, key string, v V) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[string]V)
	}
	m.m[key] = v
	return nil
}

// Delete implements KV.
func (m *MemoryKV[V]) Delete(ctx context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
	return nil
}

// DeletePrefix implements KV.
func (m *MemoryKV[V]) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k := range m.m {
		if strings.HasPrefix(k, prefix) {
			delete(m.m, k)
			n++
		}
	}
	return n, nil
}

// Len returns the number of values stored, in every scope.
func (m *MemoryKV[V]) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.m)
}
