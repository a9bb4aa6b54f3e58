// Package randid makes the random identifiers the library hands out: request IDs (req_…), event IDs
// (evt_…) and the IDs of the example resources. They come from crypto/rand so that an ID never tells
// anything about another one.
package randid

import (
	"crypto/rand"
	"encoding/base32"
)

// enc is lowercase base32 without padding: 16 random bytes become 26 characters that are safe in a
// URL, a header and a JSON string without escaping.
var enc = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// New returns prefix followed by 128 random bits (26 characters).
func New(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+): it crashes the program instead.
	out := make([]byte, len(prefix)+enc.EncodedLen(len(b)))
	copy(out, prefix)
	enc.Encode(out[len(prefix):], b[:])
	return string(out)
}
