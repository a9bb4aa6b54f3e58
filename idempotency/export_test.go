package idempotency

// CanonicalJSON exposes the canonical form that CanonicalJSONFingerprint hashes, without its tag,
// to the package's external tests and fuzzers; ok is false for a body that is not strict JSON.
func CanonicalJSON(body []byte) (form []byte, ok bool) {
	c := new(canonicalizer)
	out, ok := c.canonical(body)
	if !ok {
		return nil, false
	}
	return append([]byte(nil), out[len(tagCanonicalJSON):]...), true
}
