package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
	"time"
)

// DefaultTolerance is how far a signature's timestamp may lie from the verifier's clock, in either
// direction, when VerifierOptions.Tolerance is zero (Stripe's value).
const DefaultTolerance = 300 * time.Second

// maxSignatures bounds the v1 entries of one header. Rotation needs two; the bound keeps the work of a
// hostile header small and lets the parser decode into a fixed array instead of allocating.
const maxSignatures = 8

// maxTimestamp is the last second of the year 9999: a larger t is not a time any producer signs at.
const maxTimestamp = 253402300799

// Errors of verification. Every one starts with "webhook:" and none contains a signature or a secret.
// Malformed-header errors wrap ErrMalformedHeader, so one errors.Is check classifies all of them.
var (
	// ErrMissingHeader: the X-SVC-Signature header is absent or empty.
	ErrMissingHeader = errors.New("webhook: missing " + HeaderSignature + " header")
	// ErrMalformedHeader: the header is not "t=<unix seconds>,v1=<64 hex>[,v1=…]".
	ErrMalformedHeader = errors.New("webhook: malformed " + HeaderSignature + " header")
	// ErrDuplicateTimestamp: the header has more than one t=; which one was signed is ambiguous.
	ErrDuplicateTimestamp = fmt.Errorf("%w: more than one t=", ErrMalformedHeader)
	// ErrInvalidTimestamp: t= is not a canonical decimal Unix time between 1 and the end of year 9999.
	ErrInvalidTimestamp = fmt.Errorf("%w: t= is not a valid Unix time in seconds", ErrMalformedHeader)
	// ErrNoSignature: the header carries no v1= signature.
	ErrNoSignature = fmt.Errorf("%w: no v1= signature", ErrMalformedHeader)
	// ErrSignatureMismatch: no v1 matches any of the verifier's secrets. The error does not say which
	// secrets were tried or what was expected.
	ErrSignatureMismatch = errors.New("webhook: no signature matches")
	// ErrTooOld: the signature is authentic but its timestamp is further in the past than the tolerance
	// (a replay, or a delivery stuck in a queue).
	ErrTooOld = errors.New("webhook: signature timestamp is too old")
	// ErrTooNew: the signature is authentic but its timestamp is further in the future than the
	// tolerance (a clock out of step, or a signature minted ahead of time to be replayed later).
	ErrTooNew = errors.New("webhook: signature timestamp is in the future")
	// ErrNegativeTolerance: VerifierOptions.Tolerance is below zero.
	ErrNegativeTolerance = errors.New("webhook: negative tolerance")
)

// Reasons a header is malformed; each wraps ErrMalformedHeader and names no value from the header.
var (
	errEmptyItem    = fmt.Errorf("%w: empty item", ErrMalformedHeader)
	errItemNoEquals = fmt.Errorf("%w: item without '='", ErrMalformedHeader)
	errEmptyKey     = fmt.Errorf("%w: item with an empty key", ErrMalformedHeader)
	errNoTimestamp  = fmt.Errorf("%w: no t=", ErrMalformedHeader)
	errBadHex       = fmt.Errorf("%w: v1= is not 64 hexadecimal digits", ErrMalformedHeader)
	errTooManySigs  = fmt.Errorf("%w: more than %d v1= signatures", ErrMalformedHeader, maxSignatures)
	errZeroVerifier = fmt.Errorf("%w (the zero Verifier has no secrets: use NewVerifier)", ErrNoSecret)
)

// VerifierOptions tune a Verifier. A nil *VerifierOptions and the zero value mean the defaults.
type VerifierOptions struct {
	// Tolerance is how far the signed timestamp may lie from Now in either direction; zero means
	// DefaultTolerance. A timestamp exactly Tolerance away is accepted. Negative is an error: there is
	// no way to turn the check off.
	Tolerance time.Duration
	// Now is the clock; nil means time.Now. A RangeClient built with this Verifier measures the
	// durations it reports to its hooks with it too.
	Now func() time.Time
	// Hooks are told the result of every verification (Hooks.Verified): Verify and VerifyTime
	// calls, and those a Receiver or a RangeClient built with this Verifier make. nil means none.
	Hooks *Hooks
}

// Verifier checks X-SVC-Signature headers against a list of secrets. Build one with NewVerifier and
// share it: it is safe for concurrent use, and it keeps per-secret HMAC state in pools so that a
// verification allocates nothing. The zero value has no secrets and rejects everything with
// ErrNoSecret.
type Verifier struct {
	keys      []*verifierKey
	tolerance time.Duration
	now       func() time.Time
	hooks     *Hooks
}

// verifierKey is one secret's pool of ready HMAC states.
type verifierKey struct {
	pool sync.Pool // of *macState
}

// macState is an HMAC keyed with one secret plus scratch space, so that neither the timestamp bytes
// nor the sum need a heap allocation of their own.
type macState struct {
	mac  hash.Hash
	sum  [sha256.Size]byte
	text [24]byte // "<t>." — any int64 t with its sign, and the dot
}

func newVerifierKey(secret string) *verifierKey {
	key := []byte(secret) // one copy per Verifier; the pool's states share it read-only
	k := &verifierKey{}
	k.pool.New = func() any {
		m := &macState{mac: hmac.New(sha256.New, key)}
		// The first Reset snapshots the keyed inner and outer states; every later Reset restores them
		// instead of hashing the padded key again, which is what makes a pooled HMAC cheaper than
		// hmac.New per message.
		m.mac.Reset()
		return m
	}
	return k
}

// NewVerifier returns a Verifier that accepts a signature made with any of secrets. The HMAC key is
// each secret's bytes exactly as issued (the "whsec_" prefix included). No secrets, or an empty one,
// is ErrNoSecret: verification is never silently off.
func NewVerifier(secrets []string, opts *VerifierOptions) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, ErrNoSecret
	}
	v := &Verifier{tolerance: DefaultTolerance, now: time.Now}
	if opts != nil {
		if opts.Tolerance < 0 {
			return nil, ErrNegativeTolerance
		}
		if opts.Tolerance > 0 {
			v.tolerance = opts.Tolerance
		}
		if opts.Now != nil {
			v.now = opts.Now
		}
		v.hooks = opts.Hooks
	}
	v.keys = make([]*verifierKey, len(secrets))
	for i, s := range secrets {
		if s == "" {
			return nil, fmt.Errorf("%w (secret %d of %d)", ErrNoSecret, i+1, len(secrets))
		}
		v.keys[i] = newVerifierKey(s)
	}
	return v, nil
}

// Verify reports whether header is a valid X-SVC-Signature for body: some v1 in it is the HMAC-SHA256 of
// "<t>.<body>" under one of the verifier's secrets, and t lies within the tolerance of the clock in
// either direction. body must be the raw bytes as received, before any parsing.
//
// The error is nil or one of the package's sentinels (possibly wrapped with non-secret detail):
// ErrMissingHeader, ErrMalformedHeader (and the errors that wrap it: ErrDuplicateTimestamp,
// ErrInvalidTimestamp, ErrNoSignature), ErrSignatureMismatch, ErrTooOld or ErrTooNew. The signature is
// checked before the timestamp, so ErrTooOld and ErrTooNew always describe an authentic message.
func (v *Verifier) Verify(header string, body []byte) error {
	_, err := v.check(context.Background(), false, header, body)
	return err
}

// VerifyTime is Verify that also returns the signed timestamp, for callers that log delivery latency
// or order deliveries by signing time. The time is zero when the error is not nil.
func (v *Verifier) VerifyTime(header string, body []byte) (time.Time, error) {
	t, err := v.check(context.Background(), false, header, body)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(t, 0), nil
}

// check is verify, reported to the hooks with ctx as a verification of a delivery's body, or of a
// range response's with rangeResponse.
func (v *Verifier) check(ctx context.Context, rangeResponse bool, header string, body []byte) (int64, error) {
	t, err := v.verify(header, body)
	if v != nil && v.hooks != nil {
		v.hooks.verified(ctx, VerifyInfo{Result: verifyResultOf(err), RangeResponse: rangeResponse})
	}
	return t, err
}

func (v *Verifier) verify(header string, body []byte) (int64, error) {
	if v == nil || len(v.keys) == 0 {
		return 0, errZeroVerifier
	}
	if header == "" {
		return 0, ErrMissingHeader
	}
	var h sigHeader
	if err := parseHeader(header, &h); err != nil {
		return 0, err
	}
	if !v.matches(&h, body) {
		if h.malformed {
			// A malformed v1 is forgiven only beside one that matches.
			return 0, errBadHex
		}
		return 0, ErrSignatureMismatch
	}
	// Compared in whole seconds: age*time.Second could overflow for an absurd clock, and for a whole
	// number of seconds "age > tolerance" is the same as "age > floor(tolerance in seconds)".
	maxAge := int64(v.tolerance / time.Second)
	switch age := v.now().Unix() - h.t; {
	case age > maxAge:
		return 0, fmt.Errorf("%w: signed %ds before now, tolerance %s", ErrTooOld, age, v.tolerance)
	case age < -maxAge:
		return 0, fmt.Errorf("%w: signed %ds after now, tolerance %s", ErrTooNew, -age, v.tolerance)
	}
	return h.t, nil
}

// matches computes the HMAC under each secret once, streaming "<t>", "." and body into it, and compares
// it in constant time with every v1 of the header. It stops at the first match: which secret matched is
// not secret, and rotation puts the newest secret first.
func (v *Verifier) matches(h *sigHeader, body []byte) bool {
	for _, k := range v.keys {
		m := k.pool.Get().(*macState)
		m.mac.Reset()
		n := copy(m.text[:], h.ts)
		m.text[n] = '.'
		m.mac.Write(m.text[:n+1])
		m.mac.Write(body)
		sum := m.mac.Sum(m.sum[:0])
		ok := false
		for i := 0; i < h.n && !ok; i++ {
			ok = hmac.Equal(sum, h.sig[i][:])
		}
		k.pool.Put(m)
		if ok {
			return true
		}
	}
	return false
}

// sigHeader is a parsed X-SVC-Signature. It lives on the verifier's stack: the timestamp refers into
// the header string, and the signatures are decoded into fixed arrays.
type sigHeader struct {
	t   int64
	ts  string // the t= digits exactly as sent: they are what was signed
	sig [maxSignatures][sha256.Size]byte
	n   int
	// v1s counts every v1 entry, malformed ones included; malformed says some was not 64 hex digits.
	v1s       int
	malformed bool
}

// parseHeader parses "t=<t>,v1=<hex>[,v1=<hex>…]" in one pass without allocating (strings.Cut
// returns substrings of the header; nothing is split into a slice). Items are
// "key=value" separated by ','; keys other than t and v1 (v0, a future v2) are ignored so that a
// producer can add schemes, but every item must have that shape: no empty items and no spaces. t must
// appear exactly once, as canonical decimal. A v1 that is not 64 hex digits is skipped, as stripe-go
// skips it, so that the header still verifies through another v1; when no v1 is readable, or none
// matches and one was not readable, the header is malformed (errBadHex).
func parseHeader(header string, h *sigHeader) error {
	if header == "" {
		return ErrMissingHeader
	}
	seenT := false
	for rest, more := header, true; more; {
		var item string
		item, rest, more = strings.Cut(rest, ",")
		// The two items every header has are split without a search; anything else goes the general way.
		var key, val string
		ok := true
		switch {
		case len(item) > 3 && item[:3] == "v1=":
			key, val = "v1", item[3:]
		case len(item) > 2 && item[:2] == "t=":
			key, val = "t", item[2:]
		default:
			key, val, ok = strings.Cut(item, "=")
		}
		switch {
		case item == "":
			return errEmptyItem
		case !ok:
			return errItemNoEquals
		case key == "":
			return errEmptyKey
		case key == "t":
			if seenT {
				return ErrDuplicateTimestamp
			}
			seenT = true
			t, ok := parseTimestamp(val)
			if !ok {
				return ErrInvalidTimestamp
			}
			h.t, h.ts = t, val
		case key == "v1":
			if h.v1s == maxSignatures {
				return errTooManySigs
			}
			h.v1s++
			// A malformed v1 is skipped, as stripe-go skips it: a producer may add one this verifier
			// cannot read beside one it can. Verify still refuses the header when none matches.
			if decodeHex64(&h.sig[h.n], val) {
				h.n++
			} else {
				h.malformed = true
			}
		}
	}
	if !seenT {
		return errNoTimestamp
	}
	if h.n == 0 {
		if h.malformed {
			return errBadHex
		}
		return ErrNoSignature
	}
	return nil
}

// parseTimestamp accepts 1 to 12 decimal digits without sign or leading zero, in [1, maxTimestamp].
// Canonical form matters: the digits are signed as sent, and Stripe's verifier re-formats the number,
// so a non-canonical t would verify with one library and not the other.
func parseTimestamp(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 12 || s[0] == '0' {
		return 0, false
	}
	var t int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		t = t*10 + int64(c-'0')
	}
	return t, t <= maxTimestamp
}

// decodeHex64 decodes 64 hex digits into dst and reports whether s was exactly that. Upper case is
// accepted as encoding/hex does, though producers send lower case.
func decodeHex64(dst *[sha256.Size]byte, s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	s = s[:2*sha256.Size] // lets the compiler drop the bounds checks below
	bad := byte(0)
	for i := range dst {
		hi, lo := hexTable[s[2*i]], hexTable[s[2*i+1]]
		bad |= hi | lo // 0xff for a non-hex byte
		dst[i] = hi<<4 | lo
	}
	return bad <= 0xf
}

// hexValue maps a byte to its value as a hex digit, or to 0xff. A constant string rather than a table
// variable: it cannot be modified, and indexing it is a single load.
// hexTable is hexValue as an array: indexed by a byte, it needs no bounds check.
var hexTable = [256]byte([]byte(hexValue))

const hexValue = "" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\xff\xff\xff\xff\xff\xff" + // 0-9
	"\xff\x0a\x0b\x0c\x0d\x0e\x0f\xff\xff\xff\xff\xff\xff\xff\xff\xff" + // A-F
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\x0a\x0b\x0c\x0d\x0e\x0f\xff\xff\xff\xff\xff\xff\xff\xff\xff" + // a-f
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
