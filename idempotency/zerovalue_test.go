package idempotency_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
)

// TestZeroValues: every method with an error result on a type whose zero value is not usable
// returns an error (ErrNotBuilt, or "not the owner" for an Attempt), on the zero value and on a nil
// pointer, instead of panicking or doing nothing.
func TestZeroValues(t *testing.T) {
	ctx := t.Context()
	key := driver.Key{Scope: "s", Key: "k1"}
	now := time.Unix(1767225600, 0)
	var fp idempotency.Fingerprint
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
		{"MemoryStore.Claim", func() error {
			_, err := (&idempotency.MemoryStore{}).Claim(ctx, key, fp, now, now.Add(time.Minute), now.Add(time.Hour))
			return err
		}, idempotency.ErrNotBuilt},
		{"MemoryStore.Renew", func() error { return (&idempotency.MemoryStore{}).Renew(ctx, key, 1, now) }, idempotency.ErrNotBuilt},
		{"MemoryStore.Complete", func() error {
			return (&idempotency.MemoryStore{}).Complete(ctx, key, 1, idempotency.Response{Status: 200}, now)
		}, idempotency.ErrNotBuilt},
		{"MemoryStore.Release", func() error { return (&idempotency.MemoryStore{}).Release(ctx, key, 1) }, idempotency.ErrNotBuilt},
		{"MemoryStore.Lookup", func() error { _, err := (&idempotency.MemoryStore{}).Lookup(ctx, key, now); return err }, idempotency.ErrNotBuilt},
		{"nil MemoryStore.Claim", func() error {
			_, err := (*idempotency.MemoryStore)(nil).Claim(ctx, key, fp, now, now.Add(time.Minute), now.Add(time.Hour))
			return err
		}, idempotency.ErrNotBuilt},
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
	require.Zero(t, (&idempotency.MemoryStore{}).Len())
	require.Zero(t, (*idempotency.MemoryStore)(nil).Len())
	require.Zero(t, (*idempotency.Middleware)(nil).Stats())
	require.Equal(t, context.Background(), (*idempotency.Attempt)(nil).Context())
	require.Nil(t, (*idempotency.Attempt)(nil).Problem())
	// The error names the type, so a log line says which value was not built.
	_, err := (&idempotency.MemoryStore{}).Lookup(t.Context(), driver.Key{Scope: "s", Key: "k"}, time.Now())
	require.EqualError(t, err, "idempotency: MemoryStore not built with NewMemoryStore")
}
