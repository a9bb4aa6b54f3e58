package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"time"
)

// SecretPrefix starts every signing secret.
const SecretPrefix = "whsec_"

// ErrNoSecret is returned when signing or verifying is asked to use no secret or an empty one: that is
// a configuration error, never "verification off".
var ErrNoSecret = errors.New("webhook: empty signing secret")

// NewSecret returns a fresh signing secret: "whsec_" and 32 random bytes in unpadded base64url.
// The HMAC key is the whole string exactly as issued, prefix included.
func NewSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+).
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Sign returns the X-SVC-Signature value for body sent at time t: "t=<unix seconds>,v1=<hex>", with one
// v1 per secret (several while a secret rotates; put the newest first). Each v1 is the lowercase hex
// HMAC-SHA256, keyed with the secret's bytes, of "<t>.<body>" — the same scheme as Stripe's
// Stripe-Signature, so any Stripe-compatible verifier accepts it. The body is streamed into the HMAC,
// never copied. No secrets, or an empty one, is ErrNoSecret.
func Sign(body []byte, t time.Time, secrets ...string) (string, error) {
	if len(secrets) == 0 {
		return "", ErrNoSecret
	}
	for _, s := range secrets {
		if s == "" {
			return "", ErrNoSecret
		}
	}
	// "<t>." is what the HMAC sees before the body; the header repeats "<t>" without the dot.
	signed := strconv.AppendInt(make([]byte, 0, 24), t.Unix(), 10)
	ts := signed[:len(signed):len(signed)]
	signed = append(signed, '.')
	out := make([]byte, 0, 2+len(ts)+len(secrets)*(4+2*sha256.Size))
	out = append(out, "t="...)
	out = append(out, ts...)
	var sum [sha256.Size]byte
	for _, s := range secrets {
		mac := hmac.New(sha256.New, []byte(s))
		mac.Write(signed)
		mac.Write(body)
		out = append(out, ",v1="...)
		out = hex.AppendEncode(out, mac.Sum(sum[:0]))
	}
	return string(out), nil
}

// Signer signs with a fixed list of secrets and keeps their keyed HMAC states in pools, as a Verifier
// does, so that a producer signing many deliveries neither re-keys an HMAC nor allocates more than the
// header string per message. Build one with NewSigner; it is safe for concurrent use. The header it
// writes is byte for byte what Sign writes for the same body, time and secrets. The zero value has no
// secrets: its Sign is ErrNoSecret.
type Signer struct {
	keys []*verifierKey
}

// NewSigner returns a Signer for secrets, newest first while a secret rotates. No secrets, or an empty
// one, is ErrNoSecret.
func NewSigner(secrets []string) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, ErrNoSecret
	}
	s := &Signer{keys: make([]*verifierKey, len(secrets))}
	for i, sec := range secrets {
		if sec == "" {
			return nil, ErrNoSecret
		}
		s.keys[i] = newVerifierKey(sec)
	}
	return s, nil
}

// Sign returns the X-SVC-Signature value for body sent at time t. A nil or zero Signer (one not built
// by NewSigner) returns ErrNoSecret rather than a header without a signature: there is no "signing
// off".
func (s *Signer) Sign(body []byte, t time.Time) (string, error) {
	if s == nil || len(s.keys) == 0 {
		return "", ErrNoSecret
	}
	// Room for "t=<20 digits>" and two v1s on the stack; more secrets than that grow onto the heap.
	var stack [2 + 20 + 2*(4+2*sha256.Size)]byte
	out := append(stack[:0], "t="...)
	out = strconv.AppendInt(out, t.Unix(), 10)
	ts := out[2:]
	for _, k := range s.keys {
		m := k.pool.Get().(*macState)
		m.mac.Reset()
		n := copy(m.text[:], ts) // fits: at most 20 bytes
		m.text[n] = '.'
		m.mac.Write(m.text[:n+1])
		m.mac.Write(body)
		sum := m.mac.Sum(m.sum[:0])
		out = append(out, ",v1="...)
		out = hex.AppendEncode(out, sum)
		k.pool.Put(m)
		ts = out[2 : 2+len(ts)] // out may have moved
	}
	return string(out), nil
}
