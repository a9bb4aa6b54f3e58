// Package testid makes the random names the modules' tests and benchmarks give what they share with
// others: PostgreSQL schemas and databases, Redis key prefixes, idempotency keys, event IDs. It is
// this repository's shared test infrastructure, in the module internal/testkit so that no nested
// module imports the root module's internal/ (whose randid makes the library's own IDs).
package testid

import (
	"crypto/rand"
	"encoding/base32"
)

// encoding is lowercase base32 without padding: 16 random bytes become 26 characters that serve as
// an unquoted PostgreSQL identifier, a Redis key, a URL segment and a JSON string alike.
var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// New returns prefix followed by 128 random bits from crypto/rand (26 characters), so that tests
// running at once, in one process or several, never meet.
func New(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+): it crashes the program instead.
	return prefix + encoding.EncodeToString(b[:])
}
