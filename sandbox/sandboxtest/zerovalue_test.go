package sandboxtest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/sandbox/sandboxtest"
)

// A Producer that NewProducer did not build has no server, log or dispatcher: every method with an
// error result returns ErrNotBuilt instead of panicking, and Close has nothing to stop.
func TestZeroProducer(t *testing.T) {
	ctx := t.Context()
	for _, p := range []*sandboxtest.Producer{{}, nil} {
		for _, tc := range []struct {
			name string
			call func() error
		}{
			{"Publish", func() error { _, err := p.Publish(ctx, "order.created", nil); return err }},
			{"Emit", func() error { _, err := p.Emit(ctx, "order.created", nil); return err }},
			{"Flush", func() error { return p.Flush(ctx) }},
			{"SetFaults", func() error { return p.SetFaults(sandbox.Faults{Drop: 1}) }},
			{"Events", func() error { _, err := p.Events(ctx); return err }},
		} {
			name := tc.name
			if p == nil {
				name = "nil " + name
			}
			t.Run(name, func(t *testing.T) {
				var err error
				require.NotPanics(t, func() { err = tc.call() })
				require.ErrorIs(t, err, sandboxtest.ErrNotBuilt)
			})
		}
		require.NotPanics(t, func() { p.Close() })
	}
}
