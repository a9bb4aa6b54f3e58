package versioning_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/versioning"
)

// The lifecycle headers at the boundary instants. The decision the package documents: once a
// deprecation date is in the registry, every response of the version carries Deprecation (RFC 9745,
// "@<unix>", a future date allowed) and Sunset (RFC 8594, an HTTP-date), from its release on, so
// clients hear of it as early as possible; the request becomes "deprecated" for telemetry at the
// deprecation instant itself; from the sunset instant the version answers 410.
func TestLifecycleBoundaries(t *testing.T) {
	depV1 := "@" + strconv.FormatInt(v1Deprecated.Unix(), 10)
	sunV1 := "Wed, 01 Jul 2026 00:00:00 GMT"
	depV2 := "@" + strconv.FormatInt(v2Deprecated.Unix(), 10)
	sunV2 := "Tue, 01 Sep 2026 00:00:00 GMT"
	cases := []struct {
		name          string
		path          string
		at            time.Time
		status        int
		deprecation   string
		sunset        string
		links         []string
		deprecatedNow bool
	}{
		{"v1 before release", "/v1/orders/ord_1", v1Released.Add(-time.Nanosecond), 404, "", "", nil, false},
		// v2 is not released yet: no successor-version link that would answer 404.
		{"v1 at release: deprecation already announced", "/v1/orders/ord_1", v1Released, 200, depV1, sunV1,
			[]string{`<` + upgradeGuide + `>; rel="deprecation"; type="text/html"`}, false},
		{"v1 once v2 is out", "/v1/orders/ord_1", v2Released, 200, depV1, sunV1,
			[]string{`</v2/orders/ord_1>; rel="successor-version"`, `<` + upgradeGuide + `>; rel="deprecation"; type="text/html"`}, false},
		{"v1 just before deprecation", "/v1/orders/ord_1", v1Deprecated.Add(-time.Nanosecond), 200, depV1, sunV1,
			[]string{`</v2/orders/ord_1>; rel="successor-version"`, `<` + upgradeGuide + `>; rel="deprecation"; type="text/html"`}, false},
		{"v1 at deprecation", "/v1/orders/ord_1", v1Deprecated, 200, depV1, sunV1,
			[]string{`</v2/orders/ord_1>; rel="successor-version"`, `<` + upgradeGuide + `>; rel="deprecation"; type="text/html"`}, true},
		{"v1 just before sunset", "/v1/orders/ord_1", v1Sunset.Add(-time.Nanosecond), 200, depV1, sunV1,
			[]string{`</v2/orders/ord_1>; rel="successor-version"`, `<` + upgradeGuide + `>; rel="deprecation"; type="text/html"`}, true},
		{"v1 at sunset: 410 with the headers", "/v1/orders/ord_1", v1Sunset, 410, depV1, sunV1,
			[]string{`</v2/orders/ord_1>; rel="successor-version"`, `<` + upgradeGuide + `>; rel="deprecation"; type="text/html"`}, true},
		{"v2 announced ahead", "/v2/orders", testNow, 200, depV2, sunV2, []string{`</v3/orders>; rel="successor-version"`}, false},
		{"v2 at deprecation", "/v2/orders", v2Deprecated, 200, depV2, sunV2, []string{`</v3/orders>; rel="successor-version"`}, true},
		{"v2 at sunset", "/v2/orders", v2Sunset, 410, depV2, sunV2, []string{`</v3/orders>; rel="successor-version"`}, true},
		{"v3 before release", "/v3/orders", v3Released.Add(-time.Nanosecond), 404, "", "", nil, false},
		{"v3 newest: no lifecycle headers", "/v3/orders", v3Released, 200, "", "", nil, false},
		{"v3 long after", "/v3/orders", v2Sunset.AddDate(5, 0, 0), 200, "", "", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var seen []versioning.Observation
			rt := must(versioning.New(fixtureRegistry(t), &versioning.Options{
				Now: func() time.Time { return tc.at },
				Hooks: &versioning.Hooks{Decided: func(_ context.Context, o versioning.Observation) {
					seen = append(seen, o)
				}},
			}))
			var deprecated bool
			h := rt.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				d, _ := versioning.FromContext(r.Context())
				deprecated = d.Deprecated
			}))
			w := do(t, h, request{path: tc.path})
			require.Equal(t, tc.status, w.Code, w.Body.String())
			require.Equal(t, tc.deprecation, w.Header().Get("Deprecation"))
			require.Equal(t, tc.sunset, w.Header().Get("Sunset"))
			require.Equal(t, tc.links, w.Header().Values("Link"))
			require.Len(t, seen, 1)
			if tc.status == 404 {
				require.Equal(t, versioning.LifecycleUnknown, seen[0].Lifecycle)
				require.Empty(t, seen[0].Version, "an unknown version is never named")
				return
			}
			name, _, _ := versioning.ParsePath(tc.path)
			require.Equal(t, name, w.Header().Get(versioning.HeaderVersion))
			require.Equal(t, tc.deprecatedNow, seen[0].Lifecycle == versioning.LifecycleDeprecated || seen[0].Lifecycle == versioning.LifecycleSunset)
			if tc.status == 200 {
				require.Equal(t, tc.deprecatedNow, deprecated)
			}
			if tc.sunset != "" {
				at, err := http.ParseTime(tc.sunset)
				require.NoError(t, err)
				v, _ := rt.Registry().Lookup(name)
				require.True(t, at.Equal(v.Sunset), "Sunset names the instant the router acts on")
				unix, err := strconv.ParseInt(tc.deprecation[1:], 10, 64)
				require.NoError(t, err)
				require.Equal(t, v.Deprecated.Unix(), unix)
			}
		})
	}
}

func TestSunsetProblem(t *testing.T) {
	rt := must(versioning.New(fixtureRegistry(t), &versioning.Options{Now: func() time.Time { return v1Sunset }}))
	w := do(t, rt.Handler(newestOrderHandler()), request{path: "/v1/orders"})
	p := problem(t, w, http.StatusGone, versioning.CodeVersionSunset)
	requireLocatedAtVersion(t, p, versioning.CodeVersionSunset)
	require.Equal(t, "version v1 was sunset on 2026-07-01T00:00:00Z; use v2", p.Detail)
	require.Equal(t, "v2", p.Extensions[versioning.MemberSuccessorVersion])
	require.Equal(t, []any{"v2", "v3"}, p.Extensions[versioning.MemberSupportedVersions])

	// When the successor is sunset too, the problem points past it to a version that answers.
	rt = must(versioning.New(fixtureRegistry(t), &versioning.Options{Now: func() time.Time { return v2Sunset }}))
	p = problem(t, do(t, rt.Handler(newestOrderHandler()), request{path: "/v1/orders"}), http.StatusGone, versioning.CodeVersionSunset)
	require.Equal(t, "v3", p.Extensions[versioning.MemberSuccessorVersion])
	require.Equal(t, "version v1 was sunset on 2026-07-01T00:00:00Z; use v3", p.Detail)
	require.Equal(t, []any{"v3"}, p.Extensions[versioning.MemberSupportedVersions])
	require.Equal(t, `</v3/orders>; rel="successor-version"`, do(t, rt.Handler(newestOrderHandler()), request{path: "/v1/orders"}).Header().Values("Link")[0],
		"the Link names the successor that answers, as the problem does, never the sunset v2 (a 410)")
}

// The successor-version link names the nearest successor released and not sunset at the instant of
// the request, or is left out: following it never ends in a 404 or a 410.
func TestSuccessorLinkNamesOnlyAVersionThatAnswers(t *testing.T) {
	v4Released := v2Sunset.Add(30 * 24 * time.Hour)
	versions := append(fixtureVersions(), versioning.Version{Name: "v4", Released: v4Released})
	// v3 is deprecated and sunset with v2, and v4 comes a month later: a gap with no successor.
	for i := range versions {
		if versions[i].Name == "v3" {
			versions[i].Deprecated, versions[i].Sunset = v2Deprecated, v2Sunset
		}
	}
	reg, err := versioning.NewRegistry(versions, append(fixtureChanges(), versioning.Change{
		Name: "v4_marker", Version: "v4", Description: "Marks v4.",
		Response: func(map[string]any) error { return nil },
	}))
	require.NoError(t, err)
	links := func(at time.Time, path string) []string {
		rt := must(versioning.New(reg, &versioning.Options{Now: func() time.Time { return at }}))
		var out []string
		for _, l := range do(t, rt.Handler(newestOrderHandler()), request{path: path}).Header().Values("Link") {
			if strings.Contains(l, `rel="successor-version"`) {
				out = append(out, l)
			}
		}
		return out
	}
	tests := []struct {
		name, path string
		at         time.Time
		want       []string
	}{
		{"v1 before v2's sunset names v2", "/v1/orders", testNow, []string{`</v2/orders>; rel="successor-version"`}},
		{"v2 names v3 while it answers", "/v2/orders", v2Deprecated, []string{`</v3/orders>; rel="successor-version"`}},
		{"v2 at its sunset: v3 is gone and v4 not out, no link", "/v2/orders", v2Sunset, nil},
		{"v3 at its sunset, v4 not released: no link", "/v3/orders", v2Sunset.Add(time.Hour), nil},
		{"once v4 is out the sunset v2 points to it", "/v2/orders", v4Released, []string{`</v4/orders>; rel="successor-version"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, links(tt.at, tt.path))
		})
	}
}

func TestSuccessorLink(t *testing.T) {
	reg := fixtureRegistry(t)
	now := func() time.Time { return testNow }
	cases := []struct {
		name   string
		h      func(rt *versioning.Router) http.Handler
		target string
		want   string
	}{
		{"plain", func(rt *versioning.Router) http.Handler { return rt.Handler(http.NotFoundHandler()) },
			"/v1/orders/ord_1?expand=x", `</v2/orders/ord_1>; rel="successor-version"`},
		{"bare version", func(rt *versioning.Router) http.Handler { return rt.Handler(http.NotFoundHandler()) },
			"/v1", `</v2>; rel="successor-version"`},
		{"prefix stripped outside is kept", func(rt *versioning.Router) http.Handler {
			return http.StripPrefix("/api", rt.Handler(http.NotFoundHandler()))
		}, "/api/v1/orders", `</api/v2/orders>; rel="successor-version"`},
		{"escaped rest kept escaped", func(rt *versioning.Router) http.Handler { return rt.Handler(http.NotFoundHandler()) },
			"/v1/files/a%2Fb", `</v2/files/a%2Fb>; rel="successor-version"`},
		{"escaped version segment", func(rt *versioning.Router) http.Handler { return rt.Handler(http.NotFoundHandler()) },
			"/v%31/orders", `</v2/orders>; rel="successor-version"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := must(versioning.New(reg, &versioning.Options{Now: now}))
			w := do(t, tc.h(rt), request{path: tc.target})
			require.Equal(t, tc.want, w.Header().Values("Link")[0])
		})
	}
	t.Run("hook", func(t *testing.T) {
		rt := must(versioning.New(reg, &versioning.Options{Now: now, SuccessorLink: func(r *http.Request, successor string) string {
			return "https://api.example.com/" + successor + "/"
		}}))
		w := do(t, rt.Handler(http.NotFoundHandler()), request{path: "/v2/orders"})
		require.Equal(t, []string{`<https://api.example.com/v3/>; rel="successor-version"`}, w.Header().Values("Link"))
	})
	t.Run("hook may opt out", func(t *testing.T) {
		rt := must(versioning.New(reg, &versioning.Options{Now: now, SuccessorLink: func(*http.Request, string) string { return "" }}))
		w := do(t, rt.Handler(http.NotFoundHandler()), request{path: "/v2/orders"})
		require.Empty(t, w.Header().Values("Link"))
		require.NotEmpty(t, w.Header().Get("Deprecation"))
	})
	t.Run("links set outside are kept, handler may add", func(t *testing.T) {
		rt := must(versioning.New(reg, &versioning.Options{Now: now}))
		inner := rt.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Add("Link", `</docs>; rel="help"`)
			w.Header().Add(versioning.HeaderVersion, "tampered")
		}))
		outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Link", `</terms>; rel="terms-of-service"`)
			inner.ServeHTTP(w, r)
		})
		w := do(t, outer, request{path: "/v2/orders"})
		require.Equal(t, []string{`</terms>; rel="terms-of-service"`, `</v3/orders>; rel="successor-version"`, `</docs>; rel="help"`}, w.Header().Values("Link"))
		// The next request's header is not affected by what this handler did.
		w = do(t, rt.Handler(http.NotFoundHandler()), request{path: "/v2/orders"})
		require.Equal(t, []string{"v2"}, w.Header().Values(versioning.HeaderVersion))
	})
}
