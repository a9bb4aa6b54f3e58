package ratelimit

// must returns v, and panics (failing the test with a stack) when a constructor refused
// the test's own configuration.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
