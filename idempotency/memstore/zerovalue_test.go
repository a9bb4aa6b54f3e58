package memstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

// TestZeroValue: every method of a zero Store (or a nil one) with an error result returns
// ErrNotBuilt instead of panicking or doing nothing; Len answers as an empty store would.
func TestZeroValue(t *testing.T) {
	ctx := t.Context()
	key := driver.Key{Scope: "s", Key: "k1"}
	now := time.Unix(1767225600, 0)
	var fp driver.Fingerprint
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"Store.Claim", func() error {
			_, err := (&memstore.Store{}).Claim(ctx, key, fp, now, now.Add(time.Minute), now.Add(time.Hour))
			return err
		}, memstore.ErrNotBuilt},
		{"Store.Renew", func() error { return (&memstore.Store{}).Renew(ctx, key, 1, now) }, memstore.ErrNotBuilt},
		{"Store.Complete", func() error {
			return (&memstore.Store{}).Complete(ctx, key, 1, driver.Response{Status: 200}, now)
		}, memstore.ErrNotBuilt},
		{"Store.Release", func() error { return (&memstore.Store{}).Release(ctx, key, 1) }, memstore.ErrNotBuilt},
		{"Store.Lookup", func() error { _, err := (&memstore.Store{}).Lookup(ctx, key, now); return err }, memstore.ErrNotBuilt},
		{"nil Store.Claim", func() error {
			_, err := (*memstore.Store)(nil).Claim(ctx, key, fp, now, now.Add(time.Minute), now.Add(time.Hour))
			return err
		}, memstore.ErrNotBuilt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.call(), tc.want)
		})
	}
	require.Zero(t, (&memstore.Store{}).Len())
	require.Zero(t, (*memstore.Store)(nil).Len())
	// The error names the type, so a log line says which value was not built.
	_, err := (&memstore.Store{}).Lookup(ctx, key, now)
	require.EqualError(t, err, "idempotency: memstore.Store not built with memstore.New")
}
