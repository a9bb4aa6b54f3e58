package idempotency

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

// Errors of Sealer.Open.
var (
	// ErrSealUnknownKey: the blob names a key that is not in the ring — retired too early, or lost.
	// The error Open returns wraps it and names the key ID.
	ErrSealUnknownKey = errors.New("idempotency: sealed with a key that is not in the ring")
	// ErrSealCorrupt: the blob is malformed, truncated, tampered with, or was sealed for other
	// additional data (another record).
	ErrSealCorrupt = errors.New("idempotency: sealed body is corrupt or belongs to another record")
)

// SealSecretSize is the length of a SealKey's secret: AES-256.
const SealSecretSize = 32

// SealOverhead is how many bytes Seal adds to a plaintext, so that a caller can give dst room for
// len(plaintext)+SealOverhead more bytes and Seal allocates nothing.
const SealOverhead = sealHeaderSize + sealTagSize

// Blob layout: version (1) | key ID (4, big-endian) | nonce (12) | ciphertext | tag (16).
const (
	sealVersion    = 1
	sealPrefixSize = 1 + 4 // version and key ID: cleartext, so Open can pick the key; authenticated
	sealNonceSize  = 12
	sealHeaderSize = sealPrefixSize + sealNonceSize
	sealTagSize    = 16

	// sealADBufSize bounds the pooled additional-data buffers. The middleware's aad is a scope and an
	// Idempotency-Key (at most ~320 bytes); anything longer gets a one-off buffer.
	sealADBufSize = 512
)

// SealKey is one key of a Sealer's ring.
//
// Its String and GoString methods hide the secret, so a key that reaches a log through fmt prints
// as "7:<redacted>"; Reveal returns the text form that ParseSealKey reads. It is a plain value; the
// zero SealKey (ID 0, no secret) is refused by NewSealer.
type SealKey struct {
	// ID names the key inside every sealed blob; unique in a ring; never 0.
	ID uint32
	// Secret is exactly SealSecretSize (32) bytes. NewSealer does not keep it.
	Secret []byte
}

// GenerateSealKey returns a fresh random key with the given ID (which must not be 0).
func GenerateSealKey(id uint32) (SealKey, error) {
	if id == 0 {
		return SealKey{}, errors.New("idempotency: seal key ID must not be 0")
	}
	k := SealKey{ID: id, Secret: make([]byte, SealSecretSize)}
	// Since Go 1.24 rand.Read never fails (it crashes the program if the OS source does), but the
	// error is still checked in case that ever changes.
	if _, err := rand.Read(k.Secret); err != nil {
		return SealKey{}, fmt.Errorf("idempotency: generating seal key: %w", err)
	}
	return k, nil
}

// ParseSealKey parses the text form of a key, "<id>:<secret>", as produced by Reveal and typically
// read from an environment variable or a secret file: id is decimal (1 to 4294967295) and secret is
// 32 bytes in base64, standard or URL alphabet, padded or not. Surrounding white space (a file's
// final newline) is ignored. Errors say which part is wrong but never contain the input, since the
// secret — or a key pasted the wrong way round — would end up in logs.
func ParseSealKey(s string) (SealKey, error) {
	s = strings.TrimSpace(s)
	idText, secretText, ok := strings.Cut(s, ":")
	if !ok {
		return SealKey{}, errors.New(`idempotency: seal key: want "<id>:<base64 secret>", found no ":"`)
	}
	// strconv's errors quote their input, which could be the secret if the parts are swapped, so
	// they are replaced rather than wrapped.
	id, err := strconv.ParseUint(idText, 10, 32)
	if err != nil || id == 0 {
		return SealKey{}, fmt.Errorf("idempotency: seal key: the ID before the colon (%d characters) must be a decimal number from 1 to 4294967295", len(idText))
	}
	secret, err := decodeSealSecret(secretText)
	if err != nil {
		return SealKey{}, fmt.Errorf("idempotency: seal key %d: the secret after the colon %v", id, err)
	}
	return SealKey{ID: uint32(id), Secret: secret}, nil
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
			if len(b) != SealSecretSize {
				return nil, fmt.Errorf("decodes to %d bytes, want %d", len(b), SealSecretSize)
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

// Reveal returns the key's text form, "<id>:<secret in unpadded base64url>", which ParseSealKey
// reads. It is the one method that shows the secret: use it to provision a key, never to log one.
func (k SealKey) Reveal() string {
	return strconv.FormatUint(uint64(k.ID), 10) + ":" + base64.RawURLEncoding.EncodeToString(k.Secret)
}

// String returns "<id>:<redacted>": the ID, which is not secret and tells keys apart in logs.
func (k SealKey) String() string {
	return strconv.FormatUint(uint64(k.ID), 10) + ":<redacted>"
}

// GoString keeps %#v, which would otherwise print the secret's bytes, as discreet as %v.
func (k SealKey) GoString() string {
	return "idempotency.SealKey{ID: " + strconv.FormatUint(uint64(k.ID), 10) + ", Secret: <redacted>}"
}

// Sealer encrypts and authenticates stored response bodies with AES-256-GCM, so that a body that
// carries a secret (an API key shown once, a webhook signing secret) never lies in plain text in a
// Store. A Sealer is safe for concurrent use. Its zero value is not usable: its Open returns an
// error that wraps ErrNotBuilt, and its Seal, which has no error result, panics rather than return
// plain text, because a Sealer that silently stored plain text would defeat its purpose. Create one
// with NewSealer.
//
// # Keys and rotation
//
// A Sealer holds a ring of keys: it seals with the first and opens with any, choosing by the key ID
// that every blob carries. To rotate, generate a key with a new ID (GenerateSealKey), put it first,
// and keep the previous keys after it until every record sealed with them has expired — the
// middleware's Retention, 24 hours by default — then drop them. During a rolling deploy, first ship
// the new key second in the ring everywhere, then first, so that no instance meets a blob it cannot
// open.
//
// Each Seal draws a random 96-bit nonce, so a key must seal well under 2^32 bodies: beyond that the
// chance that two seals share a nonce, which would break GCM's confidentiality and authenticity for
// that key, passes 2^-32. A key that seals 1,000 bodies a second reaches 2^32 in 136 years, but
// rotate by count, not by feel: every key well before 2^32 seals (and routinely, say monthly).
//
// # Lost keys
//
// If a key is lost or dropped too early, Open fails with an error that wraps ErrSealUnknownKey and
// names the key ID. The bodies sealed with it cannot be recovered, and the caller decides what to
// do. For an idempotency record the operation has already run, so it must not run again: answer
// with an error rather than treat the record as absent or replay an empty body as the original.
//
// # Format
//
// A sealed blob is: a version byte (1), the key ID (4 bytes, big-endian), a random 12-byte nonce,
// and the GCM ciphertext with its 16-byte tag — SealOverhead (33) bytes more than the plaintext.
// The version byte and key ID are authenticated along with the caller's additional data, which is
// not stored.
type Sealer struct {
	keys []sealerKey // keys[0] seals

	// adBufs holds *[sealADBufSize]byte. cipher.AEAD is an interface, so any buffer passed to it
	// escapes to the heap; pooling is what keeps Seal and Open free of per-call allocations.
	adBufs sync.Pool
}

type sealerKey struct {
	id   uint32
	aead cipher.AEAD
}

// NewSealer returns a Sealer that seals with keys[0] and opens with any of keys. It fails if there
// is no key, a secret is not 32 bytes, an ID is 0, or two keys share an ID. The secrets are not
// retained (the AES key schedules are), so the caller may zero them afterwards.
func NewSealer(keys ...SealKey) (*Sealer, error) {
	if len(keys) == 0 {
		return nil, errors.New("idempotency: NewSealer: no key")
	}
	s := &Sealer{
		keys:   make([]sealerKey, 0, len(keys)),
		adBufs: sync.Pool{New: func() any { return new([sealADBufSize]byte) }},
	}
	for i, k := range keys {
		if k.ID == 0 {
			return nil, fmt.Errorf("idempotency: NewSealer: key %d of %d has ID 0", i+1, len(keys))
		}
		if len(k.Secret) != SealSecretSize {
			return nil, fmt.Errorf("idempotency: NewSealer: key %d (ID %d) has a %d-byte secret, want %d", i+1, k.ID, len(k.Secret), SealSecretSize)
		}
		for j, prev := range keys[:i] {
			if prev.ID == k.ID {
				return nil, fmt.Errorf("idempotency: NewSealer: keys %d and %d share ID %d", j+1, i+1, k.ID)
			}
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("idempotency: NewSealer: key %d (ID %d): %w", i+1, k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("idempotency: NewSealer: key %d (ID %d): %w", i+1, k.ID, err)
		}
		s.keys = append(s.keys, sealerKey{id: k.ID, aead: aead})
	}
	return s, nil
}

// Seal appends the sealed form of plaintext to dst and returns the extended slice. aad is
// authenticated but not stored: Open must be given the same aad. The middleware passes the record's
// scope and key, so a sealed body cannot be moved to another record.
//
// Seal allocates only when dst lacks room for len(plaintext)+SealOverhead more bytes. As with
// cipher.AEAD, plaintext must not overlap dst's spare capacity. Seal panics on a zero Sealer.
func (s *Sealer) Seal(dst, plaintext, aad []byte) []byte {
	if s == nil || len(s.keys) == 0 {
		panic("idempotency: Seal on a zero Sealer; create it with NewSealer")
	}
	k := &s.keys[0]
	var prefix [sealPrefixSize]byte
	prefix[0] = sealVersion
	binary.BigEndian.PutUint32(prefix[1:], k.id)
	// The additional data is copied before anything is written to dst, so aad may even lie in dst's
	// spare capacity.
	ad, buf := s.additionalData(prefix[:], aad)

	n := len(dst)
	out := slices.Grow(dst, SealOverhead+len(plaintext))[:n+sealHeaderSize]
	copy(out[n:], prefix[:])
	nonce := out[n+sealPrefixSize : n+sealHeaderSize]
	// Never fails since Go 1.24: a broken OS random source crashes the program instead.
	_, _ = rand.Read(nonce)
	out = k.aead.Seal(out, nonce, plaintext, ad)
	s.releaseAD(buf)
	return out
}

// Open checks sealed and appends its plaintext to dst. aad must be what was given to Seal. On
// failure it returns nil and an error: one that wraps ErrSealUnknownKey (naming the key ID) if the
// blob's key is not in the ring, otherwise ErrSealCorrupt.
//
// Open allocates only when dst lacks room for the plaintext (len(sealed)-SealOverhead bytes).
// dst's spare capacity must not overlap sealed. On a zero Sealer it returns an error that wraps
// ErrNotBuilt.
func (s *Sealer) Open(dst, sealed, aad []byte) ([]byte, error) {
	if s == nil || len(s.keys) == 0 {
		return nil, errZeroSealer
	}
	if len(sealed) < SealOverhead || sealed[0] != sealVersion {
		return nil, ErrSealCorrupt
	}
	id := binary.BigEndian.Uint32(sealed[1:])
	if id == 0 {
		// No Sealer writes ID 0, so this is damage, not a missing key.
		return nil, ErrSealCorrupt
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
		return nil, fmt.Errorf("%w (key ID %d)", ErrSealUnknownKey, id)
	}
	ad, buf := s.additionalData(sealed[:sealPrefixSize], aad)
	out, err := aead.Open(dst, sealed[sealPrefixSize:sealHeaderSize], sealed[sealHeaderSize:], ad)
	s.releaseAD(buf)
	if err != nil {
		return nil, ErrSealCorrupt
	}
	return out, nil
}

// additionalData returns prefix followed by aad, which GCM authenticates as one string. The
// prefix's fixed length keeps the concatenation unambiguous. buf is the pooled buffer to release,
// nil when aad was too long for one.
func (s *Sealer) additionalData(prefix, aad []byte) (ad []byte, buf *[sealADBufSize]byte) {
	if len(prefix)+len(aad) > sealADBufSize {
		return append(append(make([]byte, 0, len(prefix)+len(aad)), prefix...), aad...), nil
	}
	buf = s.adBufs.Get().(*[sealADBufSize]byte)
	return append(append(buf[:0], prefix...), aad...), buf
}

func (s *Sealer) releaseAD(buf *[sealADBufSize]byte) {
	if buf != nil {
		s.adBufs.Put(buf)
	}
}
