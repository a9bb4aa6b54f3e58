package versioning

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// MaxLicenseeLen bounds a licensee identifier in bytes. It leaves room for an environment-scoped
// identifier, the shape the Licensee hook is meant to return: apikey.Principal.Scope is up to
// len("sandbox:") + 255 bytes, and a bound below that refused every request of a licensee the
// issuer had accepted.
const MaxLicenseeLen = 512

// MaxPinList is the largest page PinStore.List returns.
const MaxPinList = 1000

// Pin is the version a licensee is pinned to, when it was pinned there, and where it came from. It
// is a plain value; the zero Pin is "no pin".
type Pin struct {
	Licensee string
	Version  string
	PinnedAt time.Time
	// Previous is the version the pin moved from at its last move to another version, "" when it
	// never moved. When it is older than Version, the last move was an upgrade, which the licensee
	// may roll back within Options.RollbackWindow of PinnedAt.
	Previous string
}

// PinStore keeps each licensee's pinned version. Implementations must be safe for concurrent use,
// decide SetIfAbsent and CompareAndSwap atomically, and never read the clock (the time is passed in).
// Times round-trip with at least millisecond precision, and every method that returns pins returns
// their Previous too. The conformance suite in versioning/pintest checks all of this.
//
// The Router is a store's caller, and checks the arguments before it calls, so a store need not
// check them again: every licensee is 1 to MaxLicenseeLen bytes of valid UTF-8 without NUL (List's
// after may also be ""); every version is a well-formed name (Version.Number), except
// CompareAndSwap's from, which is the version the store returned for the licensee; List's limit is
// in 1..MaxPinList. A store does not know the registry: whether a version is registered is the
// Router's business too. Code that calls a store itself must keep to the same rules.
type PinStore interface {
	// Get returns the licensee's pin, or an error wrapping ErrNotPinned.
	Get(ctx context.Context, licensee string) (Pin, error)
	// SetIfAbsent pins the licensee to version unless it already has a pin, and returns the pin in
	// force: the new one (created true, with Previous "") or the one it already had (created false).
	SetIfAbsent(ctx context.Context, licensee, version string, at time.Time) (pin Pin, created bool, err error)
	// CompareAndSwap moves the licensee's pin from version from to version to, with PinnedAt at and
	// Previous from, in the same atomic step. An unpinned licensee is ErrNotPinned; a pin on another
	// version than from is ErrPinConflict, and nothing changes. Swapping to the same version succeeds,
	// refreshes PinnedAt and keeps Previous.
	CompareAndSwap(ctx context.Context, licensee, from, to string, at time.Time) (Pin, error)
	// Delete removes the licensee's pin, if any (the sandbox's reset), Previous included; the next
	// request pins afresh.
	Delete(ctx context.Context, licensee string) error
	// List returns up to limit pins ordered by licensee (bytewise), starting after the licensee
	// after ("" for the start; not necessarily a pinned one). A non-empty version keeps only the
	// pins on it (Router.Pins).
	List(ctx context.Context, version, after string, limit int) ([]Pin, error)
}

// checkPin reports whether the Router may pass licensee and version to a PinStore (see PinStore).
// The error wraps ErrInvalidPin and does not echo the licensee.
func checkPin(licensee, version string) error {
	if err := checkLicensee(licensee); err != nil {
		return err
	}
	if _, ok := parseName(version); !ok {
		return fmt.Errorf("%w: version is not a well-formed name", ErrInvalidPin)
	}
	return nil
}

// checkLicensee reports whether the Router may pass licensee to a PinStore (see checkPin).
func checkLicensee(licensee string) error {
	switch {
	case licensee == "":
		return fmt.Errorf("%w: empty licensee", ErrInvalidPin)
	case len(licensee) > MaxLicenseeLen:
		return fmt.Errorf("%w: licensee longer than %d bytes", ErrInvalidPin, MaxLicenseeLen)
	case !utf8.ValidString(licensee) || strings.IndexByte(licensee, 0) >= 0:
		return fmt.Errorf("%w: licensee is not valid UTF-8 text", ErrInvalidPin)
	}
	return nil
}

// checkList reports whether the Router may pass List's arguments to a PinStore: a well-formed
// version or "", an after that is "" or a valid licensee, and a limit in 1..MaxPinList.
func checkList(version, after string, limit int) error {
	if after != "" {
		if err := checkLicensee(after); err != nil {
			return err
		}
	}
	if version != "" {
		if _, ok := parseName(version); !ok {
			return fmt.Errorf("%w: version is not a well-formed name", ErrInvalidPin)
		}
	}
	if limit < 1 || limit > MaxPinList {
		return fmt.Errorf("%w: list limit %d outside 1..%d", ErrInvalidPin, limit, MaxPinList)
	}
	return nil
}

// MemoryPinStore is the in-memory PinStore, the default of Options.Pins. Its pins live as long as
// the process: a service with several replicas or restarts needs a shared store (pgstore.PinStore).
// It is safe for concurrent use; the zero value is an empty store ready to use. It holds one small
// entry per licensee and never evicts one (a pin is a contract, not a cache). Unlike other stores it
// checks its arguments as the Router does (ErrInvalidPin), for code that uses it directly.
type MemoryPinStore struct {
	mu   sync.Mutex
	pins map[string]Pin
}

var _ PinStore = (*MemoryPinStore)(nil)

// NewMemoryPinStore returns an empty MemoryPinStore.
func NewMemoryPinStore() *MemoryPinStore { return &MemoryPinStore{} }

// Get implements PinStore.
func (m *MemoryPinStore) Get(ctx context.Context, licensee string) (Pin, error) {
	if err := ctx.Err(); err != nil {
		return Pin{}, err
	}
	if err := checkLicensee(licensee); err != nil {
		return Pin{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pins[licensee]
	if !ok {
		return Pin{}, ErrNotPinned
	}
	return p, nil
}

// SetIfAbsent implements PinStore.
func (m *MemoryPinStore) SetIfAbsent(ctx context.Context, licensee, version string, at time.Time) (Pin, bool, error) {
	if err := ctx.Err(); err != nil {
		return Pin{}, false, err
	}
	if err := checkPin(licensee, version); err != nil {
		return Pin{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.pins[licensee]; ok {
		return p, false, nil
	}
	if m.pins == nil {
		m.pins = make(map[string]Pin)
	}
	p := Pin{Licensee: licensee, Version: version, PinnedAt: at}
	m.pins[licensee] = p
	return p, true, nil
}

// CompareAndSwap implements PinStore.
func (m *MemoryPinStore) CompareAndSwap(ctx context.Context, licensee, from, to string, at time.Time) (Pin, error) {
	if err := ctx.Err(); err != nil {
		return Pin{}, err
	}
	if err := checkPin(licensee, to); err != nil {
		return Pin{}, err
	}
	if _, ok := parseName(from); !ok {
		return Pin{}, fmt.Errorf("%w: version is not a well-formed name", ErrInvalidPin)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pins[licensee]
	switch {
	case !ok:
		return Pin{}, ErrNotPinned
	case p.Version != from:
		return Pin{}, fmt.Errorf("%w: pinned to %s, not %s", ErrPinConflict, p.Version, from)
	}
	if from != to {
		p.Previous = from
	}
	p.Version, p.PinnedAt = to, at
	m.pins[licensee] = p
	return p, nil
}

// Delete implements PinStore.
func (m *MemoryPinStore) Delete(ctx context.Context, licensee string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkLicensee(licensee); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pins, licensee)
	return nil
}

// List implements PinStore. It scans every pin, which is fine for the numbers of licensees a
// process holds in memory.
func (m *MemoryPinStore) List(ctx context.Context, version, after string, limit int) ([]Pin, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkList(version, after, limit); err != nil {
		return nil, err
	}
	m.mu.Lock()
	out := make([]Pin, 0, min(limit, len(m.pins)))
	for _, p := range m.pins {
		if (version == "" || p.Version == version) && p.Licensee > after {
			out = append(out, p)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Pin) int { return cmp.Compare(a.Licensee, b.Licensee) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
