// Package seal encrypts and authenticates small secrets at rest with AES-256-GCM under a rotating
// key ring. It is the library's one sealing package: the idempotency middleware seals the records it
// stores (idempotency.Options.Sealer), and pgstore's webhook endpoint store seals endpoint signing
// secrets (pgstore.EndpointStoreOptions.Sealer), with the same keys.
//
// A Ring seals with its first key and opens with any of its keys, choosing by the key ID that every
// sealed blob carries (KeyID); the caller's associated data (which record, which endpoint) is
// authenticated but not stored, so a blob copied to another place does not open. Keys have a text
// form, "<id>:<base64 secret>" (ParseKey, Key.Reveal), for an environment variable or a secret file:
//
//	k, err := seal.ParseKey(os.Getenv("SEAL_KEY"))
//	ring, err := seal.NewRing(k)
//	blob := ring.Seal(nil, secret, []byte("endpoint we_123"))
//	secret, err = ring.Open(nil, blob, []byte("endpoint we_123"))
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Errors of Ring.Open.
var (
	// ErrUnknownKey: the blob names a key that is not in the ring — retired too early, or lost.
	// The error Open returns wraps it and names the key ID.
	ErrUnknownKey = errors.New("seal: sealed with a key that is not in the ring")
	// ErrCorrupt: the blob is malformed, truncated, tampered with, or was sealed for other
	// associated data (another record, another endpoint).
	ErrCorrupt = errors.New("seal: sealed data is corrupt or was sealed with other associated data")
)

// ErrNotBuilt: a Ring used without NewRing. Its Open returns it.
var ErrNotBuilt = errors.New("seal: Ring not built with NewRing")

// SecretSize is the length of a Key's secret: AES-256.
const SecretSize = 32

// Overhead is how many bytes Seal adds to a plaintext, so that a caller can give dst room for
// len(plaintext)+Overhead more bytes and Seal allocates nothing.
const Overhead = sealHeaderSize + sealTagSize

// Blob layout: version (1) | key ID (4, big-endian) | nonce (12) | ciphertext | tag (16).
const (
	sealVersion    = 1
	sealPrefixSize = 1 + 4 // version and key ID: cleartext, so Open can pick the key; authenticated
	sealNonceSize  = 12
	sealHeaderSize = sealPrefixSize + sealNonceSize
	sealTagSize    = 16

	// sealADBufSize bounds the pooled additional-data buffers. The idempotency middleware's aad is a
	// scope and an Idempotency-Key (at most ~350 bytes); anything longer gets a one-off buffer.
	sealADBufSize = 512
)

// Key is one key of a Ring.
//
// Its String and GoString methods hide the secret, so a key that reaches a log through fmt prints
// as "7:<redacted>"; Reveal returns the text form that ParseKey reads. It is a plain value; the
// zero Key (ID 0, no secret) is refused by NewRing.
type Key struct {
	// ID names the key inside every sealed blob; unique in a ring; never 0.
	ID uint32
	// Secret is exactly SecretSize (32) bytes. NewRing does not keep it.
	Secret []byte
}

// GenerateKey returns a fresh random key with the given ID (which must not be 0).
func GenerateKey(id uint32) (Key, error) {
	if id == 0 {
		return Key{}, errors.New("seal: key ID must not be 0")
	}
	k := Key{ID: id, Secret: make([]byte, SecretSize)}
	// Since Go 1.24 rand.Read never fails (it crashes the program if the OS source does), but the
	// error is still checked in case that ever changes.
	if _, err := rand.Read(k.Secret); err != nil {
		return Key{}, fmt.Errorf("seal: generating key: %w", err)
	}
	return k, nil
}

// ParseKey parses the text form of a key, "<id>:<secret>", as produced by Reveal and typically
// read from an environment variable or a secret file: id is decimal (1 to 4294967295) and secret is
// 32 bytes in base64, standard or URL alphabet, padded or not. Surrounding white space (a file's
// final newline) is ignored. Errors say which part is wrong but never contain the input, since the
// secret — or a key pasted the wrong way round — would end up in logs.
func ParseKey(s string) (Key, error) {
	s = strings.TrimSpace(s)
	idText, secretText, ok := strings.Cut(s, ":")
	if !ok {
		return Key{}, errors.New(`seal: key: want "<id>:<base64 secret>", found no ":"`)
	}
	// strconv's errors quote their input, which could be the secret if the parts are swapped, so
	// they are replaced rather than wrapped.
	id, err := strconv.ParseUint(idText, 10, 32)
	if err != nil || id == 0 {
		return Key{}, fmt.Errorf("seal: key: the ID before the colon (%d characters) must be a decimal number from 1 to 4294967295", len(idText))
	}
	secret, err := decodeSealSecret(secretText)
	if err != nil {
		return Key{}, fmt.Errorf("seal: key %d: the secret after the colon %v", id, err)
	}
	return Key{ID: uint32(id), Secret: secret}, nil
}

// sealSecretEncodings are tried in turn. A 32-byte secret is 44 characters padded or 43 not, and the
// two alphabets differ only in the characters for 62 and 63, so no text decodes differently under
// two of them; accepting all four spares operators from guessing which one a tool produced.
var sealSecretEncodings = [...]*base64.Encoding{
	base64.RawURLEncoding, base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding,
}

func decodeSealSecret(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("is empty")
	}
	// A CorruptInputError is only an offset, so it is safe to show; the encoding that read furthest
	// points at the character that is wrong under every encoding.
	furthest := base64.CorruptInputError(-1)
	for _, enc := range sealSecretEncodings {
		b, err := enc.DecodeString(s)
		if err == nil {
			if len(b) != SecretSize {
				return nil, fmt.Errorf("decodes to %d bytes, want %d", len(b), SecretSize)
			}
			return b, nil
		}
		if at, ok := err.(base64.CorruptInputError); ok && at > furthest {
			furthest = at
		}
	}
	if furthest < 0 {
		return nil, errors.New("is not base64 (standard or URL alphabet)")
	}
	return nil, fmt.Errorf("is not base64 (standard or URL alphabet): bad character or length at byte %d of %d", int64(furthest), len(s))
}

// Reveal returns the key's text form, "<id>:<secret in unpadded base64url>", which ParseKey
// reads. It is the one method that shows the secret: use it to provision a key, never to log one.
func (k Key) Reveal() string {
	return strconv.FormatUint(uint64(k.ID), 10) + ":" + base64.RawURLEncoding.EncodeToString(k.Secret)
}

// String returns "<id>:<redacted>": the ID, which is not secret and tells keys apart in logs.
func (k Key) String() string {
	return strconv.FormatUint(uint64(k.ID), 10) + ":<redacted>"
}

// GoString keeps %#v, which would otherwise print the secret's bytes, as discreet as %v.
func (k Key) GoString() string {
	return "seal.Key{ID: " + strconv.FormatUint(uint64(k.ID), 10) + ", Secret: <redacted>}"
}

// Ring encrypts and authenticates data at rest with AES-256-GCM — stored idempotency records, webhook
// signing secrets — so that what it seals never lies in plain text in a database, and what was
// changed there does not open. A Ring is safe for concurrent use. Its zero value is not usable: its
// Open returns ErrNotBuilt, its KeyID 0, and its Seal, which has no error result, panics rather than
// return plain text, because a Ring that silently stored plain text would defeat its purpose. Create
// one with NewRing.
//
// # Keys and rotation
//
// A Ring holds keys: it seals with the first and opens with any, choosing by the key ID that every
// blob carries (KeyID). To rotate, generate a key with a new ID (GenerateKey), put it first, and keep
// the previous keys after it until nothing sealed with them is left — for idempotency records, until
// they have expired (the middleware's Retention, 24 hours by default); for data that lives on, such as
// webhook signing secrets, until it has been sealed again under the new key (see
// pgstore.EndpointStore.Reseal) — then drop them. During a rolling deploy, first ship the new key
// second in the ring everywhere, then first, so that no instance meets a blob it cannot open.
//
// Each Seal draws a random 96-bit nonce, so a key must seal well under 2^32 bodies: beyond that the
// chance that two seals share a nonce, which would break GCM's confidentiality and authenticity for
// that key, passes 2^-32. A key that seals 1,000 bodies a second reaches 2^32 in 136 years, but
// rotate by count, not by feel: every key well before 2^32 seals (and routinely, say monthly).
//
// # Lost keys
//
// If a key is lost or dropped too early, Open fails with an error that wraps ErrUnknownKey and
// names the key ID. What was sealed with it cannot be recovered, and the caller decides what to do.
// For an idempotency record the operation has already run, so it must not run again: the middleware
// answers with an error rather than treat the record as absent or replay it.
//
// # Format
//
// A sealed blob is: a version byte (1), the key ID (4 bytes, big-endian), a random 12-byte nonce,
// and the GCM ciphertext with its 16-byte tag — Overhead (33) bytes more than the plaintext.
// The version byte and key ID are authenticated along with the caller's additional data, which is
// not stored.
type Ring struct {
	keys []ringKey // keys[0] seals

	// adBufs holds *[sealADBufSize]byte. cipher.AEAD is an interface, so any buffer passed to it
	// escapes to the heap; pooling is what keeps Seal and Open free of per-call allocations.
	adBufs sync.Pool
}

type ringKey struct {
	id   uint32
	aead cipher.AEAD
}

// NewRing returns a Ring that seals with keys[0] and opens with any of keys. It fails if there
// is no key, a secret is not 32 bytes, an ID is 0, or two keys share an ID. The secrets are not
// retained (the AES key schedules are), so the caller may zero them afterwards.
func NewRing(keys ...Key) (*Ring, error) {
	if len(keys) == 0 {
		return nil, errors.New("seal: NewRing: no key")
	}
	s := &Ring{
		keys:   make([]ringKey, 0, len(keys)),
		adBufs: sync.Pool{New: func() any { return new([sealADBufSize]byte) }},
	}
	for i, k := range keys {
		if k.ID == 0 {
			return nil, fmt.Errorf("seal: NewRing: key %d of %d has ID 0", i+1, len(keys))
		}
		if len(k.Secret) != SecretSize {
			return nil, fmt.Errorf("seal: NewRing: key %d (ID %d) has a %d-byte secret, want %d", i+1, k.ID, len(k.Secret), SecretSize)
		}
		for j, prev := range keys[:i] {
			if prev.ID == k.ID {
				return nil, fmt.Errorf("seal: NewRing: keys %d and %d share ID %d", j+1, i+1, k.ID)
			}
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("seal: NewRing: key %d (ID %d): %w", i+1, k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("seal: NewRing: key %d (ID %d): %w", i+1, k.ID, err)
		}
		s.keys = append(s.keys, ringKey{id: k.ID, aead: aead})
	}
	return s, nil
}

// Seal appends the sealed form of plaintext to dst and returns the extended slice. aad is
// authenticated but not stored: Open must be given the same aad. Callers pass what names the place the
// blob belongs to (a record's scope and key, an endpoint's ID), so that it cannot be moved.
//
// Seal allocates only when dst lacks room for len(plaintext)+Overhead more bytes. As with
// cipher.AEAD, plaintext must not overlap dst's spare capacity. Seal panics on a zero Ring.
func (s *Ring) Seal(dst, plaintext, aad []byte) []byte {
	if s == nil || len(s.keys) == 0 {
		panic("seal: Seal on a zero Ring; create it with NewRing")
	}
	k := &s.keys[0]
	var prefix [sealPrefixSize]byte
	prefix[0] = sealVersion
	binary.BigEndian.PutUint32(prefix[1:], k.id)
	// The additional data is copied before anything is written to dst, so aad may even lie in dst's
	// spare capacity.
	ad, buf := s.additionalData(prefix[:], aad)

	n := len(dst)
	out := slices.Grow(dst, Overhead+len(plaintext))[:n+sealHeaderSize]
	copy(out[n:], prefix[:])
	nonce := out[n+sealPrefixSize : n+sealHeaderSize]
	// Never fails since Go 1.24: a broken OS random source crashes the program instead.
	_, _ = rand.Read(nonce)
	out = k.aead.Seal(out, nonce, plaintext, ad)
	s.releaseAD(buf)
	return out
}

// Open checks sealed and appends its plaintext to dst. aad must be what was given to Seal. On
// failure it returns nil and an error: one that wraps ErrUnknownKey (naming the key ID) if the
// blob's key is not in the ring, otherwise ErrCorrupt.
//
// Open allocates only when dst lacks room for the plaintext (len(sealed)-Overhead bytes).
// dst's spare capacity must not overlap sealed. On a zero Ring it returns an error that wraps
// ErrNotBuilt.
func (s *Ring) Open(dst, sealed, aad []byte) ([]byte, error) {
	if s == nil || len(s.keys) == 0 {
		return nil, ErrNotBuilt
	}
	if len(sealed) < Overhead || sealed[0] != sealVersion {
		return nil, ErrCorrupt
	}
	id := binary.BigEndian.Uint32(sealed[1:])
	if id == 0 {
		// No Ring writes ID 0, so this is damage, not a missing key.
		return nil, ErrCorrupt
	}
	var aead cipher.AEAD
	// Rings hold two or three keys; a scan beats a map.
	for i := range s.keys {
		if s.keys[i].id == id {
			aead = s.keys[i].aead
			break
		}
	}
	if aead == nil {
		return nil, fmt.Errorf("%w (key ID %d)", ErrUnknownKey, id)
	}
	ad, buf := s.additionalData(sealed[:sealPrefixSize], aad)
	out, err := aead.Open(dst, sealed[sealPrefixSize:sealHeaderSize], sealed[sealHeaderSize:], ad)
	s.releaseAD(buf)
	if err != nil {
		return nil, ErrCorrupt
	}
	return out, nil
}

// KeyID returns the ID of the key the Ring seals with (its first), or 0 on a zero Ring. Compared
// with KeyID of a stored blob, it tells what still needs sealing again after a rotation.
func (s *Ring) KeyID() uint32 {
	if s == nil || len(s.keys) == 0 {
		return 0
	}
	return s.keys[0].id
}

// KeyID returns the ID of the key that sealed a blob, read from its cleartext prefix without opening
// it, or 0 when sealed is too short or not in the format Seal writes. It says which key Open will need
// and whether a blob predates a rotation; only Open says whether the blob is genuine.
func KeyID(sealed []byte) uint32 {
	if len(sealed) < Overhead || sealed[0] != sealVersion {
		return 0
	}
	return binary.BigEndian.Uint32(sealed[1:])
}

// additionalData returns prefix followed by aad, which GCM authenticates as one string. The
// prefix's fixed length keeps the concatenation unambiguous. buf is the pooled buffer to release,
// nil when aad was too long for one.
func (s *Ring) additionalData(prefix, aad []byte) (ad []byte, buf *[sealADBufSize]byte) {
	if len(prefix)+len(aad) > sealADBufSize {
		return append(append(make([]byte, 0, len(prefix)+len(aad)), prefix...), aad...), nil
	}
	buf = s.adBufs.Get().(*[sealADBufSize]byte)
	return append(append(buf[:0], prefix...), aad...), buf
}

func (s *Ring) releaseAD(buf *[sealADBufSize]byte) {
	if buf != nil {
		s.adBufs.Put(buf)
	}
}
