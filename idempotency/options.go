package idempotency

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/svcplatform/conventions"
	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/seal"
)

// minDownstreamSecret is the shortest Options.DownstreamSecret New accepts.
const minDownstreamSecret = 32

// Defaults of Options.
const (
	DefaultLease            = 30 * time.Second
	DefaultRetention        = 24 * time.Hour
	DefaultMaxRequestBytes  = 1 << 20
	DefaultMaxResponseBytes = 1 << 20
	DefaultRetryAfter       = time.Second
	DefaultStoreTimeout     = 5 * time.Second
	DefaultQuotaRetryAfter  = time.Minute
)

// Problem codes the middleware answers with. They are stable: clients may switch on them.
const (
	CodeKeyMissing = "idempotency_key_missing" // 400, located at header Idempotency-Key
	CodeKeyInvalid = "idempotency_key_invalid" // 400, located at header Idempotency-Key
	CodeKeyReused  = "idempotency_key_reused"  // 422, located at header Idempotency-Key
	CodeKeyInUse   = "idempotency_key_in_use"  // 409 with Retry-After
	// CodeCredentialMissing is the default Scope's 401 for a request without Authorization.
	CodeCredentialMissing = "credential_missing"
	// CodeBodyUnreadable is a 400 for a request body that failed while being read.
	CodeBodyUnreadable = "body_unreadable"
	// CodeResponseTooLarge is the 500 of transactional mode for a response over MaxResponseBytes: the
	// transaction was rolled back, so nothing was carried out.
	CodeResponseTooLarge = "idempotency_response_too_large"
	// CodeQuotaExceeded is the 429 for a scope that holds as many idempotency records as the store
	// allows one scope (located at header Idempotency-Key, with Retry-After).
	CodeQuotaExceeded = "idempotency_quota_exceeded"
)

// Options configures a Middleware. A nil *Options and the zero value mean the defaults.
type Options struct {
	// Store keeps the records. Default: a memstore.New(nil) of this middleware's own, which is right
	// for one replica only: replicas that share traffic must share a store (pgstore, redisstore).
	Store driver.Store

	// Scope names the caller a request is made by, its scope: records of different scopes never
	// meet, so the same key sent with two credentials is two requests, and no client can be replayed
	// another's response. A request it names no caller for ("" and a nil error) is refused with the
	// opaque 500 and logged, since no key can be kept for nobody; its error is answered with
	// apierror.Write (an *apierror.Error as it is, anything else as the opaque 500).
	//
	// Default: the hex SHA-256 of the Authorization header (the credential itself is never stored),
	// and 401 credential_missing located at header Authorization when there is none. Services that
	// authenticate otherwise, or not at all, must set Scope: typically to the authenticated
	// principal's licensee and environment, which an earlier middleware put in the request context.
	Scope conventions.CallerFunc

	// Methods are the methods that require a key. Default POST, PUT, PATCH and DELETE. Other methods
	// pass through untouched.
	Methods []string

	// Lease is how long a claim holds its key without renewal; the middleware renews it every Lease/3
	// while the handler runs, so only a crashed or stalled process lets it lapse. Default DefaultLease.
	// Renewal runs on one goroutine per Middleware, started by the first claim and ended by the first
	// of its ticks (every Lease/6) that finds no request in flight; a test under testing/synctest lets
	// that much time pass after its last request so that the bubble can end.
	Lease time.Duration
	// Retention is how long a completed response is replayed. Default DefaultRetention (24 h).
	Retention time.Duration

	// MaxRequestBytes caps the request body the middleware reads to fingerprint the request; larger
	// bodies get 413 body_too_large and nothing is stored. Default DefaultMaxRequestBytes (1 MiB).
	MaxRequestBytes int64
	// MaxResponseBytes caps the response body that is stored for replay. A larger response still
	// streams to its client in full, but its record keeps only the status and the allow-listed
	// headers: the replay has an empty body and HeaderBodyOmitted. The handler never runs twice.
	// Default DefaultMaxResponseBytes (1 MiB).
	MaxResponseBytes int64
	// Fingerprint describes a request, so that a retry that is the same request replays while another
	// request under the same key is refused (422 idempotency_key_reused, on every path: in flight,
	// completed, lease expired). It gets the request and its whole body (at most MaxRequestBytes,
	// valid only during the call). An error is answered with apierror.Write (an *apierror.Error as it
	// is, anything else as an opaque 500), and the handler does not run.
	//
	// Default: NewFingerprint over the method, the escaped path, the canonical query and the SHA-256
	// of the body's bytes, so a retry must send the same bytes. CanonicalJSONFingerprint lets a JSON
	// client re-serialize the same body (members reordered, other whitespace). A team's own function
	// may leave out what a retry may change, or add what it must not (a header that selects the
	// behaviour); build it on NewFingerprint. Every replica must use the same function, and changing
	// it makes requests stored before the change different requests (422) until their Retention ends.
	Fingerprint func(r *http.Request, body []byte) (Fingerprint, error)

	// DownstreamSecret keys the HMAC-SHA256 that derives DownstreamKey's keys from a request's scope
	// and Idempotency-Key, so that an outside system that receives them cannot confirm a guess of
	// either, however guessable the client's keys and the scopes are. Every replica must have the
	// same secret (a key must be the same when a retry reaches another replica), and changing it
	// changes every downstream key: an outside system would then see the retry of a request made
	// before the change as a new call. At least 32 bytes, random; an empty one is an error. Default:
	// none, and a public HMAC key: enough when scopes or keys cannot be guessed (the default Scope is a
	// credential's SHA-256; Transport's keys are random UUIDs).
	DownstreamSecret []byte

	// ReplayHeaders are response headers stored and replayed in addition to Content-Type, Location
	// and Cache-Control. Other headers are not replayed: they may be per-request (Date, X-Request-Id)
	// or sensitive (Set-Cookie). A replay also carries Idempotent-Replayed: true, and Cache-Control:
	// no-store when the handler set no Cache-Control: it is one client's answer.
	ReplayHeaders []string

	// ReleaseServerErrors makes a 5xx response release the key instead of being stored, so that a
	// retry runs the handler again. By default every completed response is stored, 5xx included
	// (Stripe's rule): a 500 after a partial side effect must not be retried blindly.
	ReleaseServerErrors bool
	// FailOpen runs the handler without idempotency when the store cannot be reached, instead of
	// answering 503. It trades the exactly-once guarantee for availability; the default fails closed.
	FailOpen bool
	// RetryAfter is the Retry-After of 409 idempotency_key_in_use and of 503. Default 1 s.
	RetryAfter time.Duration
	// QuotaRetryAfter is the Retry-After of 429 idempotency_quota_exceeded: places free up as the
	// scope's records reach the end of their retention. Default DefaultQuotaRetryAfter (1 min).
	QuotaRetryAfter time.Duration

	// StoreTimeout bounds every store call the middleware makes (claim, renewal, completion,
	// release): a store that does not answer within it counts as failed, so a partitioned database
	// costs a client a 503 with Retry-After after StoreTimeout, not a hang. Default
	// DefaultStoreTimeout (5 s). Renewals are also bounded by a third of the lease.
	StoreTimeout time.Duration

	// Sealer, when set, seals every stored record — status, headers and body together — with
	// AES-256-GCM under its key ring, bound to the record's scope and key, so that no stored body is
	// readable at rest and nothing a writer of the store changes is replayed. A Sealer fails closed:
	// a record that is not sealed (written before the Sealer was set, or by someone without the
	// ring), was sealed body-only by an earlier version, or does not open (tampered with, moved to
	// another key, or sealed with a key no longer in the ring) is refused with ErrRecordRefused —
	// answered with the opaque 500, never replayed, and the handler never runs again; the record is
	// left in place until its retention ends. Keep a retired key in the ring for a Retention after a
	// rotation. Without a Sealer, records are stored as they are, except the bodies a handler marked
	// with Secret, which are not stored at all. See Secret and seal.Ring.
	Sealer *seal.Ring

	// CancelOnLeaseLoss gives the handler a request context that is cancelled, with cause
	// ErrLeaseLost (context.Cause), when renewal finds that the lease was lost to a newer claim:
	// the handler stalled past its lease and a retry took the key over. Whatever the handler then
	// returns is refused by fencing either way; cancelling lets it stop early. Off by default: it
	// costs a derived context and a copy of the request on every execution.
	CancelOnLeaseLoss bool

	// Transactor, when set, runs each governed request's claim, handler and completion in one
	// transaction (see driver.Transactor; pgstore provides one); the response is then buffered until
	// the commit.
	Transactor driver.Transactor

	// Now is the clock. Default time.Now. Leases and retention are computed from it; the renewal
	// timer runs on the runtime's timers (use testing/synctest to control both in tests).
	Now func() time.Time
	// Logger receives store errors, refused stale completions, lost leases and released panics.
	// Keys are logged, credentials never. Default: nothing is logged.
	Logger *slog.Logger
	// Problems renders the problem responses. The zero value uses apierror's defaults.
	Problems apierror.Writer
	// Hooks are told every request's outcome and the duration of every store call and handler,
	// for metrics and traces (otelconv fills them with OpenTelemetry). Default: none, at no cost.
	Hooks *Hooks
}

// validate reports the first option New cannot honour.
func (o *Options) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Lease", o.Lease}, {"Retention", o.Retention}, {"RetryAfter", o.RetryAfter},
		{"QuotaRetryAfter", o.QuotaRetryAfter}, {"StoreTimeout", o.StoreTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("idempotency: New: %s %v is negative", d.name, d.v)
		}
	}
	if o.DownstreamSecret != nil && len(o.DownstreamSecret) < minDownstreamSecret {
		return fmt.Errorf("idempotency: New: DownstreamSecret is %d bytes, want at least %d random bytes", len(o.DownstreamSecret), minDownstreamSecret)
	}
	if o.MaxRequestBytes < 0 {
		return fmt.Errorf("idempotency: New: MaxRequestBytes %d is negative", o.MaxRequestBytes)
	}
	if o.MaxResponseBytes < 0 {
		return fmt.Errorf("idempotency: New: MaxResponseBytes %d is negative", o.MaxResponseBytes)
	}
	lease, retention := cmp.Or(o.Lease, DefaultLease), cmp.Or(o.Retention, DefaultRetention)
	if retention <= lease {
		return fmt.Errorf("idempotency: New: Retention %v must be longer than Lease %v: a record would expire while its request runs", retention, lease)
	}
	for _, m := range o.Methods {
		switch {
		case !validMethodToken(m):
			return fmt.Errorf("idempotency: New: Methods: %q is not an HTTP method", m)
		case m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions || m == http.MethodTrace:
			return fmt.Errorf("idempotency: New: Methods: %s is a safe method and needs no Idempotency-Key", m)
		}
	}
	return nil
}

// validMethodToken reports whether m is an RFC 9110 method token.
func validMethodToken(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if c <= ' ' || c >= 0x7f || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", rune(c)) {
			return false
		}
	}
	return true
}
