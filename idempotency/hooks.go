package idempotency

import (
	"context"
	"time"

	"github.com/svcplatform/conventions/idempotency/driver"
)

// Hooks are told what a Middleware decides and how long its store and its handler take, for
// metrics and traces (package otelconv fills them with OpenTelemetry). Set them in Options.Hooks.
// Every field may be nil; the zero value observes nothing, and a nil *Hooks observes nothing at no
// cost. Fields will be added as the middleware grows: Hooks written for an earlier version keep
// compiling and keep working, since a new field is nil in them.
//
// The Start hooks return the context the work goes on in, so that an implementation can put a span
// there; the matching End gets that context. The hooks are called synchronously on the request
// path, from many goroutines at once: they must be safe for concurrent use and must not block. They
// never see a key, a scope or a body. New keeps a copy of the Hooks it is given: changing them
// afterwards changes nothing.
type Hooks struct {
	// StoreStart is called before each store call: claim, complete, release and renew.
	StoreStart func(ctx context.Context, call StoreCall) context.Context
	// StoreEnd is called after it with the context StoreStart returned, the call's duration (by
	// Options.Now) and its error: nil, or one matching ErrLeaseLost, ErrQuotaExceeded,
	// memstore.ErrStoreFull or a store failure.
	StoreEnd func(ctx context.Context, call StoreCall, took time.Duration, err error)
	// HandlerStart is called before the middleware runs the handler of a claimed request; the
	// handler runs in the context it returns.
	HandlerStart func(ctx context.Context) context.Context
	// HandlerEnd is called when the handler returned (or panicked: status 500, panicked true).
	HandlerEnd func(ctx context.Context, status int, took time.Duration, panicked bool)
	// Outcome is called once per governed request (or Begin) when its outcome is known: for an
	// executed request, when its response is stored, released or refused. It is never called with
	// the zero Outcome.
	Outcome func(ctx context.Context, outcome Outcome)
}

// used returns a copy of h for a Middleware to keep, or nil when h sets no field: a Middleware
// measures nothing, and reads no clock for it, unless some hook is set.
func (h *Hooks) used() *Hooks {
	if h == nil || (h.StoreStart == nil && h.StoreEnd == nil && h.HandlerStart == nil && h.HandlerEnd == nil && h.Outcome == nil) {
		return nil
	}
	c := *h
	return &c
}

// StoreCall names one store call for the Hooks. It is a plain value; the zero value names no
// call.
type StoreCall struct {
	// Op is the operation.
	Op StoreOp
	// Backend names the store: "memory", "postgresql", "redis", or what a store's Backend method
	// returns (see driver.Backender); "custom" for a store without one.
	Backend string
}

// backendOf names store for the Hooks.
func backendOf(store driver.Store) string {
	if b, ok := store.(driver.Backender); ok {
		if name := b.Backend(); name != "" {
			return name
		}
	}
	return "custom"
}

// StoreOp is a store operation. The zero value is no operation.
type StoreOp uint8

// The store operations the Hooks see.
const (
	OpClaim StoreOp = iota + 1
	OpComplete
	OpRelease
	OpRenew
)

var storeOpNames = [...]string{"none", "claim", "complete", "release", "renew"}

// String returns the operation's name: "claim", "complete", "release" or "renew"; "none" for the
// zero value and "unknown" for a value this version does not know.
func (op StoreOp) String() string {
	if int(op) < len(storeOpNames) {
		return storeOpNames[op]
	}
	return "unknown"
}

// Outcome is what became of one governed request, as Hooks.Outcome is told once per request and
// metrics label it. It is an observation, not an instruction: unlike a Decision, which tells Begin's
// caller what to do, it also covers the requests refused before any decision (rejected, quota,
// store_error, failed_open) and how an executed one ended (executed, lease_lost, released), and
// values will be added as the middleware grows, so a hook must accept one it does not know. Where it
// names what a Decision names, it uses the same word (replayed for Replay, in_use, reused).
//
// The zero value is no outcome: the Hooks are never told it.
type Outcome uint8

// The outcomes, one per governed request.
const (
	// OutcomeExecuted: the claim was won, the handler ran and its response is stored (or, after a
	// store failure at completion, is being stored in the background).
	OutcomeExecuted Outcome = iota + 1
	// OutcomeReplayed: answered with the stored response.
	OutcomeReplayed
	// OutcomeInUse: answered 409 idempotency_key_in_use; the key is in flight.
	OutcomeInUse
	// OutcomeReused: answered 422 idempotency_key_reused; the key was used for another request.
	OutcomeReused
	// OutcomeRejected: refused before a claim: missing or malformed key, no scope, a body too large
	// or unreadable.
	OutcomeRejected
	// OutcomeQuota: answered 429; the scope holds as many records as the store allows.
	OutcomeQuota
	// OutcomeStoreError: the store failed (or a transaction did not commit) and the request was
	// answered 503 without its effect, or a background completion was given up at Close, or the
	// stored record was refused under Options.Sealer (ErrRecordRefused) and answered 500.
	OutcomeStoreError
	// OutcomeFailedOpen: the store failed and the handler ran without idempotency (FailOpen).
	OutcomeFailedOpen
	// OutcomeLeaseLost: the handler ran, but its response was refused because a newer claim took
	// the key over.
	OutcomeLeaseLost
	// OutcomeReleased: the claim was released and nothing stored (a panic, ReleaseServerErrors,
	// NotPerformed, a response over MaxResponseBytes or a handler whose own SQL aborted the
	// transaction in transactional mode, Attempt.Release).
	OutcomeReleased
)

var outcomeNames = [...]string{"none", "executed", "replayed", "in_use", "reused", "rejected", "quota", "store_error", "failed_open", "lease_lost", "released"}

// String returns the outcome's name, as metrics label it: "executed", "replayed", "in_use",
// "reused", "rejected", "quota", "store_error", "failed_open", "lease_lost" or "released"; "none"
// for the zero value and "unknown" for a value this version does not know.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// storeStart and storeEnd bracket one store call when Hooks are set. A caller that has just read
// the clock passes that time as known (zero: storeStart reads it); storeEnd returns the time it read,
// which the next step of the same request starts from: each step costs one clock read, not two.
func (m *Middleware) storeStart(ctx context.Context, op StoreOp, backend string, known time.Time) (context.Context, StoreCall, time.Time) {
	h := m.hooks
	if h == nil {
		return ctx, StoreCall{}, time.Time{}
	}
	if known.IsZero() {
		known = m.now()
	}
	call := StoreCall{Op: op, Backend: backend}
	if h.StoreStart != nil {
		ctx = h.StoreStart(ctx, call)
	}
	return ctx, call, known
}

func (m *Middleware) storeEnd(ctx context.Context, call StoreCall, start time.Time, err error) time.Time {
	h := m.hooks
	if h == nil {
		return time.Time{}
	}
	end := m.now()
	if h.StoreEnd != nil {
		h.StoreEnd(ctx, call, end.Sub(start), err)
	}
	return end
}

// handlerStart is called, when Hooks are set, before a claimed request's handler runs; it returns
// the context the handler runs in and the time the handler's measurement starts from.
func (m *Middleware) handlerStart(ctx context.Context, a *Attempt) (context.Context, time.Time) {
	h := m.hooks
	if h.HandlerStart != nil {
		ctx = h.HandlerStart(ctx)
	}
	start := a.mark // the claim's end, just now
	if start.IsZero() {
		start = m.now()
	}
	return ctx, start
}

// handlerEnd is called, when Hooks are set, after the handler returned or panicked. A handler that
// returned leaves its end in a.mark, where the completion's measurement starts.
func (m *Middleware) handlerEnd(ctx context.Context, a *Attempt, start time.Time, status int, panicked bool) {
	end := m.now()
	if !panicked {
		a.mark = end
	}
	if h := m.hooks; h.HandlerEnd != nil {
		h.HandlerEnd(ctx, status, end.Sub(start), panicked)
	}
}

// outcome reports o for one request when Hooks are set.
func (m *Middleware) outcome(ctx context.Context, o Outcome) {
	if h := m.hooks; h != nil && h.Outcome != nil {
		h.Outcome(ctx, o)
	}
}
