package pintest

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/versioning"
)

// racers is enough goroutines for a check-then-act window to show under -race on two cores, few
// enough for a real server to answer in well under a second.
const racers = 32

// tolerance is how far a stored time may drift in a round trip.
const tolerance = time.Millisecond

// Run runs the conformance suite against the stores newStore returns.
func Run(t *testing.T, newStore func(t *testing.T) versioning.PinStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s versioning.PinStore)
	}{
		{"GetUnpinned", testGetUnpinned},
		{"SetIfAbsentCreates", testSetIfAbsentCreates},
		{"SetIfAbsentKeepsExisting", testSetIfAbsentKeeps},
		{"SetIfAbsentRace", testSetIfAbsentRace},
		{"CompareAndSwap", testCompareAndSwap},
		{"CompareAndSwapConflict", testCompareAndSwapConflict},
		{"CompareAndSwapUnpinned", testCompareAndSwapUnpinned},
		{"CompareAndSwapSameVersion", testCompareAndSwapSame},
		{"CompareAndSwapRace", testCompareAndSwapRace},
		{"PreviousAfterSwap", testPreviousAfterSwap},
		{"PreviousKeptBySameVersionSwap", testPreviousKeptBySameVersion},
		{"PreviousKeptByConflict", testPreviousKeptByConflict},
		{"PreviousKeptBySetIfAbsent", testPreviousKeptBySetIfAbsent},
		{"PreviousClearedByDelete", testPreviousClearedByDelete},
		{"PreviousListed", testPreviousListed},
		{"Delete", testDelete},
		{"ListByVersion", testListByVersion},
		{"ListPaging", testListPaging},
		{"ListAllVersions", testListAll},
		{"LicenseesIsolated", testIsolated},
		{"ContextCancelled", testCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

type env struct {
	ctx    context.Context
	base   time.Time
	prefix string
}

func newEnv() env {
	return env{ctx: context.Background(), base: time.Now().UTC().Truncate(time.Millisecond), prefix: randid.New("lic_") + "/"}
}

func (e env) lic(name string) string { return e.prefix + name }

// randomVersion is a version no other test uses, so List sees only this test's pins.
func randomVersion() string { return versionName(100_000_000 + rand.IntN(899_999_999)) }

// versionName is the name of version number n: "v2" for 2.
func versionName(n int) string { return "v" + strconv.Itoa(n) }

func requirePin(t *testing.T, want, got versioning.Pin) {
	t.Helper()
	check.Equal(t, want.Licensee, got.Licensee)
	check.Equal(t, want.Version, got.Version)
	requireTime(t, want.PinnedAt, got.PinnedAt, "PinnedAt")
	check.Equal(t, want.Previous, got.Previous, "Previous of %s", got.Licensee)
}

func requireTime(t *testing.T, want, got time.Time, what string) {
	t.Helper()
	if d := got.Sub(want); d < -tolerance || d > tolerance {
		t.Fatalf("%s: got %s, want %s (±%s)", what, got.UTC().Format(time.RFC3339Nano), want.UTC().Format(time.RFC3339Nano), tolerance)
	}
}

func testGetUnpinned(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	_, err := s.Get(e.ctx, e.lic("nobody"))
	check.ErrorIs(t, err, versioning.ErrNotPinned)
}

func testSetIfAbsentCreates(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	lic := e.lic("a")
	p, created, err := s.SetIfAbsent(e.ctx, lic, "v2", e.base)
	check.NoError(t, err)
	check.True(t, created, "the first SetIfAbsent must create")
	want := versioning.Pin{Licensee: lic, Version: "v2", PinnedAt: e.base}
	requirePin(t, want, p)
	got, err := s.Get(e.ctx, lic)
	check.NoError(t, err)
	requirePin(t, want, got)
}

func testSetIfAbsentKeeps(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	lic := e.lic("a")
	_, _, err := s.SetIfAbsent(e.ctx, lic, "v1", e.base)
	check.NoError(t, err)
	p, created, err := s.SetIfAbsent(e.ctx, lic, "v3", e.base.Add(time.Hour))
	check.NoError(t, err)
	check.True(t, !created, "a second SetIfAbsent must not create")
	want := versioning.Pin{Licensee: lic, Version: "v1", PinnedAt: e.base}
	requirePin(t, want, p)
	got, err := s.Get(e.ctx, lic)
	check.NoError(t, err)
	requirePin(t, want, got)
}

func testSetIfAbsentRace(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	lic := e.lic("race")
	var created atomic.Int32
	pins := make([]versioning.Pin, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			p, c, err := s.SetIfAbsent(e.ctx, lic, versionName(1+i%4), e.base.Add(time.Duration(i)*time.Millisecond))
			if err != nil {
				t.Errorf("SetIfAbsent: %v", err)
				return
			}
			if c {
				created.Add(1)
			}
			pins[i] = p
		})
	}
	wg.Wait()
	check.Equal(t, 1, created.Load(), "exactly one racer creates the pin")
	final, err := s.Get(e.ctx, lic)
	check.NoError(t, err)
	for i, p := range pins {
		check.Equal(t, final.Version, p.Version, "racer %d saw another pin than the one in force", i)
	}
}

func testCompareAndSwap(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	lic := e.lic("a")
	_, _, err := s.SetIfAbsent(e.ctx, lic, "v1", e.base)
	check.NoError(t, err)
	later := e.base.Add(48 * time.Hour)
	p, err := s.CompareAndSwap(e.ctx, lic, "v1", "v2", later)
	check.NoError(t, err)
	want := versioning.Pin{Licensee: lic, Version: "v2", PinnedAt: later, Previous: "v1"}
	requirePin(t, want, p)
	got, err := s.Get(e.ctx, lic)
	check.NoError(t, err)
	requirePin(t, want, got)
	// Backwards is the store's business too: the router decides what is allowed.
	p, err = s.CompareAndSwap(e.ctx, lic, "v2", "v1", later.Add(time.Second))
	check.NoError(t, err)
	check.Equal(t, "v1", p.Version)
}

func testCompareAndSwapConflict(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	lic := e.lic("a")
	_, _, err := s.SetIfAbsent(e.ctx, lic, "v2", e.base)
	check.NoError(t, err)
	_, err = s.CompareAndSwap(e.ctx, lic, "v1", "v3", e.base.Add(time.Hour))
	check.ErrorIs(t, err, versioning.ErrPinConflict)
	got, err := s.Get(e.ctx, lic)
	check.NoError(t, err)
	requirePin(t, versioning.Pin{Licensee: lic, Version: "v2", PinnedAt: e.base}, got)
}

func testCompareAndSwapUnpinned(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	lic := e.lic("a")
	_, err := s.CompareAndSwap(e.ctx, lic, "v1", "v2", e.base)
	check.ErrorIs(t, err, versioning.ErrNotPinned)
	_, err = s.Get(e.ctx, lic)
	check.ErrorIs(t, err, versioning.ErrNotPinned, "a failed swap must not create a pin")
}

func testCompareAndSwapSame(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	lic := e.lic("a")
	_, _, err := s.SetIfAbsent(e.ctx, lic, "v2", e.base)
	check.NoError(t, err)
	p, err := s.CompareAndSwap(e.ctx, lic, "v2", "v2", e.base.Add(time.Minute))
	check.NoError(t, err)
	requirePin(t, versioning.Pin{Licensee: lic, Version: "v2", PinnedAt: e.base.Add(time.Minute)}, p)
}

func testCompareAndSwapRace(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	lic := e.lic("race")
	_, _, err := s.SetIfAbsent(e.ctx, lic, "v1", e.base)
	check.NoError(t, err)
	var won atomic.Int32
	var winner atomic.Value
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			to := versionName(2 + i)
			_, err := s.CompareAndSwap(e.ctx, lic, "v1", to, e.base.Add(time.Second))
			switch {
			case err == nil:
				won.Add(1)
				winner.Store(to)
			case !errors.Is(err, versioning.ErrPinConflict):
				t.Errorf("CompareAndSwap: %v", err)
			}
		})
	}
	wg.Wait()
	check.Equal(t, 1, won.Load(), "exactly one swap from v1 wins")
	got, err := s.Get(e.ctx, lic)
	check.NoError(t, err)
	check.Equal(t, winner.Load(), any(got.Version), "the pin in force is the winning swap's")
	check.Equal(t, "v1", got.Previous, "the winning swap came from v1")
}

// The pin's Previous is the version its last move came from, in the swap's result and in every read
// after it, whichever direction the move went.
func testPreviousAfterSwap(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	lic := e.lic("a")
	p, _, err := s.SetIfAbsent(e.ctx, lic, "v1", e.base)
	check.NoError(t, err)
	check.Equal(t, "", p.Previous, "a new pin has not moved")
	up := e.base.Add(time.Hour)
	p, err = s.CompareAndSwap(e.ctx, lic, "v1", "v3", up)
	check.NoError(t, err)
	want := versioning.Pin{Licensee: lic, Version: "v3", PinnedAt: up, Previous: "v1"}
	requirePin(t, want, p)
	for range 2 { // a read does not change it
		got, err := s.Get(e.ctx, lic)
		check.NoError(t, err)
		requirePin(t, want, got)
	}
	back := up.Add(time.Minute)
	p, err = s.CompareAndSwap(e.ctx, lic, "v3", "v1", back)
	check.NoError(t, err)
	want = versioning.Pin{Licensee: lic, Version: "v1", PinnedAt: back, Previous: "v3"}
	requirePin(t, want, p)
	got, err := s.Get(e.ctx, lic)
	check.NoError(t, err)
	requirePin(t, want, got)
}

// A swap to the version in force refreshes PinnedAt and keeps Previous: it is no move.
func testPreviousKeptBySameVersion(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	lic := e.lic("a")
	_, _, err := s.SetIfAbsent(e.ctx, lic, "v1", e.base)
	check.NoError(t, err)
	_, err = s.CompareAndSwap(e.ctx, lic, "v1", "v2", e.base.Add(time.Hour))
	check.NoError(t, err)
	p, err := s.CompareAndSwap(e.ctx, lic, "v2", "v2", e.base.Add(2*time.Hour))
	check.NoError(t, err)
	want := versioning.Pin{Licensee: lic, Version: "v2", PinnedAt: e.base.Add(2 * time.Hour), Previous: "v1"}
	requirePin(t, want, p)
	got, err := s.Get(e.ctx, lic)
	check.NoError(t, err)
	requirePin(t, want, got)
}

// A swap that finds another version changes nothing, Previous included.
func testPreviousKeptByConflict(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	lic := e.lic("a")
	_, _, err := s.SetIfAbsent(e.ctx, lic, "v1", e.base)
	check.NoError(t, err)
	_, err = s.CompareAndSwap(e.ctx, lic, "v1", "v2", e.base.Add(time.Hour))
	check.NoError(t, err)
	_, err = s.CompareAndSwap(e.ctx, lic, "v1", "v3", e.base.Add(2*time.Hour))
	check.ErrorIs(t, err, versioning.ErrPinConflict)
	got, err := s.Get(e.ctx, lic)
	check.NoError(t, err)
	requirePin(t, versioning.Pin{Licensee: lic, Version: "v2", PinnedAt: e.base.Add(time.Hour), Previous: "v1"}, got)
}

// SetIfAbsent on a pin that moved returns it as it is, Previous included, and changes nothing.
func testPreviousKeptBySetIfAbsent(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	lic := e.lic("a")
	_, _, err := s.SetIfAbsent(e.ctx, lic, "v1", e.base)
	check.NoError(t, err)
	_, err = s.CompareAndSwap(e.ctx, lic, "v1", "v2", e.base.Add(time.Hour))
	check.NoError(t, err)
	p, created, err := s.SetIfAbsent(e.ctx, lic, "v3", e.base.Add(2*time.Hour))
	check.NoError(t, err)
	check.True(t, !created, "a second SetIfAbsent must not create")
	want := versioning.Pin{Licensee: lic, Version: "v2", PinnedAt: e.base.Add(time.Hour), Previous: "v1"}
	requirePin(t, want, p)
	got, err := s.Get(e.ctx, lic)
	check.NoError(t, err)
	requirePin(t, want, got)
}

// Delete forgets the pin's history: the next pin has not moved.
func testPreviousClearedByDelete(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	lic := e.lic("a")
	_, _, err := s.SetIfAbsent(e.ctx, lic, "v1", e.base)
	check.NoError(t, err)
	_, err = s.CompareAndSwap(e.ctx, lic, "v1", "v2", e.base.Add(time.Hour))
	check.NoError(t, err)
	check.NoError(t, s.Delete(e.ctx, lic))
	p, created, err := s.SetIfAbsent(e.ctx, lic, "v3", e.base.Add(2*time.Hour))
	check.NoError(t, err)
	check.True(t, created, "after Delete the next SetIfAbsent creates")
	want := versioning.Pin{Licensee: lic, Version: "v3", PinnedAt: e.base.Add(2 * time.Hour)}
	requirePin(t, want, p)
	got, err := s.Get(e.ctx, lic)
	check.NoError(t, err)
	requirePin(t, want, got)
}

// List returns each pin's Previous, as Get does.
func testPreviousListed(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	from, ver := versionName(1+rand.IntN(99_999_999)), randomVersion()
	_, _, err := s.SetIfAbsent(e.ctx, e.lic("moved"), from, e.base)
	check.NoError(t, err)
	_, err = s.CompareAndSwap(e.ctx, e.lic("moved"), from, ver, e.base.Add(time.Hour))
	check.NoError(t, err)
	_, _, err = s.SetIfAbsent(e.ctx, e.lic("stayed"), ver, e.base)
	check.NoError(t, err)
	got, err := s.List(e.ctx, ver, "", versioning.MaxPinList)
	check.NoError(t, err)
	check.Len(t, got, 2)
	requirePin(t, versioning.Pin{Licensee: e.lic("moved"), Version: ver, PinnedAt: e.base.Add(time.Hour), Previous: from}, got[0])
	requirePin(t, versioning.Pin{Licensee: e.lic("stayed"), Version: ver, PinnedAt: e.base}, got[1])
}

func testDelete(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	lic := e.lic("a")
	check.NoError(t, s.Delete(e.ctx, lic), "deleting nothing is not an error")
	_, _, err := s.SetIfAbsent(e.ctx, lic, "v1", e.base)
	check.NoError(t, err)
	check.NoError(t, s.Delete(e.ctx, lic))
	_, err = s.Get(e.ctx, lic)
	check.ErrorIs(t, err, versioning.ErrNotPinned)
	p, created, err := s.SetIfAbsent(e.ctx, lic, "v2", e.base.Add(time.Hour))
	check.NoError(t, err)
	check.True(t, created, "after Delete the next SetIfAbsent creates")
	check.Equal(t, "v2", p.Version)
}

func testListByVersion(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	ver, other := randomVersion(), randomVersion()
	for _, name := range []string{"c", "a", "b"} {
		_, _, err := s.SetIfAbsent(e.ctx, e.lic(name), ver, e.base)
		check.NoError(t, err)
	}
	_, _, err := s.SetIfAbsent(e.ctx, e.lic("d"), other, e.base)
	check.NoError(t, err)
	got, err := s.List(e.ctx, ver, "", versioning.MaxPinList)
	check.NoError(t, err)
	check.Equal(t, []string{e.lic("a"), e.lic("b"), e.lic("c")}, licensees(got))
	for _, p := range got {
		check.Equal(t, ver, p.Version)
		requireTime(t, e.base, p.PinnedAt, "PinnedAt of "+p.Licensee)
	}
	empty, err := s.List(e.ctx, randomVersion(), "", 10)
	check.NoError(t, err)
	check.Len(t, empty, 0)
}

func testListPaging(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	ver := randomVersion()
	// Byte order, not a locale's: "B" < "_" < "a" < "b" < "é".
	names := []string{"é", "b", "a", "_", "B", "a0", "a-"}
	for _, n := range names {
		_, _, err := s.SetIfAbsent(e.ctx, e.lic(n), ver, e.base)
		check.NoError(t, err)
	}
	want := []string{e.lic("B"), e.lic("_"), e.lic("a"), e.lic("a-"), e.lic("a0"), e.lic("b"), e.lic("é")}
	var seen []string
	after := ""
	for range len(names) + 1 {
		page, err := s.List(e.ctx, ver, after, 3)
		check.NoError(t, err)
		check.True(t, len(page) <= 3, "a page of %d pins, want at most the limit 3", len(page))
		if len(page) == 0 {
			break
		}
		seen = append(seen, licensees(page)...)
		after = page[len(page)-1].Licensee
	}
	check.Equal(t, want, seen)
}

func testListAll(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	v1, v2 := randomVersion(), randomVersion()
	_, _, err := s.SetIfAbsent(e.ctx, e.lic("x"), v1, e.base)
	check.NoError(t, err)
	_, _, err = s.SetIfAbsent(e.ctx, e.lic("y"), v2, e.base)
	check.NoError(t, err)
	// Other tests' pins may be listed too; ours follow the prefix in order.
	got, err := s.List(e.ctx, "", e.prefix, versioning.MaxPinList)
	check.NoError(t, err)
	var ours []versioning.Pin
	for _, p := range got {
		if strings.HasPrefix(p.Licensee, e.prefix) {
			ours = append(ours, p)
		}
	}
	check.Len(t, ours, 2)
	check.Equal(t, v1, ours[0].Version)
	check.Equal(t, v2, ours[1].Version)
}

func testIsolated(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	names := []string{"acme", "ACME", "acmé", "acm%", "acm_", "acme:sandbox", "acme:live", "ac'me", `ac\me`, "acme "}
	for i, n := range names {
		_, created, err := s.SetIfAbsent(e.ctx, e.lic(n), versionName(i+1), e.base)
		check.NoError(t, err)
		check.True(t, created, "licensee %q collided with another", n)
	}
	for i, n := range names {
		p, err := s.Get(e.ctx, e.lic(n))
		check.NoError(t, err)
		check.Equal(t, versionName(i+1), p.Version, "licensee %q", n)
		check.Equal(t, e.lic(n), p.Licensee)
	}
}

func testCancelled(t *testing.T, s versioning.PinStore) {
	e := newEnv()
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	lic := e.lic("a")
	_, _, err := s.SetIfAbsent(ctx, lic, "v1", e.base)
	check.Error(t, err)
	_, err = s.Get(ctx, lic)
	check.Error(t, err)
	check.NotErrorIs(t, err, versioning.ErrNotPinned, "a cancelled Get must not claim the licensee is unpinned")
	_, err = s.CompareAndSwap(ctx, lic, "v1", "v2", e.base)
	check.Error(t, err)
	check.Error(t, s.Delete(ctx, lic))
	_, err = s.List(ctx, "v1", "", 10)
	check.Error(t, err)
	_, err = s.Get(e.ctx, lic)
	check.ErrorIs(t, err, versioning.ErrNotPinned, "a cancelled SetIfAbsent stores nothing")
}

func licensees(pins []versioning.Pin) []string {
	out := make([]string, len(pins))
	for i, p := range pins {
		out[i] = p.Licensee
	}
	return out
}
