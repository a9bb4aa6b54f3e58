package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/orderserver/server"
)

// The tests in this file move a licensee's version pin on the real server — an upgrade, a rollback
// within the window, the refusal after it — and read the changelog.

// TestVersionPinUpgradeAndRollback: a licensee pinned to v1 upgrades to v2; the pin shows where it
// came from and until when it may go back; it goes back within the window, once; and the refusals of
// the pin endpoint are located at /version.
func TestVersionPinUpgradeAndRollback(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	key := issueCredentials(t, srv)
	pinURL := func(v string) string { return srv.URL + "/" + v + "/version_pin" }

	p := request{Method: "GET", URL: pinURL("v1"), Auth: bearer(key)}.do(t).expectJSON(t, http.StatusOK)
	require.Equal(t, "v1", p["version"], "pinned to the version of its first request")
	require.Equal(t, "v2", p["newest_version"])
	require.NotContains(t, p, "previous_version")

	// A sandbox key may use the version it is not pinned to: the upgrade is asked for on v2.
	upgrade := request{Method: "POST", URL: pinURL("v2"), Auth: bearer(key), Key: newKey(), Body: `{"version":"v2"}`}
	before := time.Now().Unix()
	up := upgrade.do(t).expectJSON(t, http.StatusOK)
	require.Equal(t, "v2", up["version"])
	require.Equal(t, "v1", up["previous_version"])
	until := int64(up["rollback_until"].(float64))
	require.GreaterOrEqual(t, until, before+int64((72*time.Hour).Seconds())-1, "72 hours by default")
	again := upgrade.do(t)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, up, again.expectJSON(t, http.StatusOK))

	got := request{Method: "GET", URL: pinURL("v2"), Auth: bearer(key)}.do(t).expectJSON(t, http.StatusOK)
	require.Equal(t, "v1", got["previous_version"])
	require.Equal(t, float64(until), got["rollback_until"])

	back := request{Method: "POST", URL: pinURL("v2"), Auth: bearer(key), Key: newKey(), Body: `{"version":"v1"}`}.do(t).
		expectJSON(t, http.StatusOK)
	require.Equal(t, "v1", back["version"], "rolled back within the window")
	require.Equal(t, "v2", back["previous_version"])
	require.NotContains(t, back, "rollback_until", "a rollback is not rolled back")
	createOrder(t, srv.URL, key, orderBody) // on v1 again

	t.Run("refusals at /version", func(t *testing.T) {
		p := request{Method: "POST", URL: pinURL("v1"), Auth: bearer(key), Key: newKey(), Body: `{"version":"v9"}`}.do(t).
			expectProblem(t, http.StatusBadRequest, "version_unknown")
		require.True(t, locates(p, "body", "/version"), "%v", p)
		// A licensee whose first request was on v2 has no upgrade to go back from.
		other := issueCredentials(t, srv)
		p = request{Method: "POST", URL: pinURL("v2"), Auth: bearer(other), Key: newKey(), Body: `{"version":"v1"}`}.do(t).
			expectProblem(t, http.StatusBadRequest, "version_downgrade")
		require.True(t, locates(p, "body", "/version"), "%v", p)
		request{Method: "POST", URL: pinURL("v2"), Auth: bearer(other), Key: newKey(), Body: `{}`}.do(t).
			expectProblem(t, http.StatusBadRequest, "field_missing")
		reader := createAPIKey(t, srv.URL, key, "version_pin:read")
		request{Method: "GET", URL: pinURL("v1"), Auth: bearer(reader["secret"].(string))}.do(t).expectJSON(t, http.StatusOK)
		expectPermissionDenied(t, request{Method: "POST", URL: pinURL("v1"), Auth: bearer(reader["secret"].(string)), Key: newKey(),
			Body: `{"version":"v2"}`}.do(t), "version_pin:write")
	})
}

// TestVersionPinUpgradeFinal: on a server whose rollback window is a second, the pin stops offering
// the rollback when the window closes, and going back is then a 409 located at /version that says
// since when the upgrade is final.
func TestVersionPinUpgradeFinal(t *testing.T) {
	srv := startOrderServer(t, "orderserver", "-version-rollback-window", "1s")
	key := srv.LiveKey // a production key: pinned strictly, no other version to try
	pinURL := func(v string) string { return srv.URL + "/" + v + "/version_pin" }
	request{Method: "GET", URL: pinURL("v1"), Auth: bearer(key)}.do(t).expectJSON(t, http.StatusOK)
	up := request{Method: "POST", URL: pinURL("v1"), Auth: bearer(key), Key: newKey(), Body: `{"version":"v2"}`}.do(t).
		expectJSON(t, http.StatusOK)
	require.Equal(t, "v1", up["previous_version"])
	request{Method: "GET", URL: srv.URL + "/v1/orders/ord_x", Auth: bearer(key)}.do(t).
		expectProblem(t, http.StatusForbidden, "version_not_enabled")
	eventually(t, startTimeout, func() bool {
		p := request{Method: "GET", URL: pinURL("v2"), Auth: bearer(key)}.do(t).expectJSON(t, http.StatusOK)
		return p["rollback_until"] == nil
	}, "the rollback window closes")
	p := request{Method: "POST", URL: pinURL("v2"), Auth: bearer(key), Key: newKey(), Body: `{"version":"v1"}`}.do(t).
		expectProblem(t, http.StatusConflict, "version_upgrade_final")
	require.True(t, locates(p, "body", "/version"), "%v", p)
	require.Contains(t, p["detail"], "became final at")
	require.Equal(t, "v2", request{Method: "GET", URL: pinURL("v2"), Auth: bearer(key)}.do(t).expectJSON(t, http.StatusOK)["version"])
}

// TestChangelog: GET /{version}/changelog lists every version, newest first, each with exactly the
// changes the server defines (server.Changes, which its router reshapes with), to any key; a
// production key reads it on its pinned version only.
func TestChangelog(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	key := issueCredentials(t, srv)
	restricted := createAPIKey(t, srv.URL, key, "orders:read")
	cl := request{Method: "GET", URL: srv.URL + "/v1/changelog", Auth: bearer(restricted["secret"].(string))}.do(t).
		expectJSON(t, http.StatusOK)
	require.Equal(t, "list", cl["object"])
	data := cl["data"].([]any)
	var versions []string
	changes := map[string][]any{}
	for _, v := range data {
		v := v.(map[string]any)
		require.Equal(t, "api_version", v["object"])
		versions = append(versions, v["version"].(string))
		changes[v["version"].(string)] = v["changes"].([]any)
	}
	require.Equal(t, []string{"v2", "v1"}, versions, "newest first")
	want := map[string][]any{"v1": {}, "v2": {}}
	for _, c := range server.Changes() {
		entry := map[string]any{"name": c.Name, "description": c.Description}
		if c.Object != "" {
			entry["resource"] = c.Object
		}
		want[c.Version] = append(want[c.Version], entry)
	}
	require.Equal(t, want, changes)
	v1 := data[1].(map[string]any)
	require.NotNil(t, v1["deprecated"], "v1 is scheduled for deprecation")
	require.NotNil(t, v1["sunset"])

	request{Method: "GET", URL: srv.URL + "/v2/changelog"}.do(t).expectProblem(t, http.StatusUnauthorized, "api_key_missing")
	// A production key pinned to v1 reads it there, and is told version_not_enabled on v2.
	request{Method: "GET", URL: srv.URL + "/v1/changelog", Auth: bearer(srv.LiveKey)}.do(t).expectJSON(t, http.StatusOK)
	p := request{Method: "GET", URL: srv.URL + "/v2/changelog", Auth: bearer(srv.LiveKey)}.do(t).
		expectProblem(t, http.StatusForbidden, "version_not_enabled")
	require.Equal(t, "v1", p["pinned_version"])
}
