package idempotency

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"

	"github.com/svcplatform/conventions/idempotency/driver"
)

// ErrNoDownstreamKey: DownstreamKey was called with a context that is not a governed request's — not
// the request context of a handler behind the Middleware, nor an Attempt's Context.
var ErrNoDownstreamKey = errors.New("idempotency: DownstreamKey: the context is not a governed request's (use the handler's request context, or Attempt.Context)")

// errDownstreamName: DownstreamKey was called without a name.
var errDownstreamName = errors.New("idempotency: DownstreamKey: empty name")

// DownstreamKey returns the idempotency key to send to an outside system (a payment provider, a
// mailer, another service) for the call that a handler names name ("charge", "refund",
// "welcome-email"): pass it as that system's idempotency key, and the outside effect happens once
// however often the handler runs for this request.
//
// The handler runs again for the same request in the one window the package doc names: its process
// died, or was cut off, after the call and before the response was stored, and a retry took the key
// over — on this replica or another. The key is the same there, since it is derived from nothing but
// the request's scope, its Idempotency-Key and name (HMAC-SHA256 under Options.DownstreamSecret):
// no store, no process, no clock. It differs for every other scope, key or name, so two tenants who
// chose the same Idempotency-Key never meet at the outside system, and one request's two calls get
// two keys when they have two names.
//
// The key is opaque: an RFC 9562 UUID (version 8) of 36 characters, which outside systems that want
// a UUID, or limit keys to 40 characters, accept. It reveals neither the client's key nor its scope:
// both go through HMAC-SHA256; without a DownstreamSecret its key is public, so someone who can guess
// both the scope and the key could confirm the guess (see Options.DownstreamSecret).
//
// ctx is the handler's request context (r.Context()) or, with Begin, Attempt.Context; it also works
// when FailOpen ran the handler without a claim. Any other context gets ErrNoDownstreamKey, and an
// empty name an error: never an empty key, which an outside system would take as no key at all.
func DownstreamKey(ctx context.Context, name string) (string, error) {
	if ctx == nil {
		return "", ErrNoDownstreamKey
	}
	d, _ := ctx.Value(downstreamCtxKey{}).(*downstreamContext)
	if d == nil {
		return "", ErrNoDownstreamKey
	}
	if name == "" {
		return "", errDownstreamName
	}
	return downstreamKey(d.secret, d.key, name), nil
}

// defaultDownstreamSecret is the HMAC key without Options.DownstreamSecret: public, so it only
// separates this use of HMAC-SHA256 from others.
const defaultDownstreamSecret = "github.com/svcplatform/conventions/idempotency.DownstreamKey"

// downstreamKey derives the key: HMAC-SHA256 over a version tag and the length-prefixed scope,
// key and name, its first 16 bytes written as a version 8 UUID.
func downstreamKey(secret []byte, k driver.Key, name string) string {
	if secret == nil {
		secret = []byte(defaultDownstreamSecret)
	}
	mac := hmac.New(sha256.New, secret)
	var buf [128]byte
	b := append(buf[:0], "downstream key v1\x00"...)
	b = appendPart(b, k.Scope)
	b = appendPart(b, k.Key)
	b = appendPart(b, name)
	mac.Write(b)
	var sum [sha256.Size]byte
	u := mac.Sum(sum[:0])[:16]
	u[6] = u[6]&0x0f | 0x80 // version 8: custom (RFC 9562 §5.8)
	u[8] = u[8]&0x3f | 0x80 // the RFC 9562 variant
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:16])
	return string(s[:])
}

// downstreamCtxKey finds a governed request's downstreamContext.
type downstreamCtxKey struct{}

// downstreamContext carries what DownstreamKey derives from. It is allocated per request and never
// pooled: a goroutine the handler left behind must not read the next request's key.
type downstreamContext struct {
	context.Context
	key    driver.Key
	secret []byte // Options.DownstreamSecret; nil: the public default
}

func (c *downstreamContext) Value(k any) any {
	if k == (downstreamCtxKey{}) {
		return c
	}
	return c.Context.Value(k)
}

// governedRequest is the request a governed handler gets, with its context, in one allocation.
type governedRequest struct {
	req http.Request
	ctx downstreamContext
}

// withDownstream returns ctx carrying the request's downstream key material.
func (m *Middleware) withDownstream(ctx context.Context, k driver.Key) context.Context {
	return &downstreamContext{Context: ctx, key: k, secret: m.downstreamSecret}
}
