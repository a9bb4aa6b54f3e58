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
