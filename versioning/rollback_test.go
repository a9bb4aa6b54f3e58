package versioning_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/versioning"
)

// rollbackEnv is a pinEnv with the pin endpoint mounted behind the router, as a service mounts it.
type rollbackEnv struct {
	*pinEnv
	api http.Handler
}

func newRollbackEnv(t *testing.T, mod func(*versioning.Options)) *rollbackEnv {
	t.Helper()
	e := newPinEnv(t, mod)
	mux := http.NewServeMux()
	mux.Handle("/{version}/version_pin", e.rt.PinHandler())
	return &rollbackEnv{pinEnv: e, api: e.rt.Handler(mux)}
}

// post asks the pin endpoint, on the licensee's pinned version, for version to.
func (e *rollbackEnv) post(t *testing.T, lic, to string) *httptest.ResponseRecorder {
	t.Helper()
	return do(t, e.api, request{method: http.MethodPost, path: "/" + e.pinned(t, lic) + "/version_pin", licensee: lic,
		body: `{"version":"` + to + `"}`})
}

// get reads the pin endpoint.
func (e *rollbackEnv) get(t *testing.T, lic string) *httptest.ResponseRecorder {
	t.Helper()
	return do(t, e.api, request{path: "/" + e.pinned(t, lic) + "/version_pin", licensee: lic})
}

// resource parses a 200 of the pin endpoint.
func resource(t *testing.T, w *httptest.ResponseRecorder) versioning.PinResource {
	t.Helper()
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var pr versioning.PinResource
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &pr))
	return pr
}

// An upgrade may be rolled back, once, within the window: the pin goes back, names the newer
// version as its previous one, and offers no further rollback; asking for an older version again
// is a plain downgrade.
func TestRollbackWithinWindow(t *testing.T) {
	e := newRollbackEnv(t, nil)
	e.pin(t, "lic_rb", "v2") // pinned an hour before testNow

	pr := resource(t, e.get(t, "lic_rb"))
	require.Empty(t, pr.Previous, "a pin that never moved has no previous version")
	require.Zero(t, pr.RollbackUntil)

	pr = resource(t, e.post(t, "lic_rb", "v3"))
	require.Equal(t, versioning.PinResource{Object: "version_pin", Version: "v3", PinnedAt: testNow.Unix(), Newest: "v3",
		Supported: []string{"v1", "v2", "v3"}, Previous: "v2", RollbackUntil: testNow.Add(versioning.DefaultRollbackWindow).Unix()}, pr)
	require.Equal(t, pr, resource(t, e.get(t, "lic_rb")), "GET shows the same pin")

	e.clk.Advance(versioning.DefaultRollbackWindow - time.Second)
	rolledAt := e.clk.Now()
	pr = resource(t, e.post(t, "lic_rb", "v2"))
	require.Equal(t, versioning.PinResource{Object: "version_pin", Version: "v2", PinnedAt: rolledAt.Unix(), Newest: "v3",
		Supported: []string{"v1", "v2", "v3"}, Previous: "v3"}, pr, "back on v2; v3 is now the previous version, and no rollback is offered")
	p, err := e.rt.Pin(context.Background(), "lic_rb")
	require.NoError(t, err)
	require.Equal(t, versioning.Pin{Licensee: "lic_rb", Version: "v2", PinnedAt: rolledAt, Previous: "v3"}, p)
	require.Equal(t, http.StatusOK, do(t, e.h, request{path: "/v2/orders", licensee: "lic_rb"}).Code)
	problem(t, do(t, e.h, request{path: "/v3/orders", licensee: "lic_rb"}), http.StatusForbidden, versioning.CodeVersionNotEnabled)

	// No second rollback: v1 was never this pin's previous version.
	w := e.post(t, "lic_rb", "v1")
	require.Equal(t, "/version", problem(t, w, http.StatusBadRequest, versioning.CodeVersionDowngrade).Errors[0].Pointer)
	_, err = e.rt.Rollback(context.Background(), "lic_rb")
	require.ErrorIs(t, err, versioning.ErrNoRollback)
	require.Equal(t, "v2", resource(t, e.post(t, "lic_rb", "v2")).Version, "asking for the pinned version changes nothing")
	require.Equal(t, p, must(e.rt.Pin(context.Background(), "lic_rb")))

	// Upgrading again opens a new window.
	e.clk.Advance(time.Hour)
	pr = resource(t, e.post(t, "lic_rb", "v3"))
	require.Equal(t, "v2", pr.Previous)
	require.Equal(t, e.clk.Now().Add(versioning.DefaultRollbackWindow).Unix(), pr.RollbackUntil)
}

// After the window the upgrade is final: asking for the previous version is a 409 located at
// /version that says since when, and Rollback reports ErrRollbackExpired. The window's end is
// exclusive.
func TestRollbackWindowCloses(t *testing.T) {
	final := testNow.Add(versioning.DefaultRollbackWindow)
	for _, tc := range []struct {
		name  string
		after time.Duration
		open  bool
	}{
		{"at once", 0, true},
		{"a nanosecond before the end", versioning.DefaultRollbackWindow - time.Nanosecond, true},
		{"at the end", versioning.DefaultRollbackWindow, false},
		{"a month later", 30 * 24 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRollbackEnv(t, nil)
			e.pin(t, "lic_w", "v2")
			require.Equal(t, "v3", resource(t, e.post(t, "lic_w", "v3")).Version)
			e.clk.Advance(tc.after)

			pr := resource(t, e.get(t, "lic_w"))
			require.Equal(t, "v2", pr.Previous)
			if tc.open {
				require.Equal(t, final.Unix(), pr.RollbackUntil)
				require.Equal(t, "v2", resource(t, e.post(t, "lic_w", "v2")).Version)
				return
			}
			require.Zero(t, pr.RollbackUntil, "no rollback is offered after the window")
			w := e.post(t, "lic_w", "v2")
			p := problem(t, w, http.StatusConflict, versioning.CodeVersionUpgradeFinal)
			require.Len(t, p.Errors, 1)
			require.Equal(t, "/version", p.Errors[0].Pointer)
			require.Equal(t, versioning.CodeVersionUpgradeFinal, p.Errors[0].Code)
			require.Contains(t, p.Detail, "the upgrade from v2 to v3 became final at 2026-02-04T12:00:00Z")
			_, err := e.rt.Rollback(context.Background(), "lic_w")
			require.ErrorIs(t, err, versioning.ErrRollbackExpired)
			require.ErrorContains(t, err, "became final at "+final.Format(time.RFC3339))
			require.Equal(t, "v3", e.pinned(t, "lic_w"), "nothing moved")

			// Other downgrades stay what they were.
			problem(t, e.post(t, "lic_w", "v1"), http.StatusBadRequest, versioning.CodeVersionDowngrade)
		})
	}
}

// A negative RollbackWindow turns rollbacks off: every upgrade is final at once. A positive one
// sets the window's length.
func TestRollbackWindowOption(t *testing.T) {
	t.Run("negative", func(t *testing.T) {
		e := newRollbackEnv(t, func(o *versioning.Options) { o.RollbackWindow = -1 })
		e.pin(t, "lic_n", "v2")
		pr := resource(t, e.post(t, "lic_n", "v3"))
		require.Equal(t, "v2", pr.Previous)
		require.Zero(t, pr.RollbackUntil)
		p := problem(t, e.post(t, "lic_n", "v2"), http.StatusConflict, versioning.CodeVersionUpgradeFinal)
		require.Equal(t, "/version", p.Errors[0].Pointer)
		require.Contains(t, p.Detail, "became final at "+testNow.Format(time.RFC3339))
		_, err := e.rt.Rollback(context.Background(), "lic_n")
		require.ErrorIs(t, err, versioning.ErrRollbackExpired)
		require.Equal(t, "v3", e.pinned(t, "lic_n"))
	})
	t.Run("an hour", func(t *testing.T) {
		e := newRollbackEnv(t, func(o *versioning.Options) { o.RollbackWindow = time.Hour })
		e.pin(t, "lic_h", "v2")
		require.Equal(t, testNow.Add(time.Hour).Unix(), resource(t, e.post(t, "lic_h", "v3")).RollbackUntil)
		e.clk.Advance(time.Hour)
		problem(t, e.post(t, "lic_h", "v2"), http.StatusConflict, versioning.CodeVersionUpgradeFinal)
	})
}

// The wire shape: previous_version once the pin has moved, rollback_until only while a rollback is
// possible, both left out otherwise.
func TestPinResourceJSON(t *testing.T) {
	e := newRollbackEnv(t, nil)
	e.pin(t, "lic_j", "v2")
	pinned := strconv.FormatInt(testNow.Add(-time.Hour).Unix(), 10)
	require.JSONEq(t, `{"object":"version_pin","version":"v2","pinned_at":`+pinned+
		`,"newest_version":"v3","supported_versions":["v1","v2","v3"]}`, e.get(t, "lic_j").Body.String())
	now, until := strconv.FormatInt(testNow.Unix(), 10), strconv.FormatInt(testNow.Add(72*time.Hour).Unix(), 10)
	require.JSONEq(t, `{"object":"version_pin","version":"v3","pinned_at":`+now+
		`,"newest_version":"v3","supported_versions":["v1","v2","v3"],"previous_version":"v2","rollback_until":`+until+`}`,
		e.post(t, "lic_j", "v3").Body.String())
	require.JSONEq(t, `{"object":"version_pin","version":"v2","pinned_at":`+now+
		`,"newest_version":"v3","supported_versions":["v1","v2","v3"],"previous_version":"v3"}`,
		e.post(t, "lic_j", "v2").Body.String())
}

// The window closes early when the previous version is sunset within it: rollback_until says so,
// and from the sunset on the version cannot be asked for at all.
func TestRollbackPreviousSunset(t *testing.T) {
	e := newRollbackEnv(t, nil)
	e.clk.Set(v1Sunset.Add(-time.Hour))
	e.pin(t, "lic_s", "v1")
	pr := resource(t, e.post(t, "lic_s", "v2"))
	require.Equal(t, "v1", pr.Previous)
	require.Equal(t, v1Sunset.Unix(), pr.RollbackUntil, "the window ends at v1's sunset")

	e.clk.Set(v1Sunset)
	require.Zero(t, resource(t, e.get(t, "lic_s")).RollbackUntil)
	problem(t, e.post(t, "lic_s", "v1"), http.StatusBadRequest, versioning.CodeVersionSunset)
	_, err := e.rt.Rollback(context.Background(), "lic_s")
	require.ErrorIs(t, err, versioning.ErrVersionSunset)
	require.Equal(t, "v2", e.pinned(t, "lic_s"))
}

// Rollback without HTTP: what it undoes and what it refuses. Upgrade stays forward only.
func TestRouterRollback(t *testing.T) {
	ctx := context.Background()
	e := newPinEnv(t, nil)

	_, err := e.rt.Rollback(ctx, "lic_none")
	require.ErrorIs(t, err, versioning.ErrNotPinned)
	e.pin(t, "lic_r", "v1")
	_, err = e.rt.Rollback(ctx, "lic_r")
	require.ErrorIs(t, err, versioning.ErrNoRollback, "a pin that never moved")

	up, err := e.rt.Upgrade(ctx, "lic_r", "v3")
	require.NoError(t, err)
	require.Equal(t, versioning.Pin{Licensee: "lic_r", Version: "v3", PinnedAt: testNow, Previous: "v1"}, up)
	_, err = e.rt.Upgrade(ctx, "lic_r", "v1")
	require.ErrorIs(t, err, versioning.ErrDowngrade, "Upgrade never goes back, even within the window")

	e.clk.Advance(time.Minute)
	p, err := e.rt.Rollback(ctx, "lic_r")
	require.NoError(t, err)
	require.Equal(t, versioning.Pin{Licensee: "lic_r", Version: "v1", PinnedAt: testNow.Add(time.Minute), Previous: "v3"}, p)
	_, err = e.rt.Rollback(ctx, "lic_r")
	require.ErrorIs(t, err, versioning.ErrNoRollback, "a rollback cannot be rolled back")

	// Support's Repin backwards is no upgrade either; forwards it is, and may be rolled back.
	p, err = e.rt.Repin(ctx, "lic_r", "v2")
	require.NoError(t, err)
	require.Equal(t, "v1", p.Previous)
	p, err = e.rt.Repin(ctx, "lic_r", "v1")
	require.NoError(t, err)
	require.Equal(t, "v2", p.Previous)
	_, err = e.rt.Rollback(ctx, "lic_r")
	require.ErrorIs(t, err, versioning.ErrNoRollback)

	_, err = e.rt.Rollback(ctx, "")
	require.ErrorIs(t, err, versioning.ErrInvalidPin)
	e.pins.setFail(errStoreDown)
	_, err = e.rt.Rollback(ctx, "lic_r")
	require.ErrorIs(t, err, errStoreDown)
}

// swapCounter counts the compare-and-swaps that moved a pin.
type swapCounter struct {
	versioning.PinStore
	moved atomic.Int32
}

func (s *swapCounter) CompareAndSwap(ctx context.Context, lic, from, to string, at time.Time) (versioning.Pin, error) {
	p, err := s.PinStore.CompareAndSwap(ctx, lic, from, to, at)
	if err == nil && from != to {
		s.moved.Add(1)
	}
	return p, err
}

// Concurrent rollbacks of one upgrade: exactly one moves the pin. Through Rollback the others find
// nothing left to roll back; through the pin endpoint they find the pin where they asked it to be.
func TestRollbackRace(t *testing.T) {
	const racers = 16
	t.Run("Rollback", func(t *testing.T) {
		e := newPinEnv(t, nil)
		store := &swapCounter{PinStore: e.pins.PinStore}
		e.pins.PinStore = store
		e.pin(t, "lic_race", "v2")
		_, err := e.rt.Upgrade(context.Background(), "lic_race", "v3")
		require.NoError(t, err)
		store.moved.Store(0)

		var won atomic.Int32
		var wg sync.WaitGroup
		for range racers {
			wg.Go(func() {
				_, err := e.rt.Rollback(context.Background(), "lic_race")
				switch {
				case err == nil:
					won.Add(1)
				case !errors.Is(err, versioning.ErrNoRollback):
					t.Errorf("Rollback: %v", err)
				}
			})
		}
		wg.Wait()
		require.Equal(t, int32(1), won.Load(), "exactly one rollback succeeds")
		require.Equal(t, int32(1), store.moved.Load(), "exactly one move")
		p := must(e.rt.Pin(context.Background(), "lic_race"))
		require.Equal(t, "v2", p.Version)
		require.Equal(t, "v3", p.Previous)
	})
	t.Run("pin endpoint", func(t *testing.T) {
		e := newRollbackEnv(t, nil)
		store := &swapCounter{PinStore: e.pins.PinStore}
		e.pins.PinStore = store
		e.pin(t, "lic_race", "v2")
		require.Equal(t, "v3", resource(t, e.post(t, "lic_race", "v3")).Version)
		store.moved.Store(0)

		codes := make([]int, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				// Straight to the endpoint: behind the router, a racer that lost would be refused on v3.
				w := do(t, e.rt.PinHandler(), request{method: http.MethodPost, path: "/v3/version_pin", licensee: "lic_race",
					body: `{"version":"v2"}`})
				codes[i] = w.Code
			})
		}
		wg.Wait()
		for i, c := range codes {
			require.Equal(t, http.StatusOK, c, "racer %d", i)
		}
		require.Equal(t, int32(1), store.moved.Load(), "exactly one move")
		p := must(e.rt.Pin(context.Background(), "lic_race"))
		require.Equal(t, "v2", p.Version)
		require.Equal(t, "v3", p.Previous)
	})
}

// A rollback racing an upgrade: both moves are compare-and-swaps on the pin they decided on, so the
// outcome is one order of the two, never a mix. Through the pin endpoint, a rollback that comes
// second finds its version no longer the previous one and is a plain downgrade.
func TestRollbackRacesUpgrade(t *testing.T) {
	for round := range 50 {
		lic := "lic_" + strconv.Itoa(round)
		e := newRollbackEnv(t, nil)
		store := &swapCounter{PinStore: e.pins.PinStore}
		e.pins.PinStore = store
		e.pin(t, lic, "v1")
		require.Equal(t, "v2", resource(t, e.post(t, lic, "v2")).Version)
		store.moved.Store(0)

		var back, forward int
		var wg sync.WaitGroup
		ph := e.rt.PinHandler()
		wg.Go(func() {
			back = do(t, ph, request{method: http.MethodPost, path: "/v2/version_pin", licensee: lic, body: `{"version":"v1"}`}).Code
		})
		wg.Go(func() {
			forward = do(t, ph, request{method: http.MethodPost, path: "/v2/version_pin", licensee: lic, body: `{"version":"v3"}`}).Code
		})
		wg.Wait()
		p := must(e.rt.Pin(context.Background(), lic))
		require.Equal(t, http.StatusOK, forward, "round %d", round)
		require.Equal(t, "v3", p.Version, "round %d: the upgrade is in force either way", round)
		switch back {
		case http.StatusOK: // rolled back first, then upgraded from v1
			require.Equal(t, "v1", p.Previous, "round %d", round)
			require.Equal(t, int32(2), store.moved.Load(), "round %d", round)
		case http.StatusBadRequest: // upgraded first: v1 is no longer the previous version
			require.Equal(t, "v2", p.Previous, "round %d", round)
			require.Equal(t, int32(1), store.moved.Load(), "round %d", round)
		default:
			t.Fatalf("round %d: rollback answered %d", round, back)
		}
	}
}
