package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// SetSequenceHook makes fn run inside each of l's Sequence transactions, after the numbering
// statement and before the commit, with the runs it numbered: a test stalls a sequencer there, kills
// its connection, or fails it. It is set before l is used.
func SetSequenceHook(l *EventLog, fn func(ctx context.Context, tx pgx.Tx, runs []driver.SequencedRun) error) {
	l.beforeCommit = fn
}

// CacheHooks are a test's view of a store's cache listener: Dial runs before each connection
// attempt (it may change the address, or block), Connected once LISTEN is confirmed and the cache
// serves, Lost when the connection ended and the cache stopped serving, Invalidated after a
// notification was applied. Nil funcs are skipped.
type CacheHooks struct {
	Dial        func(cfg *pgx.ConnConfig)
	Connected   func(pid uint32)
	Lost        func(err error)
	Invalidated func(payload string)
}

func (h CacheHooks) internal() cacheHooks {
	return cacheHooks{dial: h.Dial, connected: h.Connected, lost: h.Lost, invalidated: h.Invalidated}
}

// SetCredentialCacheHooks sets the hooks of s's cache, before Listen runs.
func SetCredentialCacheHooks(s *CredentialStore, h CacheHooks) { s.cache.hooks = h.internal() }

// SetPinCacheHooks sets the hooks of s's cache, before Listen runs.
func SetPinCacheHooks(s *PinStore, h CacheHooks) { s.cache.hooks = h.internal() }

// CredentialCacheLen is how many credentials s's cache holds.
func CredentialCacheLen(s *CredentialStore) int { return s.cache.len() }

// PinCacheLen is how many pins s's cache holds.
func PinCacheLen(s *PinStore) int { return s.cache.len() }
