package benchmarks

import (
	"crypto/rand"
	"encoding/base32"
)

// idEncoding is lowercase base32 without padding: 16 random bytes become 26 characters that serve as
// an event ID, an idempotency key, a Redis key prefix and an unquoted PostgreSQL schema or database
// name alike.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// randomID returns prefix followed by 128 random bits from crypto/rand: what the root module's
// internal randid makes, written out here because this module must not import the root module's
// internal/.
func randomID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+): it crashes the program instead.
	return prefix + idEncoding.EncodeToString(b[:])
}
