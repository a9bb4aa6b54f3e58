package apikey

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Every constructor refuses a configuration it cannot honour with an error that names it; none panics.
func TestConstructorsRefuseInvalidConfiguration(t *testing.T) {
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"authenticator without a resolver", func() error { _, err := NewAuthenticator(nil, nil); return err }, "NewAuthenticator needs a Resolver"},
		{"issuer with a negative TTL", func() error { _, err := NewIssuer(nil, &IssuerOptions{SandboxTTL: -1}); return err }, "a TTL is negative"},
		{"issuer with a relative base URL", func() error {
			_, err := NewIssuer(nil, &IssuerOptions{LiveBaseURL: "api.example.com"})
			return err
		}, `LiveBaseURL "api.example.com" is not an absolute http or https URL`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.err() })
			require.ErrorContains(t, err, "apikey: ")
			require.ErrorContains(t, err, tc.want)
		})
	}
}
