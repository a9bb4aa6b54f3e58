package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/internal/testclock"
	"github.com/svcplatform/conventions/versioning"
)

// pinNow is the versions server's clock when a test starts.
var pinNow = time.Date(2030, 12, 31, 0, 0, 0, 0, time.UTC)

// otherKey authenticates a second licensee of the versions server.
const otherKey = "sk_sandbox_versions_other"

type versionsAPI struct {
	base  string
	sent  *sentLog
	clock *testclock.Clock
	pins  *versioning.MemoryPinStore
}

// newVersionsAPI serves the pin and changelog endpoints as the reference server mounts them —
// behind the versioning router, itself behind the idempotency middleware — with v1 (sunset), v2
// (deprecated, sunset 36 hours after pinNow) and v3, a rollback window of 24 hours, and testKey's
// licensee lic_test and otherKey's lic_other; it records what svc sends.
func newVersionsAPI(t *testing.T) *versionsAPI {
	t.Helper()
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	reg, err := versioning.NewRegistry([]versioning.Version{
		{Name: "v1", Released: day(2024, 1, 1), Deprecated: day(2025, 1, 1), Sunset: day(2025, 6, 1)},
		{Name: "v2", Released: day(2025, 1, 1), Deprecated: day(2030, 6, 1), Sunset: pinNow.Add(36 * time.Hour)},
		{Name: "v3", Released: time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)},
	}, []versioning.Change{
		{Name: "order_side_renamed", Version: "v2", Object: "order", Description: "An order's direction is called side."},
		{Name: "list_has_more_renamed", Version: "v2", Description: "Lists say has_more instead of more."},
		{Name: "order_amount_structured", Version: "v3", Object: "order", Description: "An order's amount is an object with value and currency."},
	})
	require.NoError(t, err)
	api := &versionsAPI{sent: &sentLog{}, clock: testclock.New(pinNow), pins: versioning.NewMemoryPinStore()}
	rt, err := versioning.New(reg, &versioning.Options{Now: api.clock.Now, Pins: api.pins, RollbackWindow: 24 * time.Hour,
		Licensee: func(r *http.Request) (string, error) {
			switch r.Header.Get("Authorization") {
			case "Bearer " + testKey:
				return "lic_test", nil
			case "Bearer " + otherKey:
				return "lic_other", nil
			}
			return "", apierror.Unauthenticated("api_key_invalid", "the API key is not valid")
		}})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/{version}/version_pin", rt.PinHandler())
	mux.Handle("/{version}/changelog", rt.ChangelogHandler())
	idem, err := idempotency.New(nil)
	require.NoError(t, err)
	srv := httptest.NewServer(apierror.WithRequestID(api.sent.wrap(idem.Handler(rt.Handler(mux)))))
	t.Cleanup(srv.Close)
	api.base = srv.URL
	return api
}

// pin pins a licensee to version an hour before pinNow, as its first request would have.
func (a *versionsAPI) pin(t *testing.T, licensee, version string) {
	t.Helper()
	_, _, err := a.pins.SetIfAbsent(context.Background(), licensee, version, pinNow.Add(-time.Hour))
	require.NoError(t, err)
}

func (a *versionsAPI) vars(version string) map[string]string {
	return map[string]string{envAPIKey: testKey, envBaseURL: a.base, envAPIVersion: version}
}

var uuidKey = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// TestVersionPin drives one licensee's pin through show, upgrade and rollback against the real
// handler, with the requests each sends, and replays of an upgrade and of a rollback by their
// Idempotency-Key, from before and after svc's version was switched.
func TestVersionPin(t *testing.T) {
	api := newVersionsAPI(t)
	api.pin(t, "lic_test", "v2")

	r := runSvc(t, api.vars("v2"), "", "version-pin", "show")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, []sentRequest{{Method: "GET", Path: "/v2/version_pin"}}, api.sent.take())
	require.Equal(t, "the key's licensee is pinned to v2\n"+
		"  pinned at           2030-12-30T23:00:00Z\n"+
		"  newest version      v3 (what changes: 'svc changelog'; upgrade: 'svc version-pin upgrade v3')\n"+
		"  supported versions  v2, v3\n"+
		"  previous version    none: the pin has never moved\n", r.stdout)

	r = runSvc(t, api.vars("v2"), "", "version-pin", "rollback")
	require.Equal(t, exitRefused, r.code)
	require.Equal(t, "svc: no rollback: the pin has never moved: the key's licensee has been pinned to v2 since 2030-12-30T23:00:00Z\n", r.stderr)
	require.Equal(t, []sentRequest{{Method: "GET", Path: "/v2/version_pin"}}, api.sent.take(), "nothing sent but the read")

	r = runSvc(t, api.vars("v2"), "", "version-pin", "upgrade", "v3")
	require.Equal(t, exitOK, r.code, r.stderr)
	sent := api.sent.take()
	require.Len(t, sent, 1)
	upgradeKey := sent[0].IdempotencyKey
	require.Regexp(t, uuidKey, upgradeKey)
	require.Equal(t, sentRequest{Method: "POST", Path: "/v2/version_pin", IdempotencyKey: upgradeKey, Body: `{"version":"v3"}`}, sent[0])
	require.Equal(t, "the key's licensee is pinned to v3 now\n"+
		"  pinned at           2030-12-31T00:00:00Z\n"+
		"  newest version      v3\n"+
		"  supported versions  v2, v3\n"+
		"  previous version    v2: a rollback is possible, once, until 2031-01-01T00:00:00Z ('svc version-pin rollback')\n"+
		"svc's requests name v2: set SVC_API_VERSION=v3 (or pass --api-version v3) for the next ones\n", r.stdout)
	require.Empty(t, r.stderr)

	t.Run("the upgrade's key replays it, on the version it was sent from", func(t *testing.T) {
		r := runSvc(t, api.vars("v2"), "", "version-pin", "upgrade", "v3", "--idempotency-key", upgradeKey)
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "the key's licensee is pinned to v3 now (replayed: this key was used before; nothing was done a second time)\n")
		require.Equal(t, []sentRequest{{Method: "POST", Path: "/v2/version_pin", IdempotencyKey: upgradeKey, Body: `{"version":"v3"}`}}, api.sent.take())
	})
	t.Run("svc on the old version is told the pin's", func(t *testing.T) {
		r := runSvc(t, api.vars("v2"), "", "version-pin", "show")
		require.Equal(t, exitRefused, r.code)
		require.Contains(t, r.stderr, "svc: GET "+api.base+"/v2/version_pin: 403 Forbidden (version_not_enabled)\n")
		require.Contains(t, r.stderr, "the key's licensee is pinned to v3: set SVC_API_VERSION=v3 (or pass --api-version v3)\n")
		api.sent.take()
	})

	api.clock.Advance(time.Hour)
	r = runSvc(t, api.vars("v3"), "", "version-pin", "rollback", "--idempotency-key", "rb-1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, []sentRequest{{Method: "GET", Path: "/v3/version_pin"},
		{Method: "POST", Path: "/v3/version_pin", IdempotencyKey: "rb-1", Body: `{"version":"v2"}`}}, api.sent.take())
	require.Equal(t, "the key's licensee is pinned to v2 now: rolled back from v3\n"+
		"  pinned at           2030-12-31T01:00:00Z\n"+
		"  newest version      v3 (what changes: 'svc changelog'; upgrade: 'svc version-pin upgrade v3')\n"+
		"  supported versions  v2, v3\n"+
		"  previous version    v3: the last move was a rollback\n"+
		"svc's requests name v3: set SVC_API_VERSION=v2 (or pass --api-version v2) for the next ones\n", r.stdout)

	t.Run("the rollback's key replays it, though the pin has left svc's version", func(t *testing.T) {
		r := runSvc(t, api.vars("v3"), "", "version-pin", "rollback", "--idempotency-key", "rb-1")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Equal(t, []sentRequest{{Method: "GET", Path: "/v3/version_pin"},
			{Method: "POST", Path: "/v3/version_pin", IdempotencyKey: "rb-1", Body: `{"version":"v2"}`}}, api.sent.take(),
			"the same request as the first: the read is refused, the pin being on v2")
		require.True(t, strings.HasPrefix(r.stdout, "the key's licensee is pinned to v2 now: rolled back from v3 (replayed: this key was used before; nothing was done a second time)\n"), r.stdout)
		require.Empty(t, r.stderr)
	})
	t.Run("and after svc's version was switched", func(t *testing.T) {
		r := runSvc(t, api.vars("v2"), "", "version-pin", "rollback", "--idempotency-key", "rb-1")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Equal(t, []sentRequest{{Method: "GET", Path: "/v2/version_pin"},
			{Method: "POST", Path: "/v3/version_pin", IdempotencyKey: "rb-1", Body: `{"version":"v2"}`}}, api.sent.take())
		require.True(t, strings.HasPrefix(r.stdout, "the key's licensee is pinned to v2 now: rolled back from v3 (replayed: "), r.stdout)
		require.NotContains(t, r.stdout, "set SVC_API_VERSION", "svc names v2 already")
	})
	t.Run("a rollback is not rolled back", func(t *testing.T) {
		r := runSvc(t, api.vars("v2"), "", "version-pin", "rollback")
		require.Equal(t, exitRefused, r.code)
		require.Equal(t, "svc: no rollback: the last move was not an upgrade: the pin went back from v3 to v2 at 2030-12-31T01:00:00Z, and a rollback is not rolled back: 'svc version-pin upgrade v3' goes forward again\n", r.stderr)
		require.Equal(t, []sentRequest{{Method: "GET", Path: "/v2/version_pin"}}, api.sent.take())
	})
	t.Run("--json prints the server's pin", func(t *testing.T) {
		r := runSvc(t, api.vars("v2"), "", "version-pin", "show", "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		var pin map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &pin))
		require.Equal(t, map[string]any{"object": "version_pin", "version": "v2", "pinned_at": float64(pinNow.Add(time.Hour).Unix()),
			"newest_version": "v3", "supported_versions": []any{"v2", "v3"}, "previous_version": "v3"}, pin)
		api.sent.take()
	})
}

// When no rollback is possible, svc says why from the pin it read, and sends nothing more.
func TestVersionPinRollbackRefused(t *testing.T) {
	api := newVersionsAPI(t)
	api.pin(t, "lic_test", "v2")
	r := runSvc(t, api.vars("v2"), "", "version-pin", "upgrade", "v3")
	require.Equal(t, exitOK, r.code, r.stderr)
	api.sent.take()

	api.clock.Advance(25 * time.Hour) // past the window of 24 hours; v2 is served for 11 more
	r = runSvc(t, api.vars("v3"), "", "version-pin", "rollback")
	require.Equal(t, exitRefused, r.code)
	require.Equal(t, "svc: no rollback: the window has closed: the upgrade from v2 to v3 at 2030-12-31T00:00:00Z is final ('svc version-pin show' says until when a rollback is possible after an upgrade)\n", r.stderr)
	require.Equal(t, []sentRequest{{Method: "GET", Path: "/v3/version_pin"}}, api.sent.take())
	r = runSvc(t, api.vars("v3"), "", "version-pin", "show")
	require.Contains(t, r.stdout, "  previous version    v2: the upgrade is final\n")
	api.sent.take()

	api.clock.Advance(12 * time.Hour) // v2 is sunset
	r = runSvc(t, api.vars("v3"), "", "version-pin", "rollback")
	require.Equal(t, exitRefused, r.code)
	require.Equal(t, "svc: no rollback: v2 is no longer served (the server supports v3): the upgrade from v2 to v3 at 2030-12-31T00:00:00Z is final\n", r.stderr)
	require.Equal(t, []sentRequest{{Method: "GET", Path: "/v3/version_pin"}}, api.sent.take())
}

// The server's refusals are printed as every command prints them; a 409 version_upgrade_final is
// final (exit status 3), not a request to send again.
func TestVersionPinProblems(t *testing.T) {
	api := newVersionsAPI(t)
	api.pin(t, "lic_test", "v2")
	api.pin(t, "lic_other", "v3")
	r := runSvc(t, api.vars("v2"), "", "version-pin", "upgrade", "v3")
	require.Equal(t, exitOK, r.code, r.stderr)
	api.sent.take()

	t.Run("the window closes between svc's read and its rollback", func(t *testing.T) {
		api.sent.before = func(r *http.Request) {
			if r.Method == http.MethodPost {
				api.clock.Set(pinNow.Add(25 * time.Hour))
			}
		}
		defer func() { api.sent.before = nil }()
		r := runSvc(t, api.vars("v3"), "", "version-pin", "rollback")
		require.Equal(t, exitRefused, r.code, r.stderr)
		require.Equal(t, "svc: POST "+api.base+"/v3/version_pin: 409 Conflict (version_upgrade_final)\n"+
			"  the upgrade from v2 to v3 became final at 2031-01-01T00:00:00Z; a pin moves back only within the rollback window after an upgrade\n"+
			"  - body /version: the upgrade from v2 to v3 became final at 2031-01-01T00:00:00Z; a pin moves back only within the rollback window after an upgrade (version_upgrade_final)\n",
			regexpRequestLine.ReplaceAllString(r.stderr, ""))
		require.NotContains(t, r.stderr, "send it again", "a final answer is not retried")
		sent := api.sent.take()
		require.Equal(t, sentRequest{Method: "GET", Path: "/v3/version_pin"}, sent[0])
		for _, s := range sent[1:] {
			require.Equal(t, sentRequest{Method: "POST", Path: "/v3/version_pin", IdempotencyKey: sent[1].IdempotencyKey, Body: `{"version":"v2"}`}, s)
		}
	})
	other := map[string]string{envAPIKey: otherKey, envBaseURL: api.base, envAPIVersion: "v3"}
	for _, tc := range []struct {
		name, version string
		want          string
	}{
		{"an older version", "v2", "  - body /version: must not be older than the pinned version: an upgrade only moves forward (version_downgrade)\n"},
		{"a version the server does not serve", "v9", "  - body /version: must be a supported version: v2, v3 (version_unknown)\n"},
		{"a sunset version", "v1", "  - body /version: the version is sunset; choose a supported one (version_sunset)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runSvc(t, other, "", "version-pin", "upgrade", tc.version)
			require.Equal(t, exitRefused, r.code, r.stderr)
			require.Contains(t, r.stderr, "svc: POST "+api.base+"/v3/version_pin: 400 Bad Request")
			require.Contains(t, r.stderr, tc.want)
			require.NotContains(t, r.stderr, "send it again")
			require.Empty(t, r.stdout)
			api.sent.take()
		})
	}
}

func TestChangelog(t *testing.T) {
	api := newVersionsAPI(t)
	api.pin(t, "lic_test", "v2")

	r := runSvc(t, api.vars("v2"), "", "changelog")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, []sentRequest{{Method: "GET", Path: "/v2/changelog"}}, api.sent.take())
	require.Equal(t, `v3  released 2026-03-15T12:00:00Z
  order_amount_structured  order  An order's amount is an object with value and currency.

v2  released 2025-01-01  deprecated 2030-06-01  sunset 2031-01-01T12:00:00Z
  order_side_renamed     order  An order's direction is called side.
  list_has_more_renamed  -      Lists say has_more instead of more.

v1  released 2024-01-01  deprecated 2025-01-01  sunset 2025-06-01 (no longer answers)
  no changes: the first version
`, r.stdout)

	r = runSvc(t, api.vars("v2"), "", "changelog", "--version", "v2")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "v2  released 2025-01-01  deprecated 2030-06-01"), r.stdout)
	require.NotContains(t, r.stdout, "v3")
	require.Equal(t, 3, strings.Count(r.stdout, "\n"))
	r = runSvc(t, api.vars("v2"), "", "changelog", "--version", "v1")
	require.Equal(t, "v1  released 2024-01-01  deprecated 2025-01-01  sunset 2025-06-01 (no longer answers)\n  no changes: the first version\n", r.stdout)

	r = runSvc(t, api.vars("v2"), "", "changelog", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var list struct {
		Object string
		Data   []struct {
			Version string
			Changes []map[string]string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Equal(t, "list", list.Object)
	require.Len(t, list.Data, 3)
	require.Equal(t, map[string]string{"name": "order_side_renamed", "resource": "order", "description": "An order's direction is called side."},
		list.Data[1].Changes[0])

	r = runSvc(t, api.vars("v2"), "", "changelog", "--json", "--version", "v3")
	require.Equal(t, exitOK, r.code, r.stderr)
	var v struct{ Object, Version string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	require.Equal(t, "api_version", v.Object)
	require.Equal(t, "v3", v.Version)

	r = runSvc(t, api.vars("v2"), "", "changelog", "--version", "v9")
	require.Equal(t, exitUsage, r.code)
	require.Equal(t, "svc: svc changelog: the server has no version v9: it has v3, v2, v1\n", r.stderr)
	api.sent.take()
}

// Mistakes on the command line are refused before any request.
func TestVersionsUsageErrors(t *testing.T) {
	api := newVersionsAPI(t)
	api.pin(t, "lic_test", "v2")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"upgrade without a version", []string{"version-pin", "upgrade"}, "the version is required, such as v2"},
		{"upgrade to a number", []string{"version-pin", "upgrade", "2"}, `"2" is not a version: they look like v1, v2, …`},
		{"upgrade to two versions", []string{"version-pin", "upgrade", "v2", "v3"}, `unexpected argument "v3"`},
		{"rollback takes no version", []string{"version-pin", "rollback", "v1"}, `unexpected argument "v1"`},
		{"show takes no argument", []string{"version-pin", "show", "v2"}, `unexpected argument "v2"`},
		{"a bad --idempotency-key", []string{"version-pin", "upgrade", "v3", "--idempotency-key", "a b"}, "--idempotency-key must be 1 to 255 visible ASCII characters"},
		{"a bad --idempotency-key, before the rollback reads the pin", []string{"version-pin", "rollback", "--idempotency-key", "\u00e9"}, "--idempotency-key must be 1 to 255 visible ASCII characters"},
		{"changelog of a bad version", []string{"changelog", "--version", "2"}, `--version "2" is not a version`},
		{"the group alone", []string{"version-pin"}, "Usage: svc version-pin <command>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runSvc(t, api.vars("v2"), "", tc.args...)
			require.Equal(t, exitUsage, r.code, r.stderr)
			require.Contains(t, r.stderr, tc.want)
		})
	}
	require.Empty(t, api.sent.take())

	r := runSvc(t, nil, "", "version")
	require.Equal(t, exitOK, r.code, "svc's own version is still 'svc version'")
	require.True(t, strings.HasPrefix(r.stdout, "svc "), r.stdout)
}
