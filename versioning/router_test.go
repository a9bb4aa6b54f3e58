package versioning_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/versioning"
)

// echo answers 200 with the pattern, path and version it saw, in JSON the changes do not touch.
func echo(tag string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d, ok := versioning.FromContext(r.Context())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Tag", tag)
		w.Header().Set("X-Pattern", r.Pattern)
		w.Header().Set("X-Path", r.URL.Path)
		if ok {
			w.Header().Set("X-Ctx-Version", d.Version.Name)
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}
}

func TestRouting(t *testing.T) {
	perVersion := http.NewServeMux()
	for _, p := range []string{"POST /v1/orders", "POST /v2/orders", "POST /v3/orders", "GET /v3/orders/{id}"} {
		perVersion.Handle(p, echo("per-version"))
	}
	wildcard := http.NewServeMux()
	wildcard.HandleFunc("GET /{version}/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		d, _ := versioning.FromContext(r.Context())
		require.Equal(t, r.PathValue("version"), d.Version.Name, "the mux and the router agree on the version")
		echo("wildcard")(w, r)
	})
	stripped := http.NewServeMux()
	stripped.Handle("POST /orders", echo("stripped"))
	stripped.Handle("GET /orders/{id}", echo("stripped"))
	// A router that is not ServeMux: a hand-rolled switch on the path after the version.
	custom := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, rest, _ := versioning.ParsePath(r.URL.Path)
		switch {
		case rest == "/orders":
			echo("custom-orders")(w, r)
		case strings.HasPrefix(rest, "/orders/"):
			echo("custom-order")(w, r)
		default:
			http.NotFound(w, r)
		}
	})

	clk := newClock(testNow)
	newRouter := func(strip bool) *versioning.Router {
		return must(versioning.New(fixtureRegistry(t), &versioning.Options{Now: clk.Now, StripVersion: strip}))
	}
	cases := []struct {
		name                        string
		h                           http.Handler
		method, path                string
		status                      int
		tag, pattern, path2, header string
	}{
		{"mux per-version pattern v2", newRouter(false).Handler(perVersion), "POST", "/v2/orders", 200, "per-version", "POST /v2/orders", "/v2/orders", "v2"},
		{"mux per-version pattern v3", newRouter(false).Handler(perVersion), "GET", "/v3/orders/ord_1", 200, "per-version", "GET /v3/orders/{id}", "/v3/orders/ord_1", "v3"},
		{"mux pattern missing for the version", newRouter(false).Handler(perVersion), "GET", "/v1/orders/ord_1", 404, "", "", "", "v1"},
		{"mux wildcard v1", newRouter(false).Handler(wildcard), "GET", "/v1/orders/ord_1", 200, "wildcard", "GET /{version}/orders/{id}", "/v1/orders/ord_1", "v1"},
		{"mux wildcard v3", newRouter(false).Handler(wildcard), "GET", "/v3/orders/ord_9", 200, "wildcard", "GET /{version}/orders/{id}", "/v3/orders/ord_9", "v3"},
		{"strip version", newRouter(true).Handler(stripped), "POST", "/v2/orders", 200, "stripped", "POST /orders", "/orders", "v2"},
		{"strip version, deeper", newRouter(true).Handler(stripped), "GET", "/v1/orders/ord_1", 200, "stripped", "GET /orders/{id}", "/orders/ord_1", "v1"},
		{"strip version of a bare version path", newRouter(true).Handler(stripped), "GET", "/v3", 404, "", "", "", "v3"},
		{"custom router", newRouter(false).Handler(custom), "GET", "/v2/orders/ord_1", 200, "custom-order", "", "/v2/orders/ord_1", "v2"},
		{"under StripPrefix", http.StripPrefix("/api", newRouter(false).Handler(wildcard)), "GET", "/api/v2/orders/ord_1", 200, "wildcard", "GET /{version}/orders/{id}", "/v2/orders/ord_1", "v2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, tc.h, request{method: tc.method, path: tc.path})
			require.Equal(t, tc.status, w.Code, w.Body.String())
			require.Equal(t, tc.header, w.Header().Get(versioning.HeaderVersion), "every response echoes the version")
			if tc.status != 200 {
				return
			}
			require.Equal(t, tc.tag, w.Header().Get("X-Tag"))
			require.Equal(t, tc.pattern, w.Header().Get("X-Pattern"))
			require.Equal(t, tc.path2, w.Header().Get("X-Path"))
			require.Equal(t, tc.header, w.Header().Get("X-Ctx-Version"), "the version is in the request context")
		})
	}
}

func TestRoutingMountedInMux(t *testing.T) {
	rt := must(versioning.New(fixtureRegistry(t), &versioning.Options{Now: newClock(testNow).Now}))
	outer := http.NewServeMux()
	outer.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	outer.Handle("/", rt.Handler(echo("api")))
	w := do(t, outer, request{path: "/healthz"})
	require.Equal(t, 200, w.Code)
	require.Empty(t, w.Header().Get(versioning.HeaderVersion), "unversioned routes stay outside the router")
	w = do(t, outer, request{path: "/v3/anything"})
	require.Equal(t, "api", w.Header().Get("X-Tag"))
	w = do(t, outer, request{path: "/anything"})
	p := problem(t, w, 404, versioning.CodeVersionUnknown)
	requireLocatedAtVersion(t, p, versioning.CodeVersionUnknown)
}

func TestStripVersionEscapedPath(t *testing.T) {
	rt := must(versioning.New(fixtureRegistry(t), &versioning.Options{Now: newClock(testNow).Now, StripVersion: true}))
	var path, raw, orig string
	h := rt.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, raw = r.URL.Path, r.URL.RawPath
	}))
	r := httptest.NewRequest("GET", "/v3/files/a%2Fb", nil)
	orig = r.URL.Path
	h.ServeHTTP(httptest.NewRecorder(), r)
	require.Equal(t, "/files/a/b", path)
	require.Equal(t, "/files/a%2Fb", raw, "the escaped form survives stripping")
	require.Equal(t, "/v3/files/a/b", orig)
	require.Equal(t, "/v3/files/a/b", r.URL.Path, "the caller's request is not modified")

	r = httptest.NewRequest("GET", "/v%33/files/x", nil)
	h.ServeHTTP(httptest.NewRecorder(), r)
	require.Equal(t, "/files/x", path, "an escaped version segment is the same version")
	require.Empty(t, raw)
}

func TestUnknownVersion(t *testing.T) {
	clk := newClock(testNow)
	rt := must(versioning.New(fixtureRegistry(t), &versioning.Options{Now: clk.Now}))
	called := false
	h := rt.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	cases := []struct {
		name, path, detail string
		supported          []any
		at                 func()
	}{
		{"unregistered", "/v9/orders", "version v9 is not supported; supported versions: v1, v2, v3", []any{"v1", "v2", "v3"}, nil},
		{"no version segment", "/orders", "the path must begin with a version segment such as /v3/; supported versions: v1, v2, v3", []any{"v1", "v2", "v3"}, nil},
		{"root", "/", "the path must begin with a version segment such as /v3/; supported versions: v1, v2, v3", []any{"v1", "v2", "v3"}, nil},
		{"malformed segment not echoed", "/v01<script>/x", "the path must begin with a version segment such as /v3/; supported versions: v1, v2, v3", []any{"v1", "v2", "v3"}, nil},
		{"upper case", "/V1/orders", "the path must begin with a version segment such as /v3/; supported versions: v1, v2, v3", []any{"v1", "v2", "v3"}, nil},
		{"not yet released", "/v3/orders", "version v3 is not supported; supported versions: v1, v2", []any{"v1", "v2"},
			func() { clk.Set(v3Released.Add(-1)) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk.Set(testNow)
			if tc.at != nil {
				tc.at()
			}
			called = false
			w := do(t, h, request{path: tc.path})
			p := problem(t, w, http.StatusNotFound, versioning.CodeVersionUnknown)
			requireLocatedAtVersion(t, p, versioning.CodeVersionUnknown)
			require.Equal(t, tc.detail, p.Detail)
			require.Equal(t, tc.supported, p.Extensions[versioning.MemberSupportedVersions])
			require.Empty(t, w.Header().Get(versioning.HeaderVersion), "an unknown segment is never echoed")
			require.Empty(t, w.Header().Get("Deprecation"))
			require.False(t, called, "the handler does not run")
		})
	}
}

func TestPerVersionHandler(t *testing.T) {
	vs := fixtureVersions()
	vs[1].Handler = echo("v1-legacy") // v1
	reg, err := versioning.NewRegistry(vs, fixtureChanges())
	require.NoError(t, err)
	rt := must(versioning.New(reg, &versioning.Options{Now: newClock(testNow).Now}))
	h := rt.Handler(newestOrderHandler())

	w := do(t, h, request{method: "POST", path: "/v1/orders", body: `{"direction":"buy"}`})
	require.Equal(t, "v1-legacy", w.Header().Get("X-Tag"))
	require.Equal(t, `{"ok":true}`, w.Body.String(), "a version's own handler is not shaped")
	require.Equal(t, "v1", w.Header().Get("X-Ctx-Version"))
	require.Equal(t, "v1", w.Header().Get(versioning.HeaderVersion))
	require.NotEmpty(t, w.Header().Get("Deprecation"))

	w = do(t, h, request{method: "POST", path: "/v2/orders", body: `{"side":"buy","amount":"1","currency":"EUR"}`})
	require.Equal(t, "v2", w.Header().Get("X-Seen-Version"), "the other versions go to the shared handler")

	require.Panics(t, func() { rt.Handler(nil) }, "versions without their own handler need the shared one")
	for i := range vs {
		vs[i].Handler = echo("own-" + vs[i].Name)
	}
	reg, err = versioning.NewRegistry(vs, fixtureChanges())
	require.NoError(t, err)
	h = must(versioning.New(reg, &versioning.Options{Now: newClock(testNow).Now})).Handler(nil)
	require.Equal(t, "own-v2", do(t, h, request{path: "/v2/x"}).Header().Get("X-Tag"))
}

func TestNewRefusesWhatItCannotHonour(t *testing.T) {
	_, err := versioning.New(nil, nil)
	require.EqualError(t, err, "versioning: New needs a Registry")
	_, err = versioning.New(fixtureRegistry(t), &versioning.Options{RetryAfter: -1e9})
	require.EqualError(t, err, "versioning: New: RetryAfter -1s is negative")
}

func TestDecideWithoutMiddleware(t *testing.T) {
	rt := must(versioning.New(fixtureRegistry(t), &versioning.Options{Now: newClock(testNow).Now, Licensee: headerLicensee}))
	r := httptest.NewRequest("GET", "/v3/orders", nil)
	r.Header.Set(licenseeHeader, "lic_decide")
	d, err := rt.Decide(r)
	require.NoError(t, err)
	require.Equal(t, "v3", d.Version.Name)
	require.Equal(t, "lic_decide", d.Licensee)
	require.Equal(t, "v3", d.Pinned)
	require.True(t, d.PinChanged, "the first request pins")
	require.False(t, d.Deprecated)

	r = httptest.NewRequest("GET", "/v2/orders", nil)
	r.Header.Set(licenseeHeader, "lic_decide")
	d, err = rt.Decide(r)
	require.ErrorIs(t, err, versioning.ErrNotEnabled)
	require.Equal(t, "v2", d.Version.Name, "the version is known even when refused")

	_, err = rt.Decide(httptest.NewRequest("GET", "/v7/orders", nil))
	require.ErrorIs(t, err, versioning.ErrUnknownVersion)
	require.Same(t, rt.Registry(), rt.Registry())
	require.Equal(t, "v3", rt.Registry().Newest().Name)
}

func TestContextHelpers(t *testing.T) {
	ctx := versioning.NewContext(t.Context(), versioning.Decision{Version: versioning.Version{Name: "v2"}, Licensee: "lic_1", Override: true})
	d, ok := versioning.FromContext(ctx)
	require.True(t, ok)
	require.Equal(t, "v2", d.Version.Name)
	require.True(t, d.Override)
	require.Equal(t, "lic_1", d.Licensee)
	_, ok = versioning.FromContext(t.Context())
	require.False(t, ok)
}
