package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/internal/fields"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

// ErrStore wraps every error a store returned to Begin: the request was not decided, so answer 503
// and let the client retry with the same key.
var ErrStore = errors.New("idempotency: store failed")

// ErrScopeEmpty: Begin was called without a scope. Every request has one (see Options.Scope).
var ErrScopeEmpty = errors.New("idempotency: empty scope")

// Decision is what Begin decided about a request: what its caller must do now. It is neither the
// state of the stored record (driver.Status, which a store reports; Begin derives the Decision from
// it after checking the fingerprint and, with a Sealer, the seal, so that a completed record of
// another request is Reused, not Replay) nor what became of the request (Outcome, an open set that
// the Hooks are told once the response is stored, released or refused). Its four values are the
// ones a caller switches on; each but Execute is named as the outcome it is, and Execute ends as
// OutcomeExecuted, OutcomeLeaseLost or OutcomeReleased, by Complete or Release.
//
// The zero value is no decision: Begin never returns it, and an Attempt holding it owns nothing.
type Decision int

const (
	// Execute: this attempt owns the key. Run the operation, then Complete (or Release) the attempt.
	Execute Decision = iota + 1
	// Replay: the key has a stored response (Attempt.Response); answer with it and do not run the
	// operation.
	Replay
	// InUse: another attempt holds the key. Answer 409 idempotency_key_in_use (Attempt.Problem).
	InUse
	// Reused: the key was used with a different request. Answer 422 idempotency_key_reused
	// (Attempt.Problem).
	Reused
)

// String returns the decision's name: "execute", "replay", "in_use" or "reused"; "none" for the
// zero value and "unknown" for a value this version does not know.
func (d Decision) String() string {
	switch d {
	case 0:
		return "none"
	case Execute:
		return "execute"
	case Replay:
		return "replay"
	case InUse:
		return "in_use"
	case Reused:
		return "reused"
	}
	return "unknown"
}

// Request is what Begin decides about: one attempt at a request, identified by scope and key and
// described by its fingerprint. It is a plain value; the zero value has no key, and Begin refuses it
// with ErrKeyInvalid.
type Request struct {
	// Scope is the requester's scope (see Options.Scope); required.
	Scope string
	// Key is the client's idempotency key; it must satisfy ValidKey.
	Key string
	// Fingerprint describes the request; see NewFingerprint. A gRPC-style caller can use the full
	// method name as the path and the SHA-256 of the serialized request message as the body hash.
	Fingerprint Fingerprint

	// Store, when set, replaces the middleware's store (Options.Store) for this attempt: the store
	// that a Transactor's InTx passes its function (driver.Transactor), bound to a database
	// transaction, so that the claim, the operation's own writes and the stored response commit or
	// roll back together.
	Store driver.Store
	// NoRenew turns off lease renewal for this attempt. A store bound to a transaction needs it:
	// such a store is used by one goroutine at a time, and the transaction's row lock, not the
	// lease, keeps other claims out until it ends.
	NoRenew bool
}

// Attempt is Begin's decision about one request and, when the decision is Execute, the claim that the
// caller owns until it calls Complete or Release.
//
// An Attempt is not safe for concurrent use: one goroutine runs the operation and finishes it. Its
// zero value is not useful: Begin returns Attempts. A zero (or nil) Attempt owns nothing: its
// Complete and Release return an error, its Context is context.Background and its Problem nil.
type Attempt struct {
	// Decision says what to do.
	Decision Decision
	// Key is the record's key: scope and idempotency key.
	Key driver.Key
	// Fingerprint is this request's fingerprint (the one passed to Begin).
	Fingerprint Fingerprint
	// Token is the claim's fencing token (Execute). Complete and Release present it to the store.
	Token uint64
	// LeaseUntil is when the lease Begin took ends (Execute) or when the holder's lease ends
	// (InUse). Renewal moves the real lease on; this field keeps the first value.
	LeaseUntil time.Time
	// Response is the stored response (Replay). It is shared with the store: do not modify it.
	Response *Response

	m       *Middleware
	store   driver.Store
	tx      bool   // in a Transactor's transaction: serveTx reports the outcome after the commit
	backend string // store's name for the Hooks
	// mark is the time the Hooks' last measurement of this request ended, where the next one
	// starts (zero without Hooks, or when the next step is not immediate).
	mark    time.Time
	ctx     context.Context
	cancel  context.CancelCauseFunc
	renewal *renewal
	done    bool
}

// Begin decides about req in one atomic step on the store (never check-then-act), and on Execute
// claims the key. It is the middleware without net/http, for other routers and RPC frameworks:
//
//	a, err := m.Begin(ctx, idempotency.Request{Scope: tenant, Key: key, Fingerprint: fp})
//	if err != nil {
//		return unavailable(err) // ErrStore: retry later; ErrKeyInvalid, ErrScopeEmpty: bad input
//	}
//	switch a.Decision {
//	case idempotency.Replay:
//		return decode(a.Response)
//	case idempotency.InUse, idempotency.Reused:
//		return a.Problem()
//	}
//	res, err := placeOrder(a.Context(), in)
//	if err != nil && !retryable(err) { … } // decide what is stored
//	if err := a.Complete(ctx, encode(res)); err != nil { … } // ErrLeaseLost: a newer claim won
//
// On Execute the lease is renewed every Options.Lease/3 until Complete or Release (unless
// req.NoRenew), and Context returns a context that is cancelled, with cause ErrLeaseLost, if the lease
// is lost to a newer claim while the operation runs, and that gives the operation its DownstreamKey.
// Failing to call Complete or Release leaves the key in flight until its lease ends, and leaks the
// renewal until then.
//
// Begin returns an error wrapping ErrStore when the store fails (or does not answer within
// Options.StoreTimeout), ErrQuotaExceeded when the scope holds as many records as the store allows
// one scope (answer 429), ErrRecordRefused when Options.Sealer is set and the stored record is not
// sealed or does not open (answer an opaque 500: the operation ran once, do not run it again),
// ErrKeyInvalid for a malformed key, ErrScopeEmpty for an empty scope; the Attempt is then nil.
func (m *Middleware) Begin(ctx context.Context, req Request) (*Attempt, error) {
	if m == nil || m.store == nil {
		return nil, ErrNotBuilt
	}
	if !ValidKey(req.Key) {
		m.outcome(ctx, OutcomeRejected)
		return nil, ErrKeyInvalid
	}
	if req.Scope == "" {
		m.outcome(ctx, OutcomeRejected)
		return nil, ErrScopeEmpty
	}
	a := new(Attempt)
	if err := m.begin(ctx, req, a, true, nil); err != nil {
		if errors.Is(err, ErrStore) {
			m.outcome(ctx, OutcomeStoreError)
		}
		return nil, err
	}
	a.mark = time.Time{} // the caller's Complete comes whenever its operation is done
	return a, nil
}

// begin fills a; the middleware passes a pooled Attempt and renewal (spare). With cancellable, an
// Execute attempt runs under a context of its own that a lost lease cancels; without, under ctx.
func (m *Middleware) begin(ctx context.Context, req Request, a *Attempt, cancellable bool, spare *renewal) error {
	store := req.Store
	if store == nil {
		store = m.store
	}
	*a = Attempt{Key: driver.Key{Scope: req.Scope, Key: req.Key}, Fingerprint: req.Fingerprint, m: m, store: store, backend: m.backend}
	if req.Store != nil && m.hooks != nil {
		a.backend = backendOf(req.Store) // a Transactor's store, bound to its transaction
	}
	now := m.now()
	octx, call, start := m.storeStart(ctx, OpClaim, a.backend, now)
	cctx, cancel := bounded(octx, store, m.storeTimeout)
	c, err := store.Claim(cctx, a.Key, req.Fingerprint, now, now.Add(m.lease), now.Add(m.retention))
	cancel()
	a.mark = m.storeEnd(octx, call, start, err)
	if err != nil {
		if errors.Is(err, ErrQuotaExceeded) {
			m.stats.quotaExceeded.Add(1)
			m.outcome(ctx, OutcomeQuota)
			m.log.LogAttrs(ctx, slog.LevelWarn, "idempotency: scope over its quota of records", slog.String("idempotency_key", req.Key))
			return fmt.Errorf("idempotency: claim: %w", err)
		}
		m.stats.storeErrors.Add(1)
		m.log.LogAttrs(ctx, slog.LevelError, "idempotency: claim failed", slog.String("idempotency_key", req.Key), slog.Any("error", err))
		return fmt.Errorf("%w: claim: %w", ErrStore, err)
	}
	switch {
	case c.Fingerprint != req.Fingerprint:
		// Checked before anything else, on every path: a different request never gets this key's
		// response, nor its lease.
		a.Decision = Reused
		m.stats.reused.Add(1)
		m.outcome(ctx, OutcomeReused)
	case c.Status == driver.Completed && c.Response != nil:
		resp, err := m.unseal(ctx, a.Key, c.Response)
		if err != nil {
			// Not replayed, and not run again: the request was carried out once. The record stays
			// for an operator to look at; every retry is refused the same way until it expires.
			m.stats.storeErrors.Add(1)
			m.outcome(ctx, OutcomeStoreError)
			m.log.LogAttrs(ctx, slog.LevelError, "idempotency: stored record refused; answering 500, neither replaying nor running the handler",
				slog.String("idempotency_key", req.Key), slog.Any("error", err))
			return err
		}
		a.Decision = Replay
		a.Response = resp
		m.stats.replayed.Add(1)
		m.outcome(ctx, OutcomeReplayed)
	case c.Status == driver.InFlight:
		a.Decision = InUse
		a.LeaseUntil = c.LeaseUntil
		m.stats.conflicts.Add(1)
		m.outcome(ctx, OutcomeInUse)
	case c.Status == driver.Claimed:
		a.Decision = Execute
		a.Token = c.Token
		a.LeaseUntil = c.LeaseUntil
		if cancellable {
			a.ctx, a.cancel = context.WithCancelCause(ctx)
		} else {
			a.ctx = ctx
		}
		if spare == nil {
			// Begin's caller, or serveTx's handler, finds its DownstreamKey here; the middleware's
			// execute puts it in the handler's request itself.
			a.ctx = m.withDownstream(a.ctx, a.Key)
		}
		if !req.NoRenew {
			a.renewal = m.renewer.start(m, a, spare)
		}
		m.stats.executed.Add(1)
	default:
		m.stats.storeErrors.Add(1)
		return fmt.Errorf("%w: claim returned status %v", ErrStore, c.Status)
	}
	return nil
}

// Context returns the context the operation should run under (Execute): Begin's context, cancelled
// with cause ErrLeaseLost (context.Cause) when renewal finds that a newer claim took the key over,
// and cancelled when the attempt is finished. DownstreamKey derives the operation's keys for outside
// systems from it. For other decisions it returns context.Background().
func (a *Attempt) Context() context.Context {
	if a == nil || a.ctx == nil {
		return context.Background()
	}
	return a.ctx
}

// Problem returns the problem to answer for InUse (409 idempotency_key_in_use, with Retry-After)
// and Reused (422 idempotency_key_reused), and nil for the other decisions. The
// problem is shared: render it, do not modify it.
func (a *Attempt) Problem() *apierror.Error {
	if a == nil {
		return nil
	}
	switch a.Decision {
	case InUse:
		return a.m.pInUse
	case Reused:
		return a.m.pReused
	}
	return nil
}

// errNotOwner is returned by Complete and Release on an attempt that does not own its key.
var errNotOwner = errors.New("idempotency: attempt does not own its key (decision is not Execute)")

// Complete stores resp as the key's response, kept for Options.Retention from now, and ends the
// attempt. The store copies resp; with Options.Sealer it is stored sealed, status, headers and body
// together. It returns
// ErrLeaseLost (errors.Is) when a newer claim took the key over: resp is then not stored, and the
// newer claim's result is what retries get. Any other error means the store failed (or did not answer
// within Options.StoreTimeout): the attempt still owns the key, its lease is still renewed, and the
// caller should call Complete again (with backoff) until it returns nil or ErrLeaseLost — giving up
// lets a retry run the operation again once the lease and the extra lease are over.
func (a *Attempt) Complete(ctx context.Context, resp Response) error {
	if a == nil || a.Decision != Execute {
		return errNotOwner
	}
	if a.m.sealer != nil {
		resp = a.m.seal(a.Key, resp)
	}
	return a.complete(ctx, &completion{resp: resp})
}

// completeRecorded is Complete for the middleware: the response comes from the recorder, and a
// memstore.Store takes it as header fields, without a header map.
func (a *Attempt) completeRecorded(ctx context.Context, rec *recorder, omitted bool) error {
	if a.Decision != Execute {
		return errNotOwner
	}
	status, fs, body := rec.storedFields(omitted)
	if a.m.sealer != nil {
		// Status, headers and body sealed together into the recorder's buffers, which the store
		// copies: what a writer of the store changes does not open.
		var aad [aadBufSize]byte
		rec.plain = appendEnvelope(rec.plain[:0], status, fs, body)
		rec.sealed = a.m.sealer.Seal(rec.sealed[:0], rec.plain, sealAAD(aad[:0], a.Key))
		fs, body = sealedFields, rec.sealed
	}
	c := completion{status: status, fields: fs, body: body}
	if ms, ok := a.store.(*memstore.Store); ok {
		c.ms = ms
	} else {
		c.resp = rec.response(status, fs, body)
	}
	return a.complete(ctx, &c)
}

// completion is one Complete call: through the memory store's field path when ms is set, else resp.
type completion struct {
	ms     *memstore.Store
	status int
	fields []fields.Field
	body   []byte
	resp   Response
}

// complete runs one completion under Options.StoreTimeout with the lease's renewal held off, and ends
// the attempt unless the store failed: then the claim is kept, and renewed, for another try.
func (a *Attempt) complete(ctx context.Context, c *completion) error {
	var err error
	switch {
	case a.renewal != nil:
		if !a.m.renewer.hold(a.renewal) {
			err = ErrLeaseLost
			break
		}
		err = a.store1(ctx, c)
		a.m.renewer.release(a.renewal, err)
	case a.done:
		err = ErrLeaseLost
	default:
		err = a.store1(ctx, c)
	}
	a.finished(err)
	if err == nil || errors.Is(err, ErrLeaseLost) {
		a.renewal = nil
		a.stop()
		if !a.tx {
			if err == nil {
				a.m.outcome(ctx, OutcomeExecuted)
			} else {
				a.m.outcome(ctx, OutcomeLeaseLost)
			}
		}
	}
	return err
}

// store1 makes the store call of a completion.
func (a *Attempt) store1(ctx context.Context, c *completion) (err error) {
	m := a.m
	now := a.mark // the handler's end, just now, when the middleware measured it
	a.mark = time.Time{}
	if now.IsZero() {
		now = m.now()
	}
	octx, call, start := m.storeStart(ctx, OpComplete, a.backend, now)
	cctx, cancel := bounded(octx, a.store, m.storeTimeout)
	expiresAt := now.Add(m.retention)
	if c.ms != nil {
		err = fields.CompleteMemory(cctx, c.ms, a.Key, a.Token, c.status, c.fields, c.body, expiresAt)
	} else {
		err = a.store.Complete(cctx, a.Key, a.Token, c.resp, expiresAt)
	}
	cancel()
	m.storeEnd(octx, call, start, err)
	return err
}

// bounded returns ctx with the store timeout, except for a memstore.Store: it never waits on I/O, and
// a timer per call would cost more than the call.
func bounded(ctx context.Context, store driver.Store, timeout time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := store.(*memstore.Store); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, timeout)
}

// Release deletes the claim so that a retry can run at once, and ends the attempt. Use it when the
// operation did not happen (it failed before any side effect) or must be retried. It returns
// ErrLeaseLost when a newer claim took the key over.
func (a *Attempt) Release(ctx context.Context) error {
	if a == nil || a.Decision != Execute {
		return errNotOwner
	}
	a.stop()
	m := a.m
	octx, call, start := m.storeStart(ctx, OpRelease, a.backend, time.Time{})
	cctx, cancel := bounded(octx, a.store, m.storeTimeout)
	err := a.store.Release(cctx, a.Key, a.Token)
	cancel()
	m.storeEnd(octx, call, start, err)
	a.finished(err)
	m.stats.released.Add(1)
	if !a.tx {
		m.outcome(ctx, OutcomeReleased)
	}
	return err
}

// stop ends renewal and waits for a renewal in progress, so that no Renew follows Complete.
func (a *Attempt) stop() {
	if a.renewal != nil {
		a.m.renewer.stop(a.renewal)
		a.renewal = nil
	}
	if !a.done {
		a.done = true
		if a.cancel != nil {
			a.cancel(nil)
		}
	}
}

func (a *Attempt) finished(err error) {
	switch {
	case err == nil:
	case errors.Is(err, ErrLeaseLost):
		a.m.stats.leaseLost.Add(1)
	case errors.Is(err, driver.ErrTxAborted):
		// The handler's failure, not the store's: serveTx counts the release.
	default:
		a.m.stats.storeErrors.Add(1)
	}
}
