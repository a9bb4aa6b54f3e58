package versioning_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/svcplatform/conventions/versioning"
	"github.com/svcplatform/conventions/versioning/pintest"
)

func TestMemoryPinStoreConformance(t *testing.T) {
	pintest.Run(t, func(t *testing.T) versioning.PinStore { return versioning.NewMemoryPinStore() })
}

func TestMemoryPinStoreZeroValue(t *testing.T) {
	var s versioning.MemoryPinStore
	pintest.Run(t, func(t *testing.T) versioning.PinStore { return &s })
}

// The in-memory store checks its arguments as the Router does, for code that uses it directly: a
// store need not (PinStore), and the Router's own checks are TestRouterChecksBeforeTheStore.
func TestMemoryPinStoreRefusesInvalidArguments(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := versioning.NewMemoryPinStore()
	const good = "lic_a"
	for name, lic := range badLicensees() {
		t.Run(name, func(t *testing.T) {
			_, err := s.Get(ctx, lic)
			require.ErrorIs(t, err, versioning.ErrInvalidPin)
			_, _, err = s.SetIfAbsent(ctx, lic, "v1", at)
			require.ErrorIs(t, err, versioning.ErrInvalidPin)
			_, err = s.CompareAndSwap(ctx, lic, "v1", "v2", at)
			require.ErrorIs(t, err, versioning.ErrInvalidPin)
			require.ErrorIs(t, s.Delete(ctx, lic), versioning.ErrInvalidPin)
			if lic != "" {
				_, err = s.List(ctx, "", lic, 10)
				require.ErrorIs(t, err, versioning.ErrInvalidPin, "after")
			}
		})
	}
	_, _, err := s.SetIfAbsent(ctx, strings.Repeat("y", versioning.MaxLicenseeLen), "v1", at)
	require.NoError(t, err, "a licensee of exactly MaxLicenseeLen bytes is valid")
	for _, v := range badVersions {
		t.Run(fmt.Sprintf("version %q", v), func(t *testing.T) {
			_, _, err := s.SetIfAbsent(ctx, good, v, at)
			require.ErrorIs(t, err, versioning.ErrInvalidPin)
			_, err = s.CompareAndSwap(ctx, good, "v1", v, at)
			require.ErrorIs(t, err, versioning.ErrInvalidPin)
			_, err = s.CompareAndSwap(ctx, good, v, "v1", at)
			require.ErrorIs(t, err, versioning.ErrInvalidPin)
			if v != "" {
				_, err = s.List(ctx, v, "", 10)
				require.ErrorIs(t, err, versioning.ErrInvalidPin)
			}
		})
	}
	_, err = s.Get(ctx, good)
	require.ErrorIs(t, err, versioning.ErrNotPinned, "rejected calls store nothing")
	for _, limit := range badLimits {
		_, err := s.List(ctx, "v1", "", limit)
		require.ErrorIs(t, err, versioning.ErrInvalidPin, "limit %d", limit)
	}
}

// badLicensees are the licensees no store is given: empty, too long, not UTF-8, with a NUL.
func badLicensees() map[string]string {
	return map[string]string{
		"empty":    "",
		"too long": strings.Repeat("x", versioning.MaxLicenseeLen+1),
		"not utf8": "lic_\xff",
		"nul":      "lic_\x00",
	}
}

// badVersions are names that are not well-formed ("" is List's "every version").
var badVersions = []string{"", "1", "V1", "v01", "v1.2", "v1234567890"}

// badLimits are List limits outside 1..MaxPinList.
var badLimits = []int{0, -1, versioning.MaxPinList + 1}
