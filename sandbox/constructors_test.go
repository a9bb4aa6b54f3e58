package sandbox

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every constructor refuses a configuration it cannot honour with an error that names it; none panics.
func TestConstructorsRefuseInvalidConfiguration(t *testing.T) {
	hook := func(context.Context, Principal) error { return nil }
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"authenticator without a resolver", func() error { _, err := NewAuthenticator(nil, nil); return err }, "NewAuthenticator needs a Resolver"},
		{"rate limit without a limiter", func() error { _, err := NewRateLimit(nil, nil); return err }, "NewRateLimit needs a Limiter"},
		{"token bucket with burst 0", func() error { _, err := NewTokenBucket(1, 0, nil); return err }, "burst of at least 1"},
		{"fault transport without a source", func() error { _, err := NewFaultTransport(nil, nil, nil); return err }, "needs a FaultSource"},
		{"issuer with a negative TTL", func() error { _, err := NewIssuer(nil, &IssuerOptions{SandboxTTL: -1}); return err }, "a TTL is negative"},
		{"issuer with a relative base URL", func() error {
			_, err := NewIssuer(nil, &IssuerOptions{LiveBaseURL: "api.example.com"})
			return err
		}, `LiveBaseURL "api.example.com" is not an absolute http or https URL`},
		{"controls without hooks", func() error { _, err := NewControls(Hooks{}, nil); return err }, "at least one hook"},
		{"controls under a relative prefix", func() error {
			_, err := NewControls(Hooks{Reset: hook}, &ControlsOptions{Prefix: "sandbox"})
			return err
		}, `Prefix "sandbox" is not an absolute path`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.err() })
			require.ErrorContains(t, err, "sandbox: ")
			require.ErrorContains(t, err, tc.want)
		})
	}
}
