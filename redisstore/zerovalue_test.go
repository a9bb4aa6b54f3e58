package redisstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/portal"
	"github.com/svcplatform/conventions/redisstore"
)

// TestZeroValues: a store nobody built has no client. Every method returns an error wrapping
// ErrNotBuilt, on the zero value and on a nil pointer, instead of a nil-pointer panic. No server is
// needed.
func TestZeroValues(t *testing.T) {
	ctx := t.Context()
	now := time.Unix(1767225600, 0)
	key := driver.Key{Scope: "s", Key: "k1"}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"CursorStore.Get", func() error { _, err := (&redisstore.CursorStore{}).Get(ctx, "we_1"); return err }},
		{"CursorStore.Advance", func() error { return (&redisstore.CursorStore{}).Advance(ctx, "we_1", 0, 1) }},
		{"nil CursorStore.Get", func() error { _, err := (*redisstore.CursorStore)(nil).Get(ctx, "we_1"); return err }},
		{"IdempotencyStore.Claim", func() error {
			_, err := (&redisstore.IdempotencyStore{}).Claim(ctx, key, driver.Fingerprint{}, now, now.Add(time.Minute), now.Add(time.Hour))
			return err
		}},
		{"IdempotencyStore.Renew", func() error { return (&redisstore.IdempotencyStore{}).Renew(ctx, key, 1, now) }},
		{"IdempotencyStore.Complete", func() error {
			return (&redisstore.IdempotencyStore{}).Complete(ctx, key, 1, driver.Response{Status: 200}, now)
		}},
		{"IdempotencyStore.Release", func() error { return (&redisstore.IdempotencyStore{}).Release(ctx, key, 1) }},
		{"IdempotencyStore.Lookup", func() error { _, err := (&redisstore.IdempotencyStore{}).Lookup(ctx, key, now); return err }},
		{"PortalStore.Put", func() error {
			return (&redisstore.PortalStore{}).Put(ctx, "k", portal.Session{Licensee: "lic_1", ExpiresAt: now.Add(time.Hour)}, now)
		}},
		{"PortalStore.Get", func() error { _, err := (&redisstore.PortalStore{}).Get(ctx, "k", now); return err }},
		{"PortalStore.Take", func() error { _, err := (&redisstore.PortalStore{}).Take(ctx, "k", now); return err }},
		{"PortalStore.Delete", func() error { return (&redisstore.PortalStore{}).Delete(ctx, "k") }},
		{"nil PortalStore.Take", func() error { _, err := (*redisstore.PortalStore)(nil).Take(ctx, "k", now); return err }},
		{"nil IdempotencyStore.Lookup", func() error { _, err := (*redisstore.IdempotencyStore)(nil).Lookup(ctx, key, now); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.call() })
			require.ErrorIs(t, err, redisstore.ErrNotBuilt)
		})
	}
}
