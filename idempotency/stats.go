package idempotency

import "sync/atomic"

// Stats counts what a Middleware did since New. Read them with Middleware.Stats and export them to
// your metrics system; each is monotonic. It is a plain value; the zero value is a Middleware that
// has counted nothing yet.
type Stats struct {
	// Executed: claims won, so the handler (or Begin's caller) ran.
	Executed uint64
	// Replayed: requests answered with a stored response.
	Replayed uint64
	// Conflicts: requests answered 409 because the key was in flight.
	Conflicts uint64
	// Reused: requests answered 422 because the key was used with a different request.
	Reused uint64
	// Rejected: requests refused before a claim: missing or malformed key, no scope, body too large
	// or unreadable.
	Rejected uint64
	// StoreErrors: failed store calls (claim, renew, complete, release), however they were answered,
	// and stored records refused under Options.Sealer (ErrRecordRefused).
	StoreErrors uint64
	// FailedOpen: requests run without idempotency because the store failed and FailOpen is set.
	FailedOpen uint64
	// LeaseLost: completions, releases or renewals refused because a newer claim took the key over.
	LeaseLost uint64
	// Released: claims released (handler panics, ReleaseServerErrors, Attempt.Release, a handler
	// whose own SQL aborted its transaction in transactional mode).
	Released uint64
	// Panics: handlers that panicked.
	Panics uint64
	// Renewals: successful lease renewals.
	Renewals uint64
	// QuotaExceeded: requests answered 429 because their scope held as many records as the store
	// allows one scope.
	QuotaExceeded uint64
	// CompletionRetries: tries, after the first, to store a response that the store had refused.
	CompletionRetries uint64
	// Pending: responses being retried now, each holding its key in flight (a gauge, not a count).
	Pending int64
}

type counters struct {
	executed, replayed, conflicts, reused, rejected, storeErrors, failedOpen, leaseLost, released, panics, renewals atomic.Uint64
	quotaExceeded, completionRetries                                                                                atomic.Uint64
	pending                                                                                                         atomic.Int64
}

// Stats returns a snapshot of the counters.
func (m *Middleware) Stats() Stats {
	if m == nil {
		return Stats{}
	}
	c := &m.stats
	return Stats{
		Executed:    c.executed.Load(),
		Replayed:    c.replayed.Load(),
		Conflicts:   c.conflicts.Load(),
		Reused:      c.reused.Load(),
		Rejected:    c.rejected.Load(),
		StoreErrors: c.storeErrors.Load(),
		FailedOpen:  c.failedOpen.Load(),
		LeaseLost:   c.leaseLost.Load(),
		Released:    c.released.Load(),
		Panics:      c.panics.Load(),
		Renewals:    c.renewals.Load(),

		QuotaExceeded:     c.quotaExceeded.Load(),
		CompletionRetries: c.completionRetries.Load(),
		Pending:           c.pending.Load(),
	}
}
