package idempotency_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
)

// TestZeroValues: every method with an error result on a type whose zero value is not usable
// returns an error (ErrNotBuilt, or "not the owner" for an Attempt), on the zero value and on a nil
// pointer, instead of panicking or doing nothing. memstore's TestZeroValue checks the memory store.
func TestZeroValues(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		call func() error
		want error // nil: any error
	}{
		{"Middleware.Begin", func() error {
			_, err := (&idempotency.Middleware{}).Begin(ctx, idempotency.Request{Key: "k1", Scope: "s"})
			return err
		}, idempotency.ErrNotBuilt},
		{"Middleware.Close", func() error { return (&idempotency.Middleware{}).Close(ctx) }, idempotency.ErrNotBuilt},
		{"nil Middleware.Close", func() error { return (*idempotency.Middleware)(nil).Close(ctx) }, idempotency.ErrNotBuilt},
		{"Attempt.Complete", func() error { return (&idempotency.Attempt{}).Complete(ctx, idempotency.Response{Status: 200}) }, nil},
		{"Attempt.Release", func() error { return (&idempotency.Attempt{}).Release(ctx) }, nil},
		{"nil Attempt.Complete", func() error { return (*idempotency.Attempt)(nil).Complete(ctx, idempotency.Response{Status: 200}) }, nil},
		{"nil Attempt.Release", func() error { return (*idempotency.Attempt)(nil).Release(ctx) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Error(t, err)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
		})
	}
}

// The methods without an error result answer as an empty value would, without panicking.
func TestZeroValuesWithoutErrorResult(t *testing.T) {
	require.Zero(t, (*idempotency.Middleware)(nil).Stats())
	require.Equal(t, context.Background(), (*idempotency.Attempt)(nil).Context())
	require.Nil(t, (*idempotency.Attempt)(nil).Problem())
}
