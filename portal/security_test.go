package portal_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/portal"
)

// strictCSP is the portal's Content-Security-Policy without Options.FrameAncestors.
const strictCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// requireSecurityHeaders checks the headers every answer of the portal carries.
func requireSecurityHeaders(t *testing.T, what string, p *page, csp string, frameDeny bool) {
	t.Helper()
	require.Equal(t, csp, p.Header.Get("Content-Security-Policy"), what)
	if frameDeny {
		require.Equal(t, "DENY", p.Header.Get("X-Frame-Options"), what)
	} else {
		require.Empty(t, p.Header.Values("X-Frame-Options"), what)
	}
	require.Equal(t, "nosniff", p.Header.Get("X-Content-Type-Options"), what)
	require.Equal(t, "no-referrer", p.Header.Get("Referrer-Policy"), what)
	require.Equal(t, "same-origin", p.Header.Get("Cross-Origin-Opener-Policy"), what)
	require.Equal(t, "max-age=31536000", p.Header.Get("Strict-Transport-Security"), what)
	if !strings.HasPrefix(p.Header.Get("Content-Type"), "text/css") && !strings.HasPrefix(p.Header.Get("Content-Type"), "text/javascript") {
		require.Equal(t, "no-store", p.Header.Get("Cache-Control"), what)
	}
}

// everyPage visits every kind of page of a signed-in sandbox visitor with one endpoint and one
// delivered event, and returns them by name; forms are sent too.
func everyPage(t *testing.T, h *harness) map[string]*page {
	t.Helper()
	p := sandboxKey(licA)
	ep := h.register(p, map[string]any{"description": "pages"})
	h.publish(ep.ID, "order.created", map[string]any{"id": "ord_1"})
	h.deliver()
	anon := h.browser()
	link := h.mint(p)
	pages := map[string]*page{
		"login":           anon.get(link),
		"bad link":        anon.get(prefix + "/login?token=x"),
		"signed out 401":  anon.get(prefix + "/endpoints"),
		"unknown path":    anon.get(prefix + "/nope"),
		"cross-site post": anon.do(http.MethodPost, prefix+"/logout", url.Values{}, "Sec-Fetch-Site", "cross-site"),
	}
	b := h.browser()
	pages["login post"] = b.post(prefix+"/login", url.Values{"token": {tokenOf(t, link)}})
	for name, path := range map[string]string{
		"root":        prefix + "/",
		"endpoints":   prefix + "/endpoints",
		"endpoint":    endpointPath(ep.ID),
		"deliveries":  endpointPath(ep.ID, "/deliveries"),
		"event":       endpointPath(ep.ID, "/events/1"),
		"no event":    endpointPath(ep.ID, "/events/9"),
		"recover":     endpointPath(ep.ID, "/recover"),
		"delete":      endpointPath(ep.ID, "/delete"),
		"event types": prefix + "/event_types",
		"404":         endpointPath("we_nope"),
	} {
		pages[name] = b.get(path)
	}
	shown := pages["endpoint"]
	pages["update"] = b.post(endpointPath(ep.ID), url.Values{"idempotency_key": {shown.formKey(endpointPath(ep.ID))},
		"url": {ep.URL}, "event": {"*"}, "description": {"pages 2"}})
	pages["refused create"] = b.post(prefix+"/endpoints", url.Values{"url": {"ftp://x.example.com"}, "event": {"*"}})
	pages["roll"] = b.post(endpointPath(ep.ID, "/roll"), url.Values{"idempotency_key": {shown.formKey(endpointPath(ep.ID, "/roll"))}})
	pages["logout"] = b.post(prefix+"/logout", nil)
	for name, p := range pages {
		require.NotEqual(t, http.StatusInternalServerError, p.Status, "%s: %s", name, p.Body)
	}
	return pages
}

func TestSecurityHeaders(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		h := newHarness(t, nil)
		for name, p := range everyPage(t, h) {
			requireSecurityHeaders(t, name, p, strictCSP, true)
		}
	})
	t.Run("frame ancestors", func(t *testing.T) {
		h := newHarness(t, &options{frameAncestors: []string{"https://dashboard.example.com", "http://localhost:3000"}})
		csp := strings.TrimSuffix(strictCSP, "'none'") + "https://dashboard.example.com http://localhost:3000"
		for name, p := range everyPage(t, h) {
			requireSecurityHeaders(t, name, p, csp, false)
		}
	})
}

func TestNewRefusesBadOptions(t *testing.T) {
	api := http.NotFoundHandler()
	good := portal.Options{API: api, BaseURL: baseURL}
	_, err := portal.New(&good)
	require.NoError(t, err)
	_, err = portal.New(nil)
	require.Error(t, err)
	for _, tc := range []struct {
		name string
		edit func(*portal.Options)
	}{
		{"no API", func(o *portal.Options) { o.API = nil }},
		{"no BaseURL", func(o *portal.Options) { o.BaseURL = "" }},
		{"relative BaseURL", func(o *portal.Options) { o.BaseURL = "/portal" }},
		{"BaseURL without scheme", func(o *portal.Options) { o.BaseURL = "portal.example.com/portal" }},
		{"ftp BaseURL", func(o *portal.Options) { o.BaseURL = "ftp://portal.example.com/portal" }},
		{"BaseURL with a query", func(o *portal.Options) { o.BaseURL = "https://portal.example.com/portal?x=1" }},
		{"BaseURL with a fragment", func(o *portal.Options) { o.BaseURL = "https://portal.example.com/portal#x" }},
		{"BaseURL with a user", func(o *portal.Options) { o.BaseURL = "https://u:p@portal.example.com/portal" }},
		{"BaseURL with a wildcard", func(o *portal.Options) { o.BaseURL = "https://portal.example.com/{x}" }},
		{"BaseURL with a space", func(o *portal.Options) { o.BaseURL = "https://portal.example.com/web portal" }},
		{"BaseURL with an escaped space", func(o *portal.Options) { o.BaseURL = "https://portal.example.com/web%20portal" }},
		{"BaseURL with an empty segment", func(o *portal.Options) { o.BaseURL = "https://portal.example.com//portal" }},
		{"BaseURL with dot segments", func(o *portal.Options) { o.BaseURL = "https://portal.example.com/a/../portal" }},
		{"long LinkTTL", func(o *portal.Options) { o.LinkTTL = portal.MaxTTL + time.Second }},
		{"negative SessionTTL", func(o *portal.Options) { o.SessionTTL = -time.Second }},
		{"frame ancestor with a path", func(o *portal.Options) { o.FrameAncestors = []string{"https://dashboard.example.com/app"} }},
		{"frame ancestor with a semicolon", func(o *portal.Options) {
			o.FrameAncestors = []string{"https://dashboard.example.com; script-src *"}
		}},
		{"frame ancestor with a semicolon, no space", func(o *portal.Options) {
			o.FrameAncestors = []string{"https://dashboard.example.com;script-src"}
		}},
		{"frame ancestor not a URL", func(o *portal.Options) { o.FrameAncestors = []string{"dashboard.example.com"} }},
		{"frame ancestor keyword", func(o *portal.Options) { o.FrameAncestors = []string{"'self'"} }},
		{"frame ancestor wildcard", func(o *portal.Options) { o.FrameAncestors = []string{"*"} }},
		{"frame ancestor javascript", func(o *portal.Options) { o.FrameAncestors = []string{"javascript:alert(1)"} }},
		{"two frame ancestors in one", func(o *portal.Options) {
			o.FrameAncestors = []string{"https://a.example.com https://b.example.com"}
		}},
		{"frame ancestor with a query", func(o *portal.Options) { o.FrameAncestors = []string{"https://a.example.com?x"} }},
		{"empty frame ancestor", func(o *portal.Options) { o.FrameAncestors = []string{""} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.edit(&o)
			require.NotPanics(t, func() {
				p, err := portal.New(&o)
				require.Error(t, err)
				require.Nil(t, p)
				require.True(t, strings.HasPrefix(err.Error(), "portal: "), err.Error())
			})
		})
	}
	for _, base := range []string{"https://portal.example.com", "https://portal.example.com/", "http://localhost:8080/a/b-c_d.e~f/",
		"https://[::1]:8443/portal"} {
		o := good
		o.BaseURL = base
		_, err := portal.New(&o)
		require.NoError(t, err, base)
	}
}

func TestCrossOriginRefused(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	ep := h.register(p, map[string]any{"description": "kept"})
	b := h.login(p)
	shown := b.get(prefix + "/endpoints")
	key := shown.formKey(prefix + "/endpoints")
	create := url.Values{"idempotency_key": {key}, "url": {h.consumer.URL + "/new"}, "event": {"*"}}
	for _, tc := range []struct {
		name   string
		header []string
	}{
		{"Sec-Fetch-Site cross-site", []string{"Sec-Fetch-Site", "cross-site"}},
		{"Sec-Fetch-Site same-site", []string{"Sec-Fetch-Site", "same-site"}},
		{"foreign Origin", []string{"Sec-Fetch-Site", "", "Origin", "https://evil.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, target := range []struct {
				path string
				form url.Values
			}{
				{prefix + "/endpoints", create},
				{endpointPath(ep.ID, "/delete"), url.Values{}},
				{endpointPath(ep.ID, "/status"), url.Values{"status": {"disabled"}}},
				{prefix + "/logout", url.Values{}},
			} {
				got := b.do(http.MethodPost, target.path, target.form, tc.header...)
				require.Equal(t, http.StatusForbidden, got.Status, target.path)
				require.Contains(t, got.Body, "This form was sent from another site")
			}
			// Nothing was done: one endpoint, enabled, and the session is alive.
			eps := h.list(p)
			require.Len(t, eps, 1)
			require.Equal(t, "enabled", eps[0].Status)
			require.Equal(t, http.StatusOK, b.get(prefix+"/endpoints").Status)
		})
	}
	t.Run("a cross-site login spends no link", func(t *testing.T) {
		link := h.mint(p)
		other := h.browser()
		got := other.do(http.MethodPost, prefix+"/login", url.Values{"token": {tokenOf(t, link)}}, "Sec-Fetch-Site", "cross-site")
		require.Equal(t, http.StatusForbidden, got.Status)
		require.Nil(t, other.session())
		other.open(link)
		require.NotNil(t, other.session())
	})
	t.Run("the same form from the portal works", func(t *testing.T) {
		got := b.post(prefix+"/endpoints", create)
		require.Equal(t, http.StatusCreated, got.Status, got.Body)
		require.Len(t, h.list(p), 2)
	})
}

func TestAssets(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	shown := b.get(prefix + "/endpoints") // any page links the assets
	css := regexp.MustCompile(`<link rel="stylesheet" href="([^"]+)">`).FindStringSubmatch(shown.Body)
	js := regexp.MustCompile(`<script src="([^"]+)" defer></script>`).FindStringSubmatch(shown.Body)
	require.NotNil(t, css)
	require.NotNil(t, js)
	for _, tc := range []struct {
		href, ctype, content string
	}{
		{css[1], "text/css; charset=utf-8", "color-scheme"},
		{js[1], "text/javascript; charset=utf-8", "use strict"},
	} {
		u, err := url.Parse(tc.href)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(u.Path, prefix+"/assets/"), tc.href)
		v := u.Query().Get("v")
		require.Regexp(t, `^[0-9a-f]{12}$`, v)
		got := b.get(tc.href)
		require.Equal(t, http.StatusOK, got.Status)
		require.Equal(t, tc.ctype, got.Header.Get("Content-Type"))
		require.Equal(t, "public, max-age=31536000, immutable", got.Header.Get("Cache-Control"))
		require.Contains(t, got.Body, tc.content)
		requireSecurityHeaders(t, tc.href, got, strictCSP, true)
		for _, other := range []string{u.Path, u.Path + "?v=000000000000", u.Path + "?v=" + v + "x"} {
			got := b.get(other)
			require.Equal(t, http.StatusOK, got.Status, other)
			require.Equal(t, tc.ctype, got.Header.Get("Content-Type"), other)
			require.Equal(t, "no-store", got.Header.Get("Cache-Control"), "%s: another version is not this one", other)
		}
	}
	for _, missing := range []string{prefix + "/assets/nope.css", prefix + "/assets/", prefix + "/assets/%2e%2e%2ftemplates%2flayout.html",
		prefix + "/assets/../templates/layout.html"} {
		got := b.follow(b.get(missing)) // ServeMux redirects a path with dot segments to its clean form
		require.Equal(t, http.StatusNotFound, got.Status, missing)
		require.NotContains(t, got.Body, "{{", missing)
		require.NotContains(t, got.Header.Get("Cache-Control"), "immutable", missing)
	}
}
