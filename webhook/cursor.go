package webhook

import (
	"context"
	"errors"
	"sync"
)

// Errors a CursorStore returns. Implementations translate their drivers' errors into these.
var (
	// ErrCursorConflict: Advance found the cursor somewhere other than from — another process (or
	// another delivery) moved it first. Nothing was changed; read the cursor again and decide anew.
	ErrCursorConflict = errors.New("webhook: cursor moved concurrently")
	// ErrCursorBackward: a cursor was asked to move to a sequence not after from. A Tracker never
	// asks that of its CursorStore; MemoryCursorStore, and entry points a store offers its own
	// callers (pgstore's CursorStore.AdvanceTx), answer it to code that does.
	ErrCursorBackward = errors.New("webhook: a cursor only moves forward")
	// ErrCursorRange: as ErrCursorBackward, for a sequence above MaxSequence.
	ErrCursorRange = errors.New("webhook: sequence above MaxSequence")
)

// CursorStore keeps, per stream, the sequence of the last event the consumer processed. A stream is one
// webhook endpoint. 0 means nothing processed yet (sequences start at 1).
//
// Implementations must be safe for concurrent use by several processes sharing the store: Advance is
// a compare-and-set, so two deliveries racing on one stream never both move it. Run
// webhook/cursortest.Run against every implementation.
//
// The Tracker is a store's caller, and it only ever asks for a move forward: from < to ≤ MaxSequence
// (a Step's From and its Event.Sequence, which a ProcessFunc in TrackerOptions.ProcessAdvances mode
// passes on). A store may rely on that and need not check it; code that calls a store itself must
// keep to it.
type CursorStore interface {
	// Get returns the stream's cursor, or 0 when the stream has none.
	Get(ctx context.Context, stream string) (uint64, error)
	// Advance moves the stream's cursor from from to to (from < to ≤ MaxSequence) if and only if it
	// is at from now, and otherwise changes nothing and returns ErrCursorConflict. from 0 matches a
	// stream without a cursor.
	Advance(ctx context.Context, stream string, from, to uint64) error
}

var _ CursorStore = (*MemoryCursorStore)(nil)

// MemoryCursorStore is a CursorStore in process memory, for tests and single-process consumers that
// may reprocess after a restart. The zero value is empty and ready to use; it is safe for concurrent
// use. It must not be copied after first use. Unlike other stores it checks Advance's arguments
// (ErrCursorBackward, ErrCursorRange), for code that uses it directly.
type MemoryCursorStore struct {
	mu      sync.Mutex
	cursors map[string]uint64
}

// Get returns the stream's cursor, or 0.
func (s *MemoryCursorStore) Get(ctx context.Context, stream string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cursors[stream], nil
}

// Advance moves the stream's cursor from from to to, atomically.
func (s *MemoryCursorStore) Advance(ctx context.Context, stream string, from, to uint64) error {
	if err := checkAdvance(from, to); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cursors[stream] != from {
		return ErrCursorConflict
	}
	if s.cursors == nil {
		s.cursors = make(map[string]uint64)
	}
	s.cursors[stream] = to
	return nil
}

// checkAdvance reports a move the CursorStore contract rules out: ErrCursorBackward when to ≤ from,
// ErrCursorRange when to is above MaxSequence, else nil.
func checkAdvance(from, to uint64) error {
	if to <= from {
		return ErrCursorBackward
	}
	if to > MaxSequence {
		return ErrCursorRange
	}
	return nil
}
