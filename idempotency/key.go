package idempotency

import (
	"errors"
	"net/http"

	"github.com/google/uuid"
)

// Header names of the wire protocol.
const (
	// HeaderKey carries the client's idempotency key on a mutating request.
	HeaderKey = "Idempotency-Key"
	// HeaderReplayed is "true" on a response replayed from a stored record.
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderBodyOmitted is "true" on a replay whose original body was over Options.MaxResponseBytes
	// and so was not stored: the status and allow-listed headers (Location, say) are the original's,
	// the body is empty. See the package documentation.
	HeaderBodyOmitted = "Idempotent-Body-Omitted"
)

// MaxKeyLen is the longest key accepted, in bytes.
const MaxKeyLen = 255

// Errors about the key itself.
var (
	// ErrKeyMissing: a mutating request without an Idempotency-Key.
	ErrKeyMissing = errors.New("idempotency: Idempotency-Key is required")
	// ErrKeyInvalid: a key that is empty, longer than MaxKeyLen bytes, has bytes outside visible ASCII
	// (0x21–0x7E), or a request that sends the header more than once.
	ErrKeyInvalid = errors.New("idempotency: Idempotency-Key must be 1 to 255 bytes of visible ASCII, sent once")
)

// ValidKey reports whether k is a well-formed key: 1 to MaxKeyLen bytes, each visible ASCII
// (0x21–0x7E). Limits are in bytes, so a multi-byte character can never slip past them; spaces and
// control characters are refused so that a key survives logs, headers and storage unchanged.
func ValidKey(k string) bool {
	if len(k) == 0 || len(k) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// KeyFromHeader returns the request's Idempotency-Key: ErrKeyMissing when it has none, ErrKeyInvalid
// when it is malformed or sent more than once (two values would make the key ambiguous). The value is
// taken exactly as sent: no trimming, no unquoting.
func KeyFromHeader(h http.Header) (string, error) {
	vs := h[HeaderKey] // net/http canonicalizes names; a map built otherwise must do so too
	switch {
	case len(vs) == 0:
		return "", ErrKeyMissing
	case len(vs) > 1 || !ValidKey(vs[0]):
		return "", ErrKeyInvalid
	}
	return vs[0], nil
}

// NewKey returns a fresh random key for a client to send: a UUID v4 (122 random bits), so that keys
// of different clients never collide and cannot be guessed.
func NewKey() string { return uuid.NewString() }
