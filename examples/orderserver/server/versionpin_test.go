package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/versioning"
)

// versionPin is the pin as GET and POST /{version}/version_pin answer it.
type versionPin struct {
	Object        string   `json:"object"`
	Version       string   `json:"version"`
	PinnedAt      int64    `json:"pinned_at"`
	Newest        string   `json:"newest_version"`
	Supported     []string `json:"supported_versions"`
	Previous      string   `json:"previous_version"`
	RollbackUntil int64    `json:"rollback_until"`
}

func decodePin(t *testing.T, status int, body []byte) versionPin {
	t.Helper()
	require.Equal(t, http.StatusOK, status, "%s", body)
	var p versionPin
	require.NoError(t, json.Unmarshal(body, &p))
	require.Equal(t, "version_pin", p.Object)
	return p
}

// TestVersionPinUpgradeAndRollback, on an injected clock with a production key (which, unlike a
// sandbox key, can never use a version it is not pinned to): an upgrade shows where it came from and
// until when it may go back; a rollback within the window moves the pin back once; after the window
// the upgrade is final, a 409 located at /version that says since when.
func TestVersionPinUpgradeAndRollback(t *testing.T) {
	clock := newTestClock()
	ts, live := newWebhookServer(t, WebhookOptions{}, clock)
	pin := func(version, idem, body string) (int, []byte, *apierror.Error) {
		method := "GET"
		if body != "" {
			method = "POST"
		}
		w := ts.do(method, "/"+version+"/version_pin", live, idem, body)
		if w.Code >= 400 {
			p, err := apierror.Parse(w.Result())
			require.NoError(t, err)
			return w.Code, w.Body.Bytes(), p
		}
		return w.Code, w.Body.Bytes(), nil
	}

	status, body, _ := pin("v1", "", "")
	p := decodePin(t, status, body)
	require.Equal(t, versionPin{Object: "version_pin", Version: "v1", PinnedAt: clock.Now().Unix(), Newest: "v2",
		Supported: []string{"v1", "v2"}}, p, "pinned to the version of its first request")

	clock.Advance(time.Hour)
	upgraded := clock.Now()
	status, body, _ = pin("v1", "up-1", `{"version":"v2"}`)
	p = decodePin(t, status, body)
	require.Equal(t, "v2", p.Version)
	require.Equal(t, "v1", p.Previous)
	require.Equal(t, upgraded.Add(versioning.DefaultRollbackWindow).Unix(), p.RollbackUntil, "72 hours by default")
	expectProblem(t, ts.do("GET", "/v1/orders/ord_x", live, "", ""), http.StatusForbidden, versioning.CodeVersionNotEnabled)
	status, body, _ = pin("v2", "", "")
	require.Equal(t, p, decodePin(t, status, body), "GET shows the same")

	t.Run("a rollback within the window, once", func(t *testing.T) {
		clock.Advance(71 * time.Hour)
		status, body, _ := pin("v2", "back-1", `{"version":"v1"}`)
		back := decodePin(t, status, body)
		require.Equal(t, "v1", back.Version)
		require.Equal(t, "v2", back.Previous)
		require.Zero(t, back.RollbackUntil, "a rollback is not rolled back")
		w := ts.do("GET", "/v1/orders/ord_x", live, "", "")
		expectProblem(t, w, http.StatusNotFound, CodeOrderNotFound)
	})
	t.Run("after the window the upgrade is final", func(t *testing.T) {
		status, body, _ := pin("v1", "up-2", `{"version":"v2"}`)
		again := decodePin(t, status, body)
		require.Equal(t, clock.Now().Add(versioning.DefaultRollbackWindow).Unix(), again.RollbackUntil, "a new window")
		clock.Advance(versioning.DefaultRollbackWindow)
		status, body, _ = pin("v2", "", "")
		require.Zero(t, decodePin(t, status, body).RollbackUntil, "the window has closed")
		status, body, problem := pin("v2", "back-2", `{"version":"v1"}`)
		require.Equal(t, http.StatusConflict, status, "%s", body)
		require.Equal(t, versioning.CodeVersionUpgradeFinal, problem.Code)
		require.Len(t, problem.Errors, 1)
		require.Equal(t, apierror.LocationBody, problem.Errors[0].Location)
		require.Equal(t, "/version", problem.Errors[0].Pointer)
		require.Contains(t, problem.Detail, "became final at "+clock.Now().UTC().Format(time.RFC3339))
		status, body, _ = pin("v2", "", "")
		require.Equal(t, "v2", decodePin(t, status, body).Version, "the refusal moved nothing")
	})
	t.Run("other refusals are 400 at /version", func(t *testing.T) {
		status, body, problem := pin("v2", ts.nextKey(), `{"version":"v9"}`)
		require.Equal(t, http.StatusBadRequest, status, "%s", body)
		require.Equal(t, versioning.CodeVersionUnknown, problem.Code)
		require.Equal(t, "/version", problem.Errors[0].Pointer)
		// A licensee that started on v2 has nothing to go back to: asking for v1 is a downgrade.
		creds, err := ts.IssueCredentials(context.Background(), apikey.Live)
		require.NoError(t, err)
		w := ts.do("POST", "/v2/version_pin", creds.APIKey, ts.nextKey(), `{"version":"v1"}`)
		p := expectProblem(t, w, http.StatusBadRequest, versioning.CodeVersionDowngrade)
		require.Equal(t, "/version", p.Errors[0].Pointer)
		expectProblem(t, ts.do("POST", "/v2/version_pin", creds.APIKey, "", `{"version":"v2"}`), http.StatusBadRequest,
			"idempotency_key_missing")
	})
	t.Run("each direction needs its permission", func(t *testing.T) {
		create := func(perm string) string { // on v2, the licensee's pin now
			w := ts.do("POST", "/v2/api_keys", live, ts.nextKey(), `{"permissions":["`+perm+`"]}`)
			require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
			return decodeAPIKey(t, w).Secret
		}
		reader := create("version_pin:read")
		w := ts.do("GET", "/v2/version_pin", reader, "", "")
		require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
		expectDenied(t, ts.do("POST", "/v2/version_pin", reader, ts.nextKey(), `{"version":"v2"}`), "version_pin:write")
		expectDenied(t, ts.do("GET", "/v2/version_pin", create("orders:read"), "", ""), "version_pin:read")
		w = ts.do("POST", "/v2/version_pin", create("version_pin:write"), ts.nextKey(), `{"version":"v2"}`)
		require.Equal(t, "v2", decodePin(t, w.Code, w.Body.Bytes()).Version, "write includes read; the pin is unchanged")
	})
}

// TestVersionPinRollbackWindow: Config.RollbackWindow sets the window; negative makes every
// upgrade final at once.
func TestVersionPinRollbackWindow(t *testing.T) {
	for _, tc := range []struct {
		window time.Duration
		until  func(now time.Time) int64
	}{
		{time.Hour, func(now time.Time) int64 { return now.Add(time.Hour).Unix() }},
		{-1, func(time.Time) int64 { return 0 }},
	} {
		clock := newTestClock()
		s, err := New(Config{Now: clock.Now, RollbackWindow: tc.window})
		require.NoError(t, err)
		c, err := s.IssueCredentials(context.Background(), apikey.Live)
		require.NoError(t, err)
		ts := &testServer{Server: s, key: c.APIKey}
		w := ts.do("GET", "/v1/version_pin", ts.key, "", "")
		require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
		w = ts.do("POST", "/v1/version_pin", ts.key, "up", `{"version":"v2"}`)
		p := decodePin(t, w.Code, w.Body.Bytes())
		require.Equal(t, tc.until(clock.Now()), p.RollbackUntil, "window %v", tc.window)
		if tc.window < 0 {
			w = ts.do("POST", "/v2/version_pin", ts.key, "back", `{"version":"v1"}`)
			expectProblem(t, w, http.StatusConflict, versioning.CodeVersionUpgradeFinal)
		}
	}
}

// TestChangelog: GET /{version}/changelog lists the versions newest first, each with the changes it
// introduced, read from the registry's definitions (versions.go), the same on every version, for
// any key, restricted or not.
func TestChangelog(t *testing.T) {
	ts, _ := newWebhookServer(t, WebhookOptions{}, nil)
	restricted := ts.createKey(t, ts.key, "orders:read")
	var bodies []string
	for _, tc := range []struct{ version, key string }{{"v1", ts.key}, {"v2", ts.key}, {"v1", restricted.Secret}} {
		w := ts.do("GET", "/"+tc.version+"/changelog", tc.key, "", "")
		require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
		bodies = append(bodies, w.Body.String())
	}
	require.Equal(t, bodies[0], bodies[1], "the same body on every version")
	require.Equal(t, bodies[0], bodies[2])

	var got struct {
		Object string `json:"object"`
		Data   []struct {
			Object, Version    string
			Released           int64
			Deprecated, Sunset int64
			Changes            []struct{ Name, Resource, Description string }
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(bodies[0]), &got))
	require.Equal(t, "list", got.Object)
	reg := ts.versions.Registry()
	vs := reg.Versions()
	require.Len(t, got.Data, len(vs))
	for i, v := range got.Data {
		want := vs[len(vs)-1-i] // newest first
		require.Equal(t, "api_version", v.Object)
		require.Equal(t, want.Name, v.Version)
		for _, d := range []struct {
			want time.Time
			got  int64
		}{{want.Deprecated, v.Deprecated}, {want.Sunset, v.Sunset}} {
			if d.want.IsZero() {
				require.Zero(t, d.got, want.Name)
			} else {
				require.Equal(t, d.want.Unix(), d.got, want.Name)
			}
		}
		changes := reg.Changes(want.Name)
		require.Len(t, v.Changes, len(changes), want.Name)
		for j, c := range changes {
			require.Equal(t, c.Name, v.Changes[j].Name)
			require.Equal(t, c.Object, v.Changes[j].Resource)
			require.Equal(t, c.Description, v.Changes[j].Description)
		}
	}
	require.Equal(t, orderSideRenamed.Name, got.Data[0].Changes[0].Name, "v2 introduced the rename")
	require.Empty(t, got.Data[1].Changes, "v1 is the first version")
	require.NotZero(t, got.Data[1].Sunset)

	w := ts.do("GET", "/v2/changelog", "", "", "")
	require.Equal(t, http.StatusUnauthorized, w.Code, "a key is needed, any key")
}
