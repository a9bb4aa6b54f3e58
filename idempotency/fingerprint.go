package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"net/url"
)

// NewFingerprint computes the fingerprint of a request: SHA-256 over its method, escaped path,
// canonical query and the SHA-256 of its body. Each part is length-prefixed, so no two different
// requests can run together into one input.
//
// The query is canonical when its parameters are sorted by name, keeping the order of a name's
// values, and re-encoded: "b=2&a=1" and "a=1&b=2" are the same request, "a=1&a=2" and "a=2&a=1" are
// not. A query that does not parse is taken as it is, marked so that it never equals the canonical
// form of a query that does.
func NewFingerprint(method, path, rawQuery string, bodySHA256 [32]byte) Fingerprint {
	var buf [256]byte
	b := buf[:0]
	b = appendPart(b, method)
	b = appendPart(b, path)
	b = appendPart(b, canonicalQuery(rawQuery))
	b = append(b, bodySHA256[:]...)
	return sha256.Sum256(b)
}

func appendPart(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// canonicalQuery sorts the parameters; it allocates only when there is a query.
func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	v, err := url.ParseQuery(raw)
	if err != nil {
		return "!" + raw // Encode escapes '!', so no canonical query starts with it
	}
	return v.Encode()
}
