package versioning_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/versioning"
)

// changelogBody is the changelog endpoint's body, as a client reads it; the pointers tell a member
// left out from a zero.
type changelogBody struct {
	Object string `json:"object"`
	Data   []struct {
		Object     string `json:"object"`
		Version    string `json:"version"`
		Released   *int64 `json:"released"`
		Deprecated *int64 `json:"deprecated"`
		Sunset     *int64 `json:"sunset"`
		Changes    []struct {
			Name        string  `json:"name"`
			Resource    *string `json:"resource"`
			Description string  `json:"description"`
		} `json:"changes"`
	} `json:"data"`
}

// changelogEnv serves the changelog behind the router, as a service mounts it.
func changelogEnv(t *testing.T, reg *versioning.Registry, clk *clock) http.Handler {
	t.Helper()
	rt := must(versioning.New(reg, &versioning.Options{Now: clk.Now, Licensee: headerLicensee}))
	mux := http.NewServeMux()
	mux.Handle("/{version}/changelog", rt.ChangelogHandler())
	return rt.Handler(mux)
}

func readChangelog(t *testing.T, h http.Handler, path string) changelogBody {
	t.Helper()
	w := do(t, h, request{path: path})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var body changelogBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	return body
}

// The changelog lists every released version, newest first, with the changes each introduced taken
// from the Change definitions themselves, in their order.
func TestChangelogListsTheChangeDefinitions(t *testing.T) {
	versions, changes := fixtureVersions(), fixtureChanges()
	h := changelogEnv(t, must(versioning.NewRegistry(versions, changes)), newClock(testNow))
	body := readChangelog(t, h, "/v3/changelog")

	require.Equal(t, "list", body.Object)
	byName := map[string]versioning.Version{}
	for _, v := range versions {
		byName[v.Name] = v
	}
	var names []string
	for _, d := range body.Data {
		names = append(names, d.Version)
		v := byName[d.Version]
		require.Equal(t, "api_version", d.Object)
		for _, when := range []struct {
			what string
			want time.Time
			got  *int64
		}{{"released", v.Released, d.Released}, {"deprecated", v.Deprecated, d.Deprecated}, {"sunset", v.Sunset, d.Sunset}} {
			if when.want.IsZero() {
				require.Nil(t, when.got, "%s %s is left out", d.Version, when.what)
				continue
			}
			require.NotNil(t, when.got, "%s %s", d.Version, when.what)
			require.Equal(t, when.want.Unix(), *when.got, "%s %s", d.Version, when.what)
		}
		// The definitions of this version, in the order they were written.
		var want []versioning.Change
		for _, c := range changes {
			if c.Version == d.Version {
				want = append(want, c)
			}
		}
		require.NotNil(t, d.Changes, "%s: changes is a list, empty when there are none", d.Version)
		require.Len(t, d.Changes, len(want), d.Version)
		for i, c := range want {
			got := d.Changes[i]
			require.Equal(t, c.Name, got.Name)
			require.Equal(t, c.Description, got.Description)
			if c.Object == "" {
				require.Nil(t, got.Resource, "%s: a change scoped to no object has none", c.Name)
			} else {
				require.Equal(t, c.Object, *got.Resource)
			}
		}
	}
	require.Equal(t, []string{"v3", "v2", "v1"}, names, "newest first")
}

// The wire shape, whole, for a registry of two versions.
func TestChangelogJSON(t *testing.T) {
	reg := must(versioning.NewRegistry([]versioning.Version{
		{Name: "v1", Released: v1Released, Deprecated: v1Deprecated, Sunset: v1Sunset},
		{Name: "v2"},
	}, []versioning.Change{
		{Name: "order_side_renamed", Version: "v2", Object: "order", Description: "An order's direction is called side."},
		{Name: "errors_located", Version: "v2", Description: "Every error names the input it concerns."},
	}))
	w := do(t, changelogEnv(t, reg, newClock(testNow)), request{path: "/v2/changelog"})
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"object":"list","data":[
		{"object":"api_version","version":"v2","changes":[
			{"name":"order_side_renamed","resource":"order","description":"An order's direction is called side."},
			{"name":"errors_located","description":"Every error names the input it concerns."}]},
		{"object":"api_version","version":"v1","released":1735689600,"deprecated":1767225600,"sunset":1782864000,"changes":[]}]}`,
		w.Body.String())
}

// Versions not yet released are left out; sunset ones stay, with their sunset.
func TestChangelogReleasedOnly(t *testing.T) {
	clk := newClock(v3Released.Add(-time.Second))
	h := changelogEnv(t, fixtureRegistry(t), clk)
	var names []string
	for _, d := range readChangelog(t, h, "/v2/changelog").Data {
		names = append(names, d.Version)
	}
	require.Equal(t, []string{"v2", "v1"}, names)

	clk.Set(v1Sunset)
	body := readChangelog(t, h, "/v3/changelog")
	require.Len(t, body.Data, 3)
	require.Equal(t, "v1", body.Data[2].Version)
	require.Equal(t, v1Sunset.Unix(), *body.Data[2].Sunset)
}

// The changelog is the same on every version: the router does not reshape it, though its entries
// carry "object" members that a change scoped to that object would otherwise take for resources.
func TestChangelogIsNotShaped(t *testing.T) {
	reg := must(versioning.NewRegistry([]versioning.Version{{Name: "v1"}, {Name: "v2"}}, []versioning.Change{{
		Name: "order_side_renamed", Version: "v2", Object: "order", Description: "An order's direction is called side.",
		Response: func(o map[string]any) error { o["direction"] = o["side"]; delete(o, "side"); return nil },
	}, {
		Name: "list_total_added", Version: "v2", Description: "Lists count their items.",
		Response: func(b map[string]any) error { delete(b, "data"); return nil },
	}}))
	h := changelogEnv(t, reg, newClock(testNow))
	newest := do(t, h, request{path: "/v2/changelog"})
	older := do(t, h, request{path: "/v1/changelog"})
	require.Equal(t, http.StatusOK, older.Code)
	require.Equal(t, newest.Body.String(), older.Body.String())
	require.Equal(t, "v1", older.Header().Get(versioning.HeaderVersion))
	require.Equal(t, newest.Header().Get("Content-Length"), older.Header().Get("Content-Length"))

	// An order on v1 is still shaped.
	mux := http.NewServeMux()
	rt := must(versioning.New(reg, &versioning.Options{Now: newClock(testNow).Now}))
	mux.Handle("/{version}/changelog", rt.ChangelogHandler())
	mux.Handle("/{version}/orders", newestOrderHandler())
	w := do(t, rt.Handler(mux), request{path: "/v1/orders"})
	require.Contains(t, w.Body.String(), `"direction":"buy"`)
}

func TestChangelogMethods(t *testing.T) {
	h := changelogEnv(t, fixtureRegistry(t), newClock(testNow))
	for _, path := range []string{"/v3/changelog", "/v1/changelog"} {
		w := do(t, h, request{method: http.MethodHead, path: path})
		require.Equal(t, http.StatusOK, w.Code, path)
		require.Equal(t, "application/json", w.Header().Get("Content-Type"), path)
		get := do(t, h, request{path: path})
		require.NotEmpty(t, get.Header().Get("Content-Length"), path)
		require.Equal(t, get.Header().Get("Content-Length"), w.Header().Get("Content-Length"), "%s: HEAD announces GET's length", path)
	}

	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		w := do(t, h, request{method: m, path: "/v3/changelog", body: `{}`})
		problem(t, w, http.StatusMethodNotAllowed, "method_not_allowed")
		require.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
	}
}
