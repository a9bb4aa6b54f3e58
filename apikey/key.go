package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// Environment is where a credential works: the sandbox or production. It comes from the key alone,
// so a request can never be in one environment while its data lands in the other.
type Environment string

// The two environments. The zero Environment is neither and is refused everywhere.
const (
	Sandbox Environment = "sandbox"
	Live    Environment = "live"
)

// Valid reports whether e is Sandbox or Live.
func (e Environment) Valid() bool { return e == Sandbox || e == Live }

// keyPrefix is "sk_<environment>_": a scanner finds leaked keys by it, and a reader tells a production
// key from a sandbox key at a glance.
func (e Environment) keyPrefix() string {
	switch e { // constants: the hot path builds no string
	case Sandbox:
		return "sk_sandbox_"
	case Live:
		return "sk_live_"
	}
	return "sk_" + string(e) + "_"
}

// Key layout after the prefix: 20 random bytes and a 5-byte checksum, 25 bytes in lowercase unpadded
// base32 (exactly 40 characters, no padding bits, so every key has one spelling).
const (
	keyRandomBytes   = 20 // 160 bits: not guessable, so a plain SHA-256 suffices to store it
	keyChecksumBytes = 5  // 40 bits: a typo or a truncation is caught before any lookup
	keyBodyLen       = (keyRandomBytes + keyChecksumBytes) * 8 / 5
)

// keyEncoding is lowercase base32 without padding: safe in a header, a URL and a shell without quoting,
// and double-click selectable.
var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Errors of Parse. Neither message contains the key.
var (
	// ErrMalformed: the string is not shaped like an API key (prefix, length or alphabet).
	ErrMalformed = errors.New("apikey: API key is malformed")
	// ErrChecksum: the string is shaped like an API key but its checksum does not match, so it was
	// mistyped, truncated or altered (a sandbox key relabelled sk_live_, say).
	ErrChecksum = errors.New("apikey: API key checksum does not match")
)

// Key is an API key that passed Parse (or came from New): well-formed, with a matching checksum. It is
// not yet known to exist; an Issuer resolves it. The zero Key is invalid. A Key is an immutable value,
// safe to copy and share. String and LogValue redact it, so a Key can be logged; the full key is never
// stored, only its Hash.
type Key struct {
	env Environment
	s   string
}

// KeyHash is the SHA-256 of a whole API key string, prefix included: all a CredentialStore keeps. It
// is a plain value; the zero KeyHash is the hash of no key, and no credential has it.
type KeyHash [sha256.Size]byte

// String returns the hash in lowercase hex.
func (h KeyHash) String() string { return hex.EncodeToString(h[:]) }

// HashKey returns the hash of the API key string s.
func HashKey(s string) KeyHash { return sha256.Sum256([]byte(s)) }

// New returns a fresh API key for env: "sk_<env>_" and 40 base32 characters (160 random bits from
// crypto/rand and a 40-bit checksum). An Issuer calls it; a test that needs a well-formed key no
// credential has can too.
func New(env Environment) (Key, error) {
	if !env.Valid() {
		return Key{}, fmt.Errorf("%w: %q", ErrInvalidEnvironment, env)
	}
	var raw [keyRandomBytes + keyChecksumBytes]byte
	_, _ = rand.Read(raw[:keyRandomBytes]) // crypto/rand.Read never fails (Go 1.24+).
	prefix := env.keyPrefix()
	sum := keyChecksum(prefix, raw[:keyRandomBytes])
	copy(raw[keyRandomBytes:], sum[:keyChecksumBytes])
	b := make([]byte, len(prefix)+keyBodyLen)
	copy(b, prefix)
	keyEncoding.Encode(b[len(prefix):], raw[:])
	return Key{env: env, s: string(b)}, nil
}

// keyChecksum covers the prefix too, so relabelling a sandbox key as a live one fails the checksum.
// The input is assembled on the stack: Parse runs on every request and allocates nothing.
func keyChecksum(prefix string, random []byte) [sha256.Size]byte {
	var buf [len("sk_sandbox_") + keyRandomBytes]byte
	n := copy(buf[:], prefix)
	n += copy(buf[n:], random)
	return sha256.Sum256(buf[:n])
}

// Parse checks that s is an API key: a known prefix, 40 characters of the key alphabet, and a
// matching checksum. It does no lookup, so a typo costs no database round trip. Errors wrap
// ErrMalformed or ErrChecksum and never contain s.
func Parse(s string) (Key, error) {
	var env Environment
	switch {
	case strings.HasPrefix(s, Sandbox.keyPrefix()):
		env = Sandbox
	case strings.HasPrefix(s, Live.keyPrefix()):
		env = Live
	default:
		return Key{}, fmt.Errorf("%w: want the prefix sk_sandbox_ or sk_live_", ErrMalformed)
	}
	prefix := env.keyPrefix()
	body := s[len(prefix):]
	if len(body) != keyBodyLen {
		return Key{}, fmt.Errorf("%w: want %d characters after %s, got %d", ErrMalformed, keyBodyLen, prefix, len(body))
	}
	for i := 0; i < len(body); i++ {
		if c := body[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return Key{}, fmt.Errorf("%w: character %d after %s is outside a-z, 2-7", ErrMalformed, i+1, prefix)
		}
	}
	raw := keyDecode(body)
	sum := keyChecksum(prefix, raw[:keyRandomBytes])
	// Not secret (anyone can compute it), so an ordinary comparison is fine here.
	if string(sum[:keyChecksumBytes]) != string(raw[keyRandomBytes:]) {
		return Key{}, ErrChecksum
	}
	return Key{env: env, s: s}, nil
}

// keyDecode decodes a key body already checked to be keyBodyLen characters of the key alphabet: eight
// characters to five bytes at a time. encoding/base32 would do the same but allocates, and this runs
// on every request.
func keyDecode(body string) [keyRandomBytes + keyChecksumBytes]byte {
	var raw [keyRandomBytes + keyChecksumBytes]byte
	for g := 0; g < keyBodyLen/8; g++ {
		var v uint64
		for _, c := range []byte(body[g*8 : g*8+8]) {
			d := c - 'a'
			if c <= '7' {
				d = c - '2' + 26
			}
			v = v<<5 | uint64(d)
		}
		for j := 4; j >= 0; j-- {
			raw[g*5+j] = byte(v)
			v >>= 8
		}
	}
	return raw
}

// Environment returns the environment the key belongs to.
func (k Key) Environment() Environment { return k.env }

// Hash returns the key's SHA-256, the only form in which it is stored.
func (k Key) Hash() KeyHash { return HashKey(k.s) }

// Reveal returns the key itself, for handing it to its owner once. Nothing else should need it.
func (k Key) Reveal() string { return k.s }

// String returns a redacted form, "sk_live_…wxyz": enough to tell keys apart, useless to an attacker.
func (k Key) String() string { return redact(k.s) }

// LogValue logs the redacted form.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// redact returns s with all but its prefix and last four characters replaced by "…", for logging a
// string that may be an API key or a secret. A string of eight characters or fewer becomes "…".
// (apierror.Redact is another thing: it finds credential-shaped words inside a longer text.)
func redact(s string) string {
	prefix := ""
	switch {
	case strings.HasPrefix(s, Sandbox.keyPrefix()):
		prefix = Sandbox.keyPrefix()
	case strings.HasPrefix(s, Live.keyPrefix()):
		prefix = Live.keyPrefix()
	case strings.HasPrefix(s, "whsec_"):
		prefix = "whsec_"
	}
	rest := s[len(prefix):]
	if len(rest) <= 8 {
		return prefix + "…"
	}
	return prefix + "…" + rest[len(rest)-4:]
}
