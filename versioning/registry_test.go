package versioning_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/versioning"
)

func noop(map[string]any) error { return nil }

func TestNewRegistryValidation(t *testing.T) {
	d := func(day int) time.Time { return time.Date(2026, 1, day, 0, 0, 0, 0, time.UTC) }
	step := func(version string) versioning.Change {
		return versioning.Change{Name: "change_" + version, Version: version, Response: noop}
	}
	cases := []struct {
		name     string
		versions []versioning.Version
		changes  []versioning.Change
		want     error
	}{
		{"valid, any order", []versioning.Version{{Name: "v2"}, {Name: "v1", Deprecated: d(2), Sunset: d(3)}},
			[]versioning.Change{step("v2")}, nil},
		{"single version", []versioning.Version{{Name: "v1"}}, nil, nil},
		{"sunset equal to deprecation", []versioning.Version{{Name: "v1", Released: d(1), Deprecated: d(2), Sunset: d(2)}, {Name: "v2"}},
			[]versioning.Change{step("v2")}, nil},
		{"deprecation equal to release", []versioning.Version{{Name: "v1", Released: d(2), Deprecated: d(2)}, {Name: "v2"}},
			[]versioning.Change{step("v2")}, nil},
		{"no versions", nil, nil, versioning.ErrNoVersions},
		{"bad name", []versioning.Version{{Name: "1"}}, nil, versioning.ErrInvalidName},
		{"leading zero", []versioning.Version{{Name: "v01"}}, nil, versioning.ErrInvalidName},
		{"date name", []versioning.Version{{Name: "2026-01-01"}}, nil, versioning.ErrInvalidName},
		{"duplicate", []versioning.Version{{Name: "v1"}, {Name: "v1"}}, nil, versioning.ErrDuplicateVersion},
		{"deprecated before released", []versioning.Version{{Name: "v1", Released: d(3), Deprecated: d(2)}, {Name: "v2"}},
			[]versioning.Change{step("v2")}, versioning.ErrInvalidLifecycle},
		{"sunset before deprecation", []versioning.Version{{Name: "v1", Deprecated: d(3), Sunset: d(2)}, {Name: "v2"}},
			[]versioning.Change{step("v2")}, versioning.ErrInvalidLifecycle},
		{"sunset without deprecation", []versioning.Version{{Name: "v1", Sunset: d(2)}, {Name: "v2"}},
			[]versioning.Change{step("v2")}, versioning.ErrInvalidLifecycle},
		{"newest deprecated", []versioning.Version{{Name: "v1"}, {Name: "v2", Deprecated: d(2)}},
			[]versioning.Change{step("v2")}, versioning.ErrInvalidLifecycle},
		{"sub-second time", []versioning.Version{{Name: "v1", Deprecated: d(2).Add(time.Millisecond)}, {Name: "v2"}},
			[]versioning.Change{step("v2")}, versioning.ErrInvalidLifecycle},
		{"successor unknown", []versioning.Version{{Name: "v1", Successor: "v9"}, {Name: "v2"}},
			[]versioning.Change{step("v2")}, versioning.ErrInvalidSuccessor},
		{"successor older", []versioning.Version{{Name: "v1"}, {Name: "v2", Successor: "v1"}, {Name: "v3"}},
			[]versioning.Change{step("v2"), step("v3")}, versioning.ErrInvalidSuccessor},
		{"successor itself", []versioning.Version{{Name: "v1", Successor: "v1"}, {Name: "v2"}},
			[]versioning.Change{step("v2")}, versioning.ErrInvalidSuccessor},
		{"newest with successor", []versioning.Version{{Name: "v1"}, {Name: "v2", Successor: "v1"}},
			[]versioning.Change{step("v2")}, versioning.ErrInvalidSuccessor},
		{"change on unknown version", []versioning.Version{{Name: "v1"}, {Name: "v2"}},
			[]versioning.Change{step("v2"), step("v7")}, versioning.ErrUnknownVersion},
		{"change on oldest version", []versioning.Version{{Name: "v1"}, {Name: "v2"}},
			[]versioning.Change{step("v2"), step("v1")}, versioning.ErrInvalidChange},
		{"change name not snake_case", []versioning.Version{{Name: "v1"}, {Name: "v2"}},
			[]versioning.Change{{Name: "Order-Renamed", Version: "v2"}}, versioning.ErrInvalidChange},
		{"change name empty", []versioning.Version{{Name: "v1"}, {Name: "v2"}},
			[]versioning.Change{{Version: "v2"}}, versioning.ErrInvalidChange},
		{"change name twice", []versioning.Version{{Name: "v1"}, {Name: "v2"}},
			[]versioning.Change{step("v2"), step("v2")}, versioning.ErrInvalidChange},
		// A registered version with no path from the newest fails at construction, so every test
		// (and every service start) that builds the registry fails with it.
		{"no path: step without a change", []versioning.Version{{Name: "v1"}, {Name: "v2"}, {Name: "v3"}},
			[]versioning.Change{step("v2")}, versioning.ErrNoPath},
		{"no path: no changes at all", []versioning.Version{{Name: "v1"}, {Name: "v2"}}, nil, versioning.ErrNoPath},
		{"documented no-op step is a path", []versioning.Version{{Name: "v1"}, {Name: "v2"}},
			[]versioning.Change{{Name: "v2_served_by_own_handler", Version: "v2"}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := versioning.NewRegistry(tc.versions, tc.changes)
			if tc.want == nil {
				require.NoError(t, err)
				require.NotNil(t, reg)
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.Nil(t, reg)
			require.Contains(t, err.Error(), "versioning: ")
		})
	}
}

func TestRegistryPathsFromNewest(t *testing.T) {
	reg := fixtureRegistry(t)
	newest := reg.Newest().Name
	// Every registered version is reachable from the newest: a response body and an event can be
	// rendered at it.
	for _, v := range reg.Versions() {
		_, err := reg.TransformResponse([]byte(orderJSON), v.Name)
		require.NoError(t, err, v.Name)
		_, err = reg.RenderEvent(versioning.EventShape{Version: newest, Type: "order.created", Data: []byte(`{"object":` + orderJSON + `}`)}, v.Name)
		require.NoError(t, err, v.Name)
	}
}

func TestRegistryAccessors(t *testing.T) {
	reg := fixtureRegistry(t)
	vs := reg.Versions()
	require.Equal(t, []string{"v1", "v2", "v3"}, []string{vs[0].Name, vs[1].Name, vs[2].Name})
	require.Equal(t, "v2", vs[0].Successor, "the successor defaults to the next version")
	require.Equal(t, "v3", vs[1].Successor)
	require.Empty(t, vs[2].Successor)
	vs[0].Name = "mutated"
	require.Equal(t, "v1", reg.Versions()[0].Name, "Versions returns a copy")

	require.Equal(t, "v3", reg.Newest().Name)
	v, ok := reg.Lookup("v2")
	require.True(t, ok)
	require.Equal(t, v2Deprecated, v.Deprecated)
	_, ok = reg.Lookup("v9")
	require.False(t, ok)

	require.Equal(t, []string{"v1"}, reg.Supported(v1Released))
	require.Equal(t, []string{"v1", "v2", "v3"}, reg.Supported(testNow))
	require.Equal(t, []string{"v2", "v3"}, reg.Supported(v1Sunset))
	require.Equal(t, []string{"v3"}, reg.Supported(v2Sunset))
	require.Empty(t, reg.Supported(v1Released.Add(-time.Second)))

	nr, ok := reg.NewestReleased(v2Released)
	require.True(t, ok)
	require.Equal(t, "v2", nr.Name, "v3 is not released yet")
	_, ok = reg.NewestReleased(v1Released.Add(-time.Second))
	require.False(t, ok)

	require.Len(t, reg.Changes("v2"), 2)
	require.Equal(t, "order_side_renamed", reg.Changes("v2")[0].Name)
	require.Nil(t, reg.Changes("v1"))
	require.Nil(t, reg.Changes("v9"))
	require.Len(t, reg.AllChanges(), 4)

	c, err := reg.Compare("v1", "v3")
	require.NoError(t, err)
	require.Equal(t, -1, c)
	c, err = reg.Compare("v3", "v3")
	require.NoError(t, err)
	require.Equal(t, 0, c)
	_, err = reg.Compare("v1", "v9")
	require.ErrorIs(t, err, versioning.ErrUnknownVersion)
	_, err = reg.Compare("v9", "v1")
	require.ErrorIs(t, err, versioning.ErrUnknownVersion)
}
