package versioning_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/versioning"
)

func TestUsageThroughRouter(t *testing.T) {
	e := newPinEnv(t, nil)
	e.pin(t, "lic_old", "v1")
	e.pin(t, "lic_new", "v3")
	requests := []request{
		{path: "/v1/orders", licensee: "lic_old"},
		{path: "/v1/orders", licensee: "lic_old"},
		{path: "/v3/orders", licensee: "lic_old"}, // refused: pinned to v1
		{path: "/v3/orders", licensee: "lic_new"},
		{path: "/v1/orders"},                      // no licensee
		{path: "/v9/orders", licensee: "lic_new"}, // unknown: not counted
	}
	for _, r := range requests {
		do(t, e.h, r)
	}
	e.clk.Set(v1Sunset)
	do(t, e.h, request{path: "/v1/orders", licensee: "lic_old"}) // refused: sunset

	snap := e.usage.Snapshot()
	type row struct {
		lic, version                  string
		requests, refused, deprecated uint64
	}
	var got []row
	for _, r := range snap {
		got = append(got, row{r.Licensee, r.Version, r.Requests, r.Refused, r.Deprecated})
	}
	require.Equal(t, []row{
		{"", "v1", 1, 0, 1},
		{"lic_old", "v1", 3, 1, 3},
		{"lic_new", "v3", 1, 0, 0},
		{"lic_old", "v3", 1, 1, 0},
	}, got)

	users := e.usage.Users("v1", testNow)
	require.Len(t, users, 2)
	require.Equal(t, "lic_old", users[1].Licensee)
	require.Equal(t, testNow, users[1].FirstSeen)
	require.Equal(t, v1Sunset, users[1].LastSeen)
	require.Empty(t, e.usage.Users("v1", v1Sunset.Add(time.Second)), "nobody called v1 after its sunset")
}

// TestUsageCounterOutcomes: an override is served, every refusal is refused, whatever its cause;
// observations of no registered version, the zero one included, are not counted.
func TestUsageCounterOutcomes(t *testing.T) {
	var c versioning.UsageCounter
	ctx := t.Context()
	for oc := versioning.OutcomeServed; oc <= versioning.OutcomeError; oc++ {
		c.Observe(ctx, versioning.Observation{At: testNow, Version: "v2", Outcome: oc, Licensee: "lic_a"})
	}
	c.Observe(ctx, versioning.Observation{At: testNow, Lifecycle: versioning.LifecycleUnknown, Outcome: versioning.OutcomeUnknown})
	c.Observe(ctx, versioning.Observation{})
	require.Equal(t, []versioning.UsageRecord{{Licensee: "lic_a", Version: "v2", Requests: uint64(versioning.OutcomeError),
		Refused: uint64(versioning.OutcomeError - versioning.OutcomeOverride), FirstSeen: testNow, LastSeen: testNow}}, c.Snapshot())
}

func TestUsageCounterConcurrent(t *testing.T) {
	var c versioning.UsageCounter // the zero value is ready
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				o := versioning.Observation{At: testNow.Add(time.Duration(j) * time.Second), Licensee: "lic", Version: "v" + strconv.Itoa(1+i%2),
					Outcome: versioning.OutcomeServed}
				if i%2 == 0 {
					o.Lifecycle = versioning.LifecycleDeprecated
				}
				c.Observe(t.Context(), o)
			}
		})
	}
	wg.Wait()
	snap := c.Snapshot()
	require.Len(t, snap, 2)
	require.EqualValues(t, 400, snap[0].Requests)
	require.EqualValues(t, 400, snap[0].Deprecated)
	require.EqualValues(t, 0, snap[1].Deprecated)
	require.Equal(t, testNow, snap[0].FirstSeen)
	require.Equal(t, testNow.Add(99*time.Second), snap[0].LastSeen)
	// Out-of-order observations keep the true first and last times.
	c.Observe(t.Context(), versioning.Observation{At: testNow.Add(-time.Hour), Licensee: "lic", Version: "v1", Outcome: versioning.OutcomeServed})
	require.Equal(t, testNow.Add(-time.Hour), c.Users("v1", time.Time{})[0].FirstSeen)
}
