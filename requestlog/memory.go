package requestlog

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultMaxEntriesPerOwner bounds a MemoryStore's entries of one owner when
// MemoryStoreOptions.MaxEntriesPerOwner is 0.
const DefaultMaxEntriesPerOwner = 10_000

// MemoryStoreOptions configure a MemoryStore. A nil *MemoryStoreOptions and the zero value mean the
// defaults.
type MemoryStoreOptions struct {
	// MaxEntriesPerOwner bounds the entries kept for one owner (requests that were not authenticated
	// count as one owner, ""): past it, that owner's oldest entry leaves to make room, and no other
	// owner's. Zero means DefaultMaxEntriesPerOwner; negative is an error.
	MaxEntriesPerOwner int
}

// MemoryStore is the in-memory Store, the Log's default: for tests, the sandbox and a service of one
// replica that accepts losing its log at a restart. Each owner's entries are bounded
// (MemoryStoreOptions.MaxEntriesPerOwner), so one owner's traffic never evicts another's. It is safe
// for concurrent use. The zero value is not usable: its methods return an error that wraps
// ErrNotBuilt. Build one with NewMemoryStore.
type MemoryStore struct {
	mu     sync.Mutex
	max    int
	owners map[string]*ownerLog
}

// ownerLog is one owner's entries, oldest first (At, then RequestID), and their IDs. The entries are
// all[head:]: evicting the oldest moves head, and the array is compacted only when it is full, so
// that an owner at its bound costs no allocation and an amortized constant copy per insert.
type ownerLog struct {
	all  []Entry
	head int
	ids  map[string]time.Time
}

// entries returns o's entries.
func (o *ownerLog) entries() []Entry { return o.all[o.head:] }

// insert adds e in order, and evicts the oldest entry past limit.
func (o *ownerLog) insert(e Entry, limit int) {
	if len(o.all) == cap(o.all) {
		if o.head > 0 {
			n := copy(o.all, o.all[o.head:])
			clear(o.all[n:])
			o.all, o.head = o.all[:n], 0
		} else {
			// Doubled, not append's quarter for large slices: at the bound, a compaction then comes
			// once per limit inserts, one copy per insert.
			o.all = slices.Grow(o.all, max(len(o.all), 16))
		}
	}
	live := o.entries()
	// Entries arrive roughly in order: the search ends near the tail.
	i := len(live)
	if i > 0 && before(&e, &live[i-1]) {
		i, _ = slices.BinarySearchFunc(live, e, compareEntries)
	}
	o.all = slices.Insert(o.all, o.head+i, e)
	o.ids[e.RequestID] = e.At
	if len(o.all)-o.head > limit {
		o.drop(1)
	}
}

// drop evicts the n oldest entries.
func (o *ownerLog) drop(n int) {
	for _, e := range o.all[o.head : o.head+n] {
		delete(o.ids, e.RequestID)
	}
	clear(o.all[o.head : o.head+n])
	o.head += n
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore; nil opts mean the defaults.
func NewMemoryStore(opts *MemoryStoreOptions) (*MemoryStore, error) {
	s := &MemoryStore{max: DefaultMaxEntriesPerOwner, owners: make(map[string]*ownerLog)}
	if opts != nil {
		switch {
		case opts.MaxEntriesPerOwner < 0:
			return nil, errors.New("requestlog: NewMemoryStore: negative MaxEntriesPerOwner")
		case opts.MaxEntriesPerOwner > 0:
			s.max = opts.MaxEntriesPerOwner
		}
	}
	return s, nil
}

// before reports whether a comes before b in a log's order, oldest first.
func before(a, b *Entry) bool {
	if c := a.At.Compare(b.At); c != 0 {
		return c < 0
	}
	return a.RequestID < b.RequestID
}

// compareEntries orders entries oldest first, for slices.BinarySearchFunc.
func compareEntries(a, b Entry) int {
	if c := a.At.Compare(b.At); c != 0 {
		return c
	}
	return strings.Compare(a.RequestID, b.RequestID)
}

// Insert implements Store.
func (s *MemoryStore) Insert(ctx context.Context, entries []Entry) error {
	if s == nil || s.owners == nil {
		return errZeroMemoryStore
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		o := s.owners[e.Owner]
		if o == nil {
			o = &ownerLog{ids: make(map[string]time.Time)}
			s.owners[e.Owner] = o
		}
		if _, dup := o.ids[e.RequestID]; dup {
			continue
		}
		o.insert(e, s.max)
	}
	return nil
}

// find returns the index of o's entry with the request ID, or -1.
func (o *ownerLog) find(requestID string) int {
	at, ok := o.ids[requestID]
	if !ok {
		return -1
	}
	i, found := slices.BinarySearchFunc(o.entries(), Entry{At: at, RequestID: requestID}, compareEntries)
	if !found {
		return -1
	}
	return i
}

// Get implements Store.
func (s *MemoryStore) Get(ctx context.Context, owner, requestID string) (Entry, error) {
	if s == nil || s.owners == nil {
		return Entry{}, errZeroMemoryStore
	}
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.owners[owner]; o != nil {
		if i := o.find(requestID); i >= 0 {
			return o.entries()[i], nil
		}
	}
	return Entry{}, ErrNotFound
}

// matches reports whether e passes q's filters (not its cursor).
func (q *Query) matches(e *Entry) bool {
	return (q.Status == 0 || e.Status == q.Status) &&
		(q.StatusClass == 0 || e.Status/100 == q.StatusClass) &&
		(q.Code == "" || e.Code == q.Code) &&
		(q.KeyID == "" || e.KeyID == q.KeyID) &&
		(q.Route == "" || e.Route == q.Route) &&
		(q.Since.IsZero() || !e.At.Before(q.Since)) &&
		(q.Until.IsZero() || e.At.Before(q.Until))
}

// List implements Store.
func (s *MemoryStore) List(ctx context.Context, q Query) ([]Entry, bool, error) {
	if s == nil || s.owners == nil {
		return nil, false, errZeroMemoryStore
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.owners[q.Owner]
	if o == nil {
		return nil, false, nil
	}
	entries := o.entries()
	start := len(entries) - 1
	if q.After != "" {
		i := o.find(q.After)
		if i < 0 {
			return nil, false, nil
		}
		start = i - 1
	}
	var out []Entry
	for i := start; i >= 0; i-- {
		e := &entries[i]
		if !q.Since.IsZero() && e.At.Before(q.Since) {
			break // older entries are older still
		}
		if !q.matches(e) {
			continue
		}
		if len(out) == q.Limit {
			return out, true, nil
		}
		out = append(out, *e)
	}
	return out, false, nil
}

// DeleteBefore implements Store.
func (s *MemoryStore) DeleteBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	if s == nil || s.owners == nil {
		return 0, errZeroMemoryStore
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for owner, o := range s.owners {
		entries := o.entries()
		k := 0
		for k < len(entries) && n+k < limit && entries[k].At.Before(t) {
			k++
		}
		o.drop(k)
		n += k
		if len(o.entries()) == 0 {
			delete(s.owners, owner)
		}
		if n == limit {
			break
		}
	}
	return n, nil
}
