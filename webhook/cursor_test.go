package webhook_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/cursortest"
)

func TestMemoryCursorStore(t *testing.T) {
	cursortest.Run(t, func(*testing.T) webhook.CursorStore { return &webhook.MemoryCursorStore{} })
}

// MemoryCursorStore refuses a move the contract rules out, for code that uses it directly: a store
// need not (CursorStore), and the Tracker never asks (TestTrackerAdvancesOnlyForward). These cases
// were the conformance suite's InvalidArguments until the stores stopped checking.
func TestMemoryCursorStoreRefusesInvalidArguments(t *testing.T) {
	ctx := context.Background()
	var s webhook.MemoryCursorStore
	require.NoError(t, s.Advance(ctx, "we_1", 0, 10))
	cases := []struct {
		name     string
		from, to uint64
		want     error
	}{
		{"same", 10, 10, webhook.ErrCursorBackward},
		{"backward", 10, 9, webhook.ErrCursorBackward},
		{"zero to zero", 0, 0, webhook.ErrCursorBackward},
		{"above MaxSequence", 10, webhook.MaxSequence + 1, webhook.ErrCursorRange},
		{"max uint64", 10, ^uint64(0), webhook.ErrCursorRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, s.Advance(ctx, "we_1", tc.from, tc.to), tc.want)
			got, err := s.Get(ctx, "we_1")
			require.NoError(t, err)
			require.Equal(t, uint64(10), got)
		})
	}
}
