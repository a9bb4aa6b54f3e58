package pgstore

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
)

// The random identifiers EventLog hands out: event IDs (evt_…) and delivery attempt IDs. They are the
// root module's internal randid, copied rather than imported: a nested module that imported the root
// module's internal/ would be tied to the one commit of the root module whose internal API it was
// built against.

// idEncoding is lowercase base32 without padding: 16 random bytes become 26 characters that are safe
// in a URL, a header and a JSON string without escaping.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newRandomID returns prefix followed by 128 random bits from crypto/rand (26 characters), so that
// an ID never tells anything about another one.
func newRandomID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+): it crashes the program instead.
	out := make([]byte, len(prefix)+idEncoding.EncodedLen(len(b)))
	copy(out, prefix)
	idEncoding.Encode(out[len(prefix):], b[:])
	return string(out)
}

// randomUint63 returns a random integer in [1, 2^63): a numeric ID that fits a signed 64-bit column
// and, unlike a counter, tells nothing about how many others were handed out.
func randomUint63() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if n := binary.BigEndian.Uint64(b[:]) >> 1; n != 0 {
			return n
		}
	}
}
