package versioning_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/versioning"
)

// pinEnv is a router with header-named licensees over a store the test can inspect.
type pinEnv struct {
	clk   *clock
	pins  *faultyPins
	rt    *versioning.Router
	h     http.Handler
	usage *versioning.UsageCounter
	ran   *int
}

func newPinEnv(t *testing.T, mod func(*versioning.Options)) *pinEnv {
	t.Helper()
	e := &pinEnv{clk: newClock(testNow), pins: &faultyPins{PinStore: versioning.NewMemoryPinStore(), t: t},
		usage: &versioning.UsageCounter{}, ran: new(int)}
	opts := &versioning.Options{Now: e.clk.Now, Pins: e.pins, Licensee: headerLicensee, Hooks: &versioning.Hooks{Decided: e.usage.Observe}}
	if mod != nil {
		mod(opts)
	}
	e.rt = must(versioning.New(fixtureRegistry(t), opts))
	var mu sync.Mutex
	e.h = e.rt.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*e.ran++
		mu.Unlock()
		d, _ := versioning.FromContext(r.Context())
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Override", map[bool]string{true: "yes", false: "no"}[d.Override])
		w.Header().Set("X-Pinned", d.Pinned)
	}))
	return e
}

func (e *pinEnv) pin(t *testing.T, lic, version string) {
	t.Helper()
	_, _, err := e.pins.SetIfAbsent(context.Background(), lic, version, testNow.Add(-time.Hour))
	require.NoError(t, err)
}

func (e *pinEnv) pinned(t *testing.T, lic string) string {
	t.Helper()
	p, err := e.rt.Pin(context.Background(), lic)
	if err != nil {
		require.ErrorIs(t, err, versioning.ErrNotPinned)
		return ""
	}
	return p.Version
}

func TestPinEnforcement(t *testing.T) {
	cases := []struct {
		name      string
		firstUse  versioning.FirstUse
		pinned    string // "" for an unpinned licensee
		path      string
		noLic     bool
		status    int
		wantPin   string
		pinnedMsg string
	}{
		{"no licensee: no pin, any version", 0, "", "/v1/orders", true, 200, "", ""},
		{"first use on newest pins newest", versioning.PinNewest, "", "/v3/orders", false, 200, "v3", ""},
		{"first use on older version pins newest and refuses", versioning.PinNewest, "", "/v2/orders", false, 403, "v3", "v3"},
		{"PinRequested pins the requested version", versioning.PinRequested, "", "/v2/orders", false, 200, "v2", ""},
		{"PinRequested never pins a deprecated version", versioning.PinRequested, "", "/v1/orders", false, 403, "v3", "v3"},
		{"on the pin", 0, "v2", "/v2/orders", false, 200, "v2", ""},
		{"newer than the pin", 0, "v2", "/v3/orders", false, 403, "v2", "v2"},
		{"older than the pin", 0, "v3", "/v1/orders", false, 403, "v3", "v3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newPinEnv(t, func(o *versioning.Options) { o.FirstUse = tc.firstUse })
			lic := "lic_enforce"
			if tc.pinned != "" {
				e.pin(t, lic, tc.pinned)
			}
			req := request{path: tc.path, licensee: lic}
			if tc.noLic {
				req.licensee = ""
			}
			w := do(t, e.h, req)
			name, _, _ := versioning.ParsePath(tc.path)
			require.Equal(t, name, w.Header().Get(versioning.HeaderVersion))
			if tc.status == 200 {
				require.Equal(t, 200, w.Code, w.Body.String())
				require.Equal(t, 1, *e.ran)
				require.Equal(t, tc.wantPin, w.Header().Get("X-Pinned"))
			} else {
				p := problem(t, w, tc.status, versioning.CodeVersionNotEnabled)
				requireLocatedAtVersion(t, p, versioning.CodeVersionNotEnabled)
				require.Equal(t, tc.pinnedMsg, p.Extensions[versioning.MemberPinnedVersion])
				require.Contains(t, p.Detail, "pinned to version "+tc.pinnedMsg)
				require.Zero(t, *e.ran, "a refused request never reaches the handler")
			}
			require.Equal(t, tc.wantPin, e.pinned(t, lic))
		})
	}
}

func TestOverride(t *testing.T) {
	type call struct{ lic, pinned, requested string }
	var calls []call
	e := newPinEnv(t, func(o *versioning.Options) {
		o.AllowOverride = func(r *http.Request, lic, pinned, requested string) bool {
			calls = append(calls, call{lic, pinned, requested})
			return r.Header.Get("X-Sandbox") == "1"
		}
	})
	e.pin(t, "lic_sbx", "v2")
	r := httptest.NewRequest("GET", "/v3/orders", nil)
	r.Header.Set(licenseeHeader, "lic_sbx")
	r.Header.Set("X-Sandbox", "1")
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	require.Equal(t, 200, w.Code)
	require.Equal(t, "yes", w.Header().Get("X-Override"))
	require.Equal(t, "v3", w.Header().Get(versioning.HeaderVersion))
	require.Equal(t, "v2", e.pinned(t, "lic_sbx"), "an override never moves the pin")
	require.Equal(t, []call{{"lic_sbx", "v2", "v3"}}, calls)

	w = do(t, e.h, request{path: "/v3/orders", licensee: "lic_sbx"})
	problem(t, w, 403, versioning.CodeVersionNotEnabled)

	w = do(t, e.h, request{path: "/v2/orders", licensee: "lic_sbx"})
	require.Equal(t, "no", w.Header().Get("X-Override"))
	require.Len(t, calls, 2, "the hook is asked only when the versions differ")

	rec := e.usage.Users("v3", time.Time{})
	require.Len(t, rec, 1)
	require.EqualValues(t, 2, rec[0].Requests)
	require.EqualValues(t, 1, rec[0].Refused)
}

func TestUpgradeAndRepin(t *testing.T) {
	ctx := context.Background()
	e := newPinEnv(t, nil)
	e.pin(t, "lic_up", "v1")

	_, err := e.rt.Upgrade(ctx, "lic_up", "v9")
	require.ErrorIs(t, err, versioning.ErrUnknownVersion)
	p, err := e.rt.Upgrade(ctx, "lic_up", "v2")
	require.NoError(t, err)
	require.Equal(t, "v2", p.Version)
	require.Equal(t, testNow, p.PinnedAt)
	require.Equal(t, 403, do(t, e.h, request{path: "/v1/orders", licensee: "lic_up"}).Code)
	require.Equal(t, 200, do(t, e.h, request{path: "/v2/orders", licensee: "lic_up"}).Code)

	p, err = e.rt.Upgrade(ctx, "lic_up", "v2")
	require.NoError(t, err, "upgrading to the pinned version is a no-op")
	require.Equal(t, "v2", p.Version)
	_, err = e.rt.Upgrade(ctx, "lic_up", "v1")
	require.ErrorIs(t, err, versioning.ErrDowngrade)
	p, err = e.rt.Repin(ctx, "lic_up", "v1")
	require.NoError(t, err, "support may roll back")
	require.Equal(t, "v1", p.Version)

	p, err = e.rt.Upgrade(ctx, "lic_new", "v2")
	require.NoError(t, err, "an unpinned licensee is pinned")
	require.Equal(t, "v2", p.Version)

	e.clk.Set(v1Sunset)
	_, err = e.rt.Upgrade(ctx, "lic_new", "v1")
	require.ErrorIs(t, err, versioning.ErrVersionSunset)
	e.clk.Set(v3Released.Add(-time.Second))
	_, err = e.rt.Upgrade(ctx, "lic_new", "v3")
	require.ErrorIs(t, err, versioning.ErrUnknownVersion, "an unreleased version cannot be pinned")
	_, err = e.rt.Upgrade(ctx, "", "v3")
	require.ErrorIs(t, err, versioning.ErrInvalidPin)

	e.pins.setFail(errStoreDown)
	_, err = e.rt.Upgrade(ctx, "lic_new", "v2")
	require.ErrorIs(t, err, errStoreDown)
	e.pins.setFail(nil)

	require.NoError(t, e.rt.Unpin(ctx, "lic_up"))
	require.Empty(t, e.pinned(t, "lic_up"))
}

func TestUpgradeRace(t *testing.T) {
	ctx := context.Background()
	e := newPinEnv(t, nil)
	e.pin(t, "lic_race", "v1")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			to := []string{"v2", "v3"}[i%2]
			if _, err := e.rt.Upgrade(ctx, "lic_race", to); err != nil && !errors.Is(err, versioning.ErrDowngrade) {
				t.Errorf("Upgrade(%s): %v", to, err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, "v3", e.pinned(t, "lic_race"), "racing upgrades never move a pin backwards")
}

// A pin whose version is sunset (or no longer registered) does not lock its licensee out: the first
// request on a newer version moves it there.
func TestLapsedPin(t *testing.T) {
	e := newPinEnv(t, nil)
	e.pin(t, "lic_old", "v1")
	e.clk.Set(v1Sunset)
	problem(t, do(t, e.h, request{path: "/v1/orders", licensee: "lic_old"}), 410, versioning.CodeVersionSunset)
	require.Equal(t, "v1", e.pinned(t, "lic_old"), "a 410 does not move the pin")

	w := do(t, e.h, request{path: "/v2/orders", licensee: "lic_old"})
	require.Equal(t, 200, w.Code, w.Body.String())
	require.Equal(t, "v2", w.Header().Get("X-Pinned"))
	require.Equal(t, "v2", e.pinned(t, "lic_old"))
	problem(t, do(t, e.h, request{path: "/v3/orders", licensee: "lic_old"}), 403, versioning.CodeVersionNotEnabled)

	// A version removed from the registry lapses too.
	e.pin(t, "lic_gone", "v0")
	require.Equal(t, 200, do(t, e.h, request{path: "/v3/orders", licensee: "lic_gone"}).Code)
	require.Equal(t, "v3", e.pinned(t, "lic_gone"))

	// Lapsed but a concurrent move won: decide on the pin in force.
	e.pin(t, "lic_moved", "v1")
	e.pins.PinStore = &swapLoses{PinStore: e.pins.PinStore, moveTo: "v3"}
	problem(t, do(t, e.h, request{path: "/v2/orders", licensee: "lic_moved"}), 403, versioning.CodeVersionNotEnabled)
	require.Equal(t, "v3", e.pinned(t, "lic_moved"))
}

// swapLoses moves the pin to moveTo just before the caller's CompareAndSwap, as a racing replica would.
type swapLoses struct {
	versioning.PinStore
	moveTo string
}

func (s *swapLoses) CompareAndSwap(ctx context.Context, lic, from, to string, at time.Time) (versioning.Pin, error) {
	if _, err := s.PinStore.CompareAndSwap(ctx, lic, from, s.moveTo, at); err != nil {
		return versioning.Pin{}, err
	}
	return s.PinStore.CompareAndSwap(ctx, lic, from, to, at)
}

func TestPinStoreFailureFailsClosed(t *testing.T) {
	e := newPinEnv(t, func(o *versioning.Options) { o.RetryAfter = 3 * time.Second })
	e.pins.setFail(errStoreDown)
	w := do(t, e.h, request{path: "/v3/orders", licensee: "lic_x"})
	p := problem(t, w, http.StatusServiceUnavailable, versioning.CodePinUnavailable)
	require.Equal(t, "3", w.Header().Get("Retry-After"))
	require.NotContains(t, p.Detail, "connection refused", "store errors are not sent")
	require.Zero(t, *e.ran)
	require.Equal(t, "v3", w.Header().Get(versioning.HeaderVersion))

	e.pins.setFail(nil)
	e.pin(t, "lic_y", "v1")
	e.clk.Set(v1Sunset)
	e.pins.PinStore = &swapFails{PinStore: e.pins.PinStore}
	problem(t, do(t, e.h, request{path: "/v2/orders", licensee: "lic_y"}), 503, versioning.CodePinUnavailable)
}

type swapFails struct{ versioning.PinStore }

func (swapFails) CompareAndSwap(context.Context, string, string, string, time.Time) (versioning.Pin, error) {
	return versioning.Pin{}, errStoreDown
}

// The Licensee function's error is the answer, on the API and on the pin endpoint alike: an
// *apierror.Error as it is, anything else as the opaque 500, and the handler never runs.
func TestLicenseeFuncFails(t *testing.T) {
	for name, tc := range map[string]struct {
		err    error
		status int
		code   string
	}{
		"plain error":   {errors.New("no principal: authentication did not run"), 500, apierror.CodeInternal},
		"problem (401)": {apierror.Unauthenticated("api_key_missing", "send an API key"), 401, "api_key_missing"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newPinEnv(t, func(o *versioning.Options) {
				o.Licensee = func(*http.Request) (string, error) { return "", tc.err }
			})
			problem(t, do(t, e.h, request{path: "/v3/orders"}), tc.status, tc.code)
			require.Zero(t, *e.ran)
			rec := httptest.NewRecorder()
			e.rt.PinHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/version_pin", nil))
			problem(t, rec, tc.status, tc.code)
			require.Zero(t, e.pins.getCount(), "no pin is read for a caller nobody could tell")
		})
	}
}

// A request the Licensee function names nobody for ("" and no error) is served on the version in
// its path and pins nobody, while the pin endpoint asks it to authenticate.
func TestNoLicenseeIsNotPinned(t *testing.T) {
	e := newPinEnv(t, nil)
	require.Equal(t, 200, do(t, e.h, request{path: "/v1/orders"}).Code)
	require.Equal(t, 200, do(t, e.h, request{path: "/v3/orders"}).Code)
	require.Equal(t, 2, *e.ran)
	require.Zero(t, e.pins.getCount(), "no pin is read for nobody")
	rec := httptest.NewRecorder()
	e.rt.PinHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/version_pin", nil))
	problem(t, rec, 401, versioning.CodeLicenseeRequired)
}

func TestPinCache(t *testing.T) {
	e := newPinEnv(t, func(o *versioning.Options) { o.PinCacheTTL = time.Minute })
	e.pin(t, "lic_c", "v2")
	for range 3 {
		require.Equal(t, 200, do(t, e.h, request{path: "/v2/orders", licensee: "lic_c"}).Code)
	}
	require.Equal(t, 1, e.pins.getCount(), "the pin is read once within the TTL")

	// Another replica (sharing the store, not the cache) upgrades the licensee.
	replica := must(versioning.New(fixtureRegistry(t), &versioning.Options{Now: e.clk.Now, Pins: e.pins.PinStore, Licensee: headerLicensee}))
	_, err := replica.Upgrade(context.Background(), "lic_c", "v3")
	require.NoError(t, err)
	require.Equal(t, 200, do(t, e.h, request{path: "/v3/orders", licensee: "lic_c"}).Code,
		"a cached pin that disagrees is re-read before refusing")
	require.Equal(t, 403, do(t, e.h, request{path: "/v2/orders", licensee: "lic_c"}).Code,
		"the re-read refreshed the cache")

	// The stale direction: the old version stays reachable until the TTL ends.
	_, err = replica.Repin(context.Background(), "lic_c", "v2")
	require.NoError(t, err)
	require.Equal(t, 200, do(t, e.h, request{path: "/v2/orders", licensee: "lic_c"}).Code)
	_, err = replica.Upgrade(context.Background(), "lic_c", "v3")
	require.NoError(t, err)
	require.Equal(t, 200, do(t, e.h, request{path: "/v2/orders", licensee: "lic_c"}).Code, "cached v2 within the TTL")
	e.clk.Set(testNow.Add(time.Minute))
	require.Equal(t, 403, do(t, e.h, request{path: "/v2/orders", licensee: "lic_c"}).Code, "expired at the TTL")

	t.Run("bounded", func(t *testing.T) {
		e := newPinEnv(t, func(o *versioning.Options) { o.PinCacheTTL = time.Minute; o.PinCacheSize = 2 })
		for _, lic := range []string{"a", "b", "c", "a", "b", "c"} {
			require.Equal(t, 200, do(t, e.h, request{path: "/v3/orders", licensee: lic}).Code)
		}
		require.GreaterOrEqual(t, e.pins.getCount(), 4, "with room for two, three licensees keep missing")
	})
}

// Many first requests of one licensee race on different versions: one pin wins, and every request
// was either served on it or refused naming it.
func TestFirstUseRace(t *testing.T) {
	e := newPinEnv(t, func(o *versioning.Options) { o.FirstUse = versioning.PinRequested })
	const n = 32
	codes := make([]int, n)
	paths := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		paths[i] = []string{"/v2/orders", "/v3/orders"}[i%2]
		wg.Go(func() {
			r := httptest.NewRequest("GET", paths[i], nil)
			r.Header.Set(licenseeHeader, "lic_race")
			w := httptest.NewRecorder()
			e.h.ServeHTTP(w, r)
			codes[i] = w.Code
		})
	}
	wg.Wait()
	pin := e.pinned(t, "lic_race")
	require.Contains(t, []string{"v2", "v3"}, pin)
	for i := range n {
		name, _, _ := versioning.ParsePath(paths[i])
		if name == pin {
			require.Equal(t, 200, codes[i], paths[i])
		} else {
			require.Equal(t, 403, codes[i], paths[i])
		}
	}
}

func TestRouterRenderEvent(t *testing.T) {
	ctx := context.Background()
	e := newPinEnv(t, nil)
	ev := versioning.EventShape{Version: "v3", Type: "order.created", Data: json.RawMessage(`{"object":` + orderJSON + `}`)}
	got, err := e.rt.RenderEvent(ctx, "lic_unpinned", ev)
	require.NoError(t, err)
	require.Equal(t, ev, got, "an unpinned licensee gets the event as stored")

	e.pin(t, "lic_v1", "v1")
	got, err = e.rt.RenderEvent(ctx, "lic_v1", ev)
	require.NoError(t, err)
	require.Equal(t, "v1", got.Version)
	require.Equal(t, "order.placed", got.Type)
	require.Contains(t, string(got.Data), `"direction":"buy"`)

	e.pins.setFail(errStoreDown)
	_, err = e.rt.RenderEvent(ctx, "lic_v1", ev)
	require.ErrorIs(t, err, versioning.ErrPinUnavailable)
}

func TestPinHandler(t *testing.T) {
	e := newPinEnv(t, nil)
	mux := http.NewServeMux()
	mux.Handle("/{version}/version_pin", e.rt.PinHandler())
	h := e.rt.Handler(mux)
	var pr versioning.PinResource

	w := do(t, h, request{path: "/v3/version_pin", licensee: "lic_ph"})
	require.Equal(t, 200, w.Code, w.Body.String())
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &pr))
	require.Equal(t, versioning.PinResource{Object: "version_pin", Version: "v3", PinnedAt: testNow.Unix(),
		Newest: "v3", Supported: []string{"v1", "v2", "v3"}}, pr)

	e.pin(t, "lic_old", "v1")
	w = do(t, h, request{method: "GET", path: "/v1/version_pin", licensee: "lic_old"})
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &pr))
	require.Equal(t, "v1", pr.Version)
	require.Equal(t, testNow.Add(-time.Hour).Unix(), pr.PinnedAt)

	cases := []struct {
		name, body string
		status     int
		code       string
		pointer    string
	}{
		{"unknown target", `{"version":"v9"}`, 400, versioning.CodeVersionUnknown, "/version"},
		{"malformed name", `{"version":"latest"}`, 400, versioning.CodeVersionUnknown, "/version"},
		{"missing member", `{}`, 400, apierror.CodeFieldMissing, "/version"},
		{"wrong type", `{"version":2}`, 400, apierror.CodeWrongType, "/version"},
		{"unknown member", `{"version":"v2","force":true}`, 400, apierror.CodeUnknownField, "/force"},
		{"malformed JSON", `{"version":`, 400, apierror.CodeMalformedJSON, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, h, request{method: "POST", path: "/v1/version_pin", licensee: "lic_old", body: tc.body})
			p := problem(t, w, tc.status, tc.code)
			require.Equal(t, tc.pointer, p.Errors[0].Pointer)
		})
	}

	w = do(t, h, request{method: "POST", path: "/v1/version_pin", licensee: "lic_old", body: `{"version":"v2"}`})
	require.Equal(t, 200, w.Code, w.Body.String())
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &pr))
	require.Equal(t, "v2", pr.Version)
	require.Equal(t, testNow.Unix(), pr.PinnedAt)
	require.Equal(t, 403, do(t, h, request{path: "/v1/version_pin", licensee: "lic_old"}).Code, "v1 is no longer enabled")

	// Going back to v1 now would roll lic_old's upgrade back (TestRollbackWithinWindow); a pin that
	// never moved has no upgrade to undo.
	e.pin(t, "lic_v2", "v2")
	w = do(t, h, request{method: "POST", path: "/v2/version_pin", licensee: "lic_v2", body: `{"version":"v1"}`})
	p := problem(t, w, 400, versioning.CodeVersionDowngrade)
	require.Equal(t, "/version", p.Errors[0].Pointer)

	e.clk.Set(v1Sunset)
	w = do(t, h, request{method: "POST", path: "/v2/version_pin", licensee: "lic_old", body: `{"version":"v1"}`})
	problem(t, w, 400, versioning.CodeVersionSunset)
	e.clk.Set(testNow)

	w = do(t, h, request{method: "PUT", path: "/v2/version_pin", licensee: "lic_old", body: `{}`})
	problem(t, w, 405, "method_not_allowed")
	require.Equal(t, "GET, HEAD, POST", w.Header().Get("Allow"))

	w = do(t, h, request{path: "/v2/version_pin"})
	problem(t, w, 401, versioning.CodeLicenseeRequired)

	e.pins.setFail(errStoreDown)
	w = do(t, e.rt.PinHandler(), request{method: "POST", path: "/v2/version_pin", licensee: "lic_old", body: `{"version":"v3"}`})
	problem(t, w, 503, versioning.CodePinUnavailable)
}

// The Router checks every argument before it calls the PinStore, so that a store need not (the
// PinStore contract): each entry point refuses what no store is given with ErrInvalidPin (the
// opaque 500 over HTTP, since the Licensee hook is at fault), and the store is never called with
// it — faultyPins fails the test if it is. These checks were the conformance suite's
// InvalidArguments until the stores stopped checking.
func TestRouterChecksBeforeTheStore(t *testing.T) {
	ctx := context.Background()
	shape := versioning.EventShape{Version: "v3", Type: "order.created", Data: json.RawMessage(`{}`)}
	for name, lic := range badLicensees() {
		t.Run(name, func(t *testing.T) {
			e := newPinEnv(t, func(o *versioning.Options) {
				o.Licensee = func(*http.Request) (string, error) { return lic, nil }
			})
			_, err := e.rt.Pin(ctx, lic)
			require.ErrorIs(t, err, versioning.ErrInvalidPin, "Pin")
			_, err = e.rt.Upgrade(ctx, lic, "v3")
			require.ErrorIs(t, err, versioning.ErrInvalidPin, "Upgrade")
			_, err = e.rt.Repin(ctx, lic, "v2")
			require.ErrorIs(t, err, versioning.ErrInvalidPin, "Repin")
			require.ErrorIs(t, e.rt.Unpin(ctx, lic), versioning.ErrInvalidPin, "Unpin")
			_, err = e.rt.RenderEvent(ctx, lic, shape)
			require.ErrorIs(t, err, versioning.ErrInvalidPin, "RenderEvent")
			require.ErrorIs(t, err, versioning.ErrPinUnavailable, "RenderEvent, as when a store refused it")
			if lic != "" {
				_, err = e.rt.Pins(ctx, "", lic, 10)
				require.ErrorIs(t, err, versioning.ErrInvalidPin, "Pins after")
			}
			ph := e.rt.PinHandler()
			if lic == "" { // over HTTP, "" is nobody: not pinned, and the pin endpoint asks who
				require.Equal(t, 200, do(t, e.h, request{path: "/v3/orders"}).Code)
				problem(t, do(t, ph, request{path: "/v3/version_pin"}), 401, versioning.CodeLicenseeRequired)
				return
			}
			problem(t, do(t, e.h, request{path: "/v3/orders"}), 500, apierror.CodeInternal)
			problem(t, do(t, ph, request{path: "/v3/version_pin"}), 500, apierror.CodeInternal)
			problem(t, do(t, ph, request{method: http.MethodPost, path: "/v3/version_pin", body: `{"version":"v3"}`,
				contentType: "application/json"}), 500, apierror.CodeInternal)
			require.Zero(t, *e.ran)
			require.Zero(t, e.pins.getCount(), "the store was never asked")
		})
	}
	e := newPinEnv(t, nil)
	for _, v := range badVersions {
		if v == "" {
			continue // every version
		}
		_, err := e.rt.Pins(ctx, v, "", 10)
		require.ErrorIs(t, err, versioning.ErrInvalidPin, "Pins version %q", v)
		_, err = e.rt.Upgrade(ctx, "lic_a", v)
		require.ErrorIs(t, err, versioning.ErrUnknownVersion, "Upgrade to %q: the registry refuses it first", v)
	}
	for _, limit := range badLimits {
		_, err := e.rt.Pins(ctx, "v1", "", limit)
		require.ErrorIs(t, err, versioning.ErrInvalidPin, "Pins limit %d", limit)
	}
}

// Router.Pins lists who is pinned, to one version or to any, page by page.
func TestRouterPins(t *testing.T) {
	ctx := context.Background()
	e := newPinEnv(t, nil)
	e.pin(t, "lic_a", "v1")
	e.pin(t, "lic_b", "v2")
	e.pin(t, "lic_c", "v1")
	e.pin(t, "lic_gone", "v0") // a version no longer registered is listed too
	licensees := func(pins []versioning.Pin) (out []string) {
		for _, p := range pins {
			out = append(out, p.Licensee)
		}
		return out
	}
	pins, err := e.rt.Pins(ctx, "v1", "", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"lic_a", "lic_c"}, licensees(pins))
	pins, err = e.rt.Pins(ctx, "", "lic_a", 2)
	require.NoError(t, err)
	require.Equal(t, []string{"lic_b", "lic_c"}, licensees(pins))
	pins, err = e.rt.Pins(ctx, "v0", "", versioning.MaxPinList)
	require.NoError(t, err)
	require.Equal(t, []string{"lic_gone"}, licensees(pins))
	e.pins.setFail(errStoreDown)
	_, err = e.rt.Pins(ctx, "", "", 10)
	require.ErrorIs(t, err, errStoreDown)
}
