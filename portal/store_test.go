package portal_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/portal"
	"github.com/svcplatform/conventions/portal/portaltest"
)

func TestMemoryStoreConformance(t *testing.T) {
	portaltest.Run(t, func(*testing.T) portal.Store { return portal.NewMemoryStore() })
}

// One store for every subtest: the suite's keys are its subtests' own.
func TestMemoryStoreConformanceShared(t *testing.T) {
	s := portal.NewMemoryStore()
	portaltest.Run(t, func(*testing.T) portal.Store { return s })
}

// Expired entries leave the map at the sweep every 256 writes, without a Get or Take of theirs; live
// ones stay.
func TestMemoryStoreSweepsExpired(t *testing.T) {
	ctx := context.Background()
	s := portal.NewMemoryStore()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sess := func(expires time.Time) portal.Session {
		return portal.Session{Licensee: "lic_a", Environment: apikey.Live, ExpiresAt: expires}
	}
	const expired, sweep = 10, 256
	for i := range expired {
		require.NoError(t, s.Put(ctx, fmt.Sprintf("old-%d", i), sess(t0.Add(time.Minute)), t0))
	}
	require.NoError(t, s.Put(ctx, "keeps", sess(t0.Add(time.Hour)), t0))
	now := t0.Add(2 * time.Minute)
	for i := range sweep - expired - 2 {
		require.NoError(t, s.Put(ctx, fmt.Sprintf("new-%d", i), sess(t0.Add(time.Hour)), now))
	}
	require.Equal(t, sweep-1, portal.MemoryStoreLen(s), "no sweep before the 256th write")
	require.NoError(t, s.Put(ctx, "last", sess(t0.Add(time.Hour)), now)) // the 256th: sweeps at now
	require.Equal(t, sweep-expired, portal.MemoryStoreLen(s), "the expired entries are swept, the live ones kept")
	got, err := s.Get(ctx, "keeps", now)
	require.NoError(t, err)
	require.Equal(t, "lic_a", got.Licensee)
	_, err = s.Get(ctx, "old-0", t0)
	require.ErrorIs(t, err, portal.ErrNotFound, "swept, even for a now before its expiry")
}
