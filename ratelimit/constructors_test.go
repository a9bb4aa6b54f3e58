package ratelimit

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every constructor refuses a configuration it cannot honour with an error that names it; none panics.
func TestConstructorsRefuseInvalidConfiguration(t *testing.T) {
	key := func(*http.Request) (string, error) { return "k", nil }
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"middleware without a limiter", func() error { _, err := New(nil, key, nil); return err }, "New needs a Limiter"},
		{"middleware without a key function", func() error { _, err := New(must(NewTokenBucket(1, 1, nil)), nil, nil); return err }, "New needs a key CallerFunc"},
		{"token bucket with burst 0", func() error { _, err := NewTokenBucket(1, 0, nil); return err }, "burst of at least 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.err() })
			require.ErrorContains(t, err, "ratelimit: ")
			require.ErrorContains(t, err, tc.want)
		})
	}
}
