package sandbox

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
)

// Every constructor refuses a configuration it cannot honour with an error that names it; none panics.
func TestConstructorsRefuseInvalidConfiguration(t *testing.T) {
	hook := func(context.Context, apikey.Principal) error { return nil }
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"fault transport without a source", func() error { _, err := NewFaultTransport(nil, nil, nil); return err }, "needs a FaultSource"},
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
