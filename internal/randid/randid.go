// Package randid makes the random identifiers the library hands out: request IDs (req_…), event IDs
// (evt_…) and the IDs of the example resources. They come from crypto/rand so that an ID never tells
// anything about another one.
package randid

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
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

// Uint63 returns a random integer in [1, 2^63): a numeric ID that fits a signed 64-bit database column
// and, unlike a counter, tells nothing about how many others were handed out.
func Uint63() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if n := binary.BigEndian.Uint64(b[:]) >> 1; n != 0 {
			return n
		}
	}
}
