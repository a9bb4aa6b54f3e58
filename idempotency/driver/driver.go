// Package driver is the storage contract behind package idempotency: what a record store must do for
// the Middleware and Begin to keep their promise that a request repeated with the same
// Idempotency-Key is carried out once. Only implementers of a store read it — pgstore's
// IdempotencyStore and Transactor, redisstore.IdempotencyStore, the in-memory store of package
// memstore, or a team's own store on another database. Teams that make their requests idempotent use
// package idempotency and pass it a store; they never call these methods themselves.
//
// # What the caller guarantees
//
// The middleware (and Begin) checks every argument before it calls a Store, so an implementation
// need not check them again:
//
//   - a Key's Scope is never empty; it is the application's (Options.Scope) and may hold any bytes. Its
//     Key is 1 to 255 bytes of visible ASCII, 0x21–0x7E (idempotency.ValidKey): no space, no control
//     character, no NUL.
//   - a Fingerprint is 32 opaque bytes: a store keeps and compares it, never interprets it.
//   - Claim's times are ordered now < leaseUntil < expiresAt: the lease is now plus Options.Lease,
//     and the retention, now plus Options.Retention, is longer than the lease (New refuses a shorter
//     one). Renew's leaseUntil and Complete's expiresAt are likewise the caller's now plus the lease
//     and the retention. Times come from the caller's clock (Options.Now), not the store's.
//   - Renew, Complete and Release present a token that Claim handed out for that key (it may have lost
//     the key since: that is what ErrLeaseLost reports).
//   - Complete's Response is the one to replay, as the middleware captured it (status, allow-listed
//     headers, body) or Begin's caller gave it; it may be sealed (Options.Sealer): then its header
//     holds a mark and its body the sealed envelope. A store keeps it as given.
//   - Every call is bounded by a context with a deadline (Options.StoreTimeout).
//   - A Store that a Transactor binds to its transaction is used by one goroutine at a time, with
//     lease renewal off (idempotency.Request.NoRenew).
//
// Lookup is never called by the middleware: it is for operators and tests (idempotency.CredentialScope
// names the scope of a credential's records).
//
// # What a Store promises
//
//   - Every method is atomic on its key, and safe for concurrent use by many goroutines and many
//     processes sharing the backend. Claim decides in one step (never check-then-lock): many callers
//     racing on one key see exactly one Claimed.
//   - The fingerprint is checked on every path: a record claimed with another fingerprint — in flight,
//     completed, or with its lease lapsed — changes nothing and reports its own fingerprint.
//   - A lapsed lease is taken over in two steps: the first Claim that finds it marks the record
//     suspected and extends the lease once (its owner may only have been cut off from the store);
//     only a Claim that finds the extension lapsed too takes the key over, under a new token that
//     fences the old one. Renew clears the mark.
//   - Tokens are fencing tokens: a token that lost its key (taken over, completed, released, expired)
//     can no longer Renew, Complete or Release it: ErrLeaseLost. See Claim.Token for their
//     uniqueness.
//   - No method reads the clock: the caller passes now and absolute deadlines, and a record whose
//     ExpiresAt is not after now is absent (to Claim a new key, to Lookup ErrNotFound).
//   - Every method honours its context's deadline and cancellation: it returns an error, and changes
//     nothing it has not already committed, instead of waiting on a partitioned or stalled backend.
//   - Errors are these package's (ErrLeaseLost, ErrNotFound, ErrQuotaExceeded, and for a Transactor
//     ErrTxAborted) or the backend's failure; implementations translate their drivers' errors.
//   - A Store may bound the records of one scope (a per-scope quota): a Claim that would create one
//     more fails with an error wrapping ErrQuotaExceeded and changes nothing; other scopes are not
//     affected.
//
// Package idempotency/storetest is the conformance suite that checks these promises; every
// implementation runs it under -race (RunQuota checks a per-scope quota, RunReplicas a Transactor
// under several middleware replicas). Implementations must be safe for concurrent use.
package driver

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Store keeps idempotency records. The package doc lists what the caller guarantees and what a Store
// promises; the methods' docs say what each decides.
type Store interface {
	// Claim atomically decides the fate of a request in one step (never check-then-lock):
	//   - no live record (none, or ExpiresAt <= now): create an in-flight record owned by a new token,
	//     leased until leaseUntil, kept until expiresAt → Claimed; or, when the scope already holds as
	//     many live records as the store allows it, change nothing and return an error wrapping
	//     ErrQuotaExceeded (stores without quotas never do);
	//   - a record with a different fingerprint: change nothing, report it (the caller answers 422);
	//   - in flight with LeaseUntil > now → InFlight;
	//   - in flight with LeaseUntil <= now, not suspected: mark it suspected and extend its lease to
	//     leaseUntil → InFlight with that LeaseUntil. The owner may only have been cut off from the
	//     store (an outage longer than the lease); this gives it one more lease to Renew, which clears
	//     the mark, or Complete;
	//   - in flight with LeaseUntil <= now and suspected (its owner let the extra lease pass too: it
	//     crashed or stalled): take it over with a new token, not suspected → Claimed; the old token
	//     can no longer Renew, Complete or Release;
	//   - completed → Completed with the stored Response.
	Claim(ctx context.Context, key Key, fp Fingerprint, now, leaseUntil, expiresAt time.Time) (Claim, error)
	// Renew extends the lease of the claim that token owns and clears a suspicion mark. ErrLeaseLost if
	// it no longer owns the key.
	Renew(ctx context.Context, key Key, token uint64, leaseUntil time.Time) error
	// Complete stores resp for the claim that token owns and keeps the record until expiresAt.
	// ErrLeaseLost if the token no longer owns the key: nothing is stored.
	Complete(ctx context.Context, key Key, token uint64, resp Response, expiresAt time.Time) error
	// Release deletes the in-flight record that token owns, so a retry can claim the key at once.
	// ErrLeaseLost if the token no longer owns it.
	Release(ctx context.Context, key Key, token uint64) error
	// Lookup returns the live record for key (ExpiresAt > now), or ErrNotFound.
	Lookup(ctx context.Context, key Key, now time.Time) (Record, error)
}

// Backender is implemented by stores that name their backend for the middleware's Hooks
// (idempotency.StoreCall.Backend), in lower case and without instance details ("postgresql",
// "redis"). memstore.Store and the stores of pgstore and redisstore implement it; a store without it
// is named "custom".
type Backender interface {
	Backend() string
}

// Key names one idempotency record: the client's Idempotency-Key within a scope (a credential:
// licensee and environment). Stores keep scopes apart and may use Scope for placement (a Redis hash
// tag, say), so that one client can never see another's record. It is a plain, comparable value; the
// zero Key (empty scope and key) is never one the middleware makes: Begin refuses both.
type Key struct {
	Scope string
	Key   string
}

// Fingerprint identifies a request: SHA-256 over its method, path, canonical query and body hash
// (idempotency.NewFingerprint), or what Options.Fingerprint computes. A repeated key whose
// fingerprint differs is a different request reusing the key (422). It is a plain value; the zero
// Fingerprint is as valid as any other.
type Fingerprint [32]byte

// Response is what a completed record replays: status, the allow-listed headers and the body.
//
// Ownership: Store.Complete must not keep resp's Header or Body after it returns (the middleware
// reuses its buffers), and a Response that Claim or Lookup returns may be shared with the store, so
// callers must treat it as read-only. A nil and an empty Header or Body are equivalent. The zero
// value is a Response with Status 0, which no completed request has.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Status is the state of a stored record as a Store reports it: what Store.Claim found or made
// (Claimed, InFlight, Completed) and what Store.Lookup found (InFlight, Completed). It is the
// vocabulary of Store implementations. Begin's callers see an idempotency.Decision instead, which
// the middleware derives from the Status after checking the fingerprint (a completed record of
// another request is Reused, not Replay) and, with a Sealer, the seal; the Hooks see an Outcome.
// Stores persist their own encoding of it (pgstore a completed column, redisstore a one-letter
// state), never its number.
//
// The zero value is no status: a Store returns it only along with an error.
type Status int

const (
	// Claimed: the caller now owns the key under Claim.Token and must Complete or Release it.
	Claimed Status = iota + 1
	// InFlight: another claim holds a live lease on the key.
	InFlight
	// Completed: the key has a stored response.
	Completed
)

// String returns the status's name: "claimed", "in_flight" or "completed"; "none" for the zero
// value and "unknown" for a value this version does not know.
func (s Status) String() string {
	switch s {
	case 0:
		return "none"
	case Claimed:
		return "claimed"
	case InFlight:
		return "in_flight"
	case Completed:
		return "completed"
	}
	return "unknown"
}

// Claim is the result of Store.Claim. It is a plain value; the zero Claim has Status 0, which no
// successful Claim returns (a Store returns it along with an error).
type Claim struct {
	Status Status
	// Token is the fencing token of the claim when Status is Claimed. Tokens are unique per key across
	// all scopes: every claim of a key gets a token that no earlier claim of that key had (after a
	// release, a take-over or the end of retention too), and that no claim of the same key in another
	// scope holds, so a token only ever owns the record it was handed out for. storetest checks both
	// (TokensNeverRepeat, ScopesIsolated). A store may hand out tokens that are unique across all keys
	// (a global counter or sequence) or only per key or per scope with random starting points.
	Token uint64
	// Fingerprint is the record's fingerprint. When it differs from the one passed to Claim, the store
	// changed nothing and the caller must answer 422: the check runs on every path.
	Fingerprint Fingerprint
	// LeaseUntil is when the holder's lease ends (InFlight and Claimed).
	LeaseUntil time.Time
	// Response is the stored response when Status is Completed.
	Response *Response
}

// Record is a stored record as Lookup returns it. It is a plain value; the zero Record has Status 0,
// which no successful Lookup returns.
type Record struct {
	Fingerprint Fingerprint
	Status      Status // InFlight or Completed
	Token       uint64
	LeaseUntil  time.Time
	ExpiresAt   time.Time
	Response    *Response
}

// Errors a Store returns. Implementations translate their drivers' errors into these.
var (
	// ErrLeaseLost: the token no longer owns the key (a newer claim took it over, or it was released
	// or completed). The caller's result must not be stored. It is idempotency.ErrLeaseLost, which
	// Begin's callers see.
	ErrLeaseLost = errors.New("idempotency: lease lost to a newer claim")
	// ErrNotFound: Lookup found no live record.
	ErrNotFound = errors.New("idempotency: no record for key")
	// ErrQuotaExceeded: Claim refused a new record because the scope holds as many live records as the
	// store allows one scope, so that one tenant cannot fill capacity that others share. The middleware
	// answers 429 idempotency_quota_exceeded with Retry-After; other scopes are not affected. It is
	// idempotency.ErrQuotaExceeded, which Begin's callers see.
	ErrQuotaExceeded = errors.New("idempotency: the scope's quota of idempotency records is used up")
)
