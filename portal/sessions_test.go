package portal_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/portal"
)

// cookiesOf returns the cookies an answer sets.
func cookiesOf(p *page) []*http.Cookie { return (&http.Response{Header: p.Header}).Cookies() }

// tokenOf returns a link's token.
func tokenOf(t *testing.T, link string) string {
	u, err := url.Parse(link)
	require.NoError(t, err)
	return u.Query().Get("token")
}

func TestSessionsHandler(t *testing.T) {
	h := newHarness(t, nil)
	handler := h.portal.SessionsHandler(h.problems)
	post := func(p *apikey.Principal, body string, edit ...func(*http.Request)) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(http.MethodPost, "https://api.example.com/v1/portal_sessions", strings.NewReader(body))
		if body == "" {
			r.Body, r.ContentLength = http.NoBody, 0
		}
		if p != nil {
			r = r.WithContext(apikey.NewContext(r.Context(), *p))
		}
		r.Header.Set("Content-Type", "application/json")
		for _, e := range edit {
			e(r)
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		return w
	}
	// chunked sends the body as a client that does not say its length does: an empty one too.
	chunked := func(r *http.Request) {
		r.Body = io.NopCloser(r.Body)
		r.ContentLength, r.TransferEncoding = -1, []string{"chunked"}
	}
	sbx, live := sandboxKey(licA), liveKey(licA)
	for _, tc := range []struct {
		name string
		p    apikey.Principal
		body string
		env  string
		edit []func(*http.Request)
	}{
		{"empty body", sbx, "", "sandbox", nil},
		{"empty object", sbx, "{}", "sandbox", nil},
		{"empty object, spaced", sbx, " {\n} ", "sandbox", nil},
		{"blank body", sbx, " \r\n", "sandbox", nil},
		{"empty body, chunked", sbx, "", "sandbox", []func(*http.Request){chunked}},
		{"empty object, chunked", sbx, "{}", "sandbox", []func(*http.Request){chunked}},
		{"empty body, no media type", sbx, "", "sandbox", []func(*http.Request){func(r *http.Request) { r.Header.Del("Content-Type") }}},
		{"live key", live, "", "live", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := post(&tc.p, tc.body, tc.edit...)
			require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
			require.Equal(t, "application/json", w.Header().Get("Content-Type"))
			require.Equal(t, "no-store", w.Header().Get("Cache-Control"), "the link is a credential")
			var got map[string]any
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
			require.Len(t, got, 4, "%v", got)
			require.Equal(t, "portal_session", got["object"])
			require.Equal(t, tc.env, got["environment"])
			require.EqualValues(t, t0.Add(portal.DefaultLinkTTL).Unix(), got["expires_at"])
			link := got["url"].(string)
			require.True(t, strings.HasPrefix(link, baseURL+"/login?token="), link)
			require.Len(t, tokenOf(t, link), 43, "256 bits, base64url")
			// The link opens a session of that principal.
			b := h.browser()
			shown := b.get(link)
			require.Equal(t, http.StatusOK, shown.Status)
			require.Contains(t, shown.Body, map[string]string{"sandbox": "Sandbox", "live": "Production"}[tc.env])
		})
	}
	t.Run("links differ", func(t *testing.T) {
		a, b := post(&sbx, "").Body.String(), post(&sbx, "").Body.String()
		require.NotEqual(t, a, b)
	})
	t.Run("unknown member", func(t *testing.T) {
		w := post(&sbx, `{"x":1}`)
		require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
		require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
		var pr struct {
			Errors []struct {
				Location, Pointer string
			} `json:"errors"`
		}
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &pr))
		require.Len(t, pr.Errors, 1)
		require.Equal(t, "body", pr.Errors[0].Location)
		require.Equal(t, "/x", pr.Errors[0].Pointer)
	})
	for _, tc := range []struct {
		name, body string
		status     int
		edit       []func(*http.Request)
	}{
		{"not an object", "[]", http.StatusBadRequest, nil},
		{"not JSON", "token please", http.StatusBadRequest, nil},
		{"chunked member", `{"x":1}`, http.StatusBadRequest, []func(*http.Request){chunked}},
		{"another media type", "{}", http.StatusUnsupportedMediaType, []func(*http.Request){func(r *http.Request) {
			r.Header.Set("Content-Type", "text/plain")
		}}},
		{"too large", "{" + strings.Repeat(" ", 4096) + "}", http.StatusRequestEntityTooLarge, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := post(&sbx, tc.body, tc.edit...)
			require.Equal(t, tc.status, w.Code, w.Body.String())
			require.NotContains(t, w.Body.String(), "token=")
		})
	}
	t.Run("no principal", func(t *testing.T) {
		w := post(nil, "")
		require.Equal(t, http.StatusInternalServerError, w.Code, "a wiring mistake, not the client's")
		require.NotContains(t, w.Body.String(), "token")
	})
	t.Run("through the API, at its version", func(t *testing.T) {
		// Minted behind the versioning router, the session calls the API under /v1: the
		// endpoints page lists what the key registered.
		ep := h.register(sbx, map[string]any{"description": "through the API"})
		b := h.login(sbx)
		before := len(h.callsTo(http.MethodGet, "/v1/webhook_endpoints"))
		p := b.get(prefix + "/endpoints")
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		require.Contains(t, p.Body, ep.ID)
		require.Greater(t, len(h.callsTo(http.MethodGet, "/v1/webhook_endpoints")), before)
	})
}

func TestLinks(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)

	t.Run("opening shows a button and spends nothing", func(t *testing.T) {
		link := h.mint(p)
		b := h.browser()
		for range 2 { // a mail scanner, then the person
			shown := b.get(link)
			require.Equal(t, http.StatusOK, shown.Status)
			require.Contains(t, shown.Body, `<form method="post" action="/portal/login">`)
			require.Contains(t, shown.Body, `<button type="submit" class="primary">Open the portal</button>`)
			require.Equal(t, tokenOf(t, link), shown.hidden("token"))
			require.Nil(t, b.session(), "showing the link starts no session")
		}
		done := b.post(prefix+"/login", url.Values{"token": {tokenOf(t, link)}})
		require.Equal(t, http.StatusSeeOther, done.Status, done.Body)
		require.Equal(t, prefix+"/endpoints", done.Location())
		require.NotNil(t, b.session())
		require.Equal(t, http.StatusOK, b.get(prefix+"/endpoints").Status)

		t.Run("pressing spends it", func(t *testing.T) {
			other := h.browser()
			again := other.post(prefix+"/login", url.Values{"token": {tokenOf(t, link)}})
			require.Equal(t, http.StatusGone, again.Status)
			require.Contains(t, again.Body, "This link has expired or was used")
			require.Nil(t, other.session())
			require.Equal(t, http.StatusGone, other.get(link).Status)
		})
	})
	t.Run("expiry", func(t *testing.T) {
		early, late := h.mint(p), h.mint(p)
		h.clock.Advance(portal.DefaultLinkTTL - time.Second)
		b := h.browser()
		require.Equal(t, http.StatusOK, b.get(early).Status, "still alive a second before")
		b.open(early)
		h.clock.Advance(time.Second)
		other := h.browser()
		shown := other.get(late)
		require.Equal(t, http.StatusGone, shown.Status)
		require.Contains(t, shown.Body, "This link has expired or was used")
		done := other.post(prefix+"/login", url.Values{"token": {tokenOf(t, late)}})
		require.Equal(t, http.StatusGone, done.Status)
		require.Nil(t, other.session())
	})
	t.Run("junk", func(t *testing.T) {
		good := tokenOf(t, h.mint(p))
		for _, tok := range []string{"", "abc", strings.Repeat("!", 43), good + "A", good[:42], strings.Repeat("A", 44),
			good[:42] + "+", "<script>alert(1)</script>"} {
			b := h.browser()
			shown := b.get(prefix + "/login?token=" + url.QueryEscape(tok))
			require.Equal(t, http.StatusNotFound, shown.Status, "%q", tok)
			require.Contains(t, shown.Body, "This link is not valid")
			require.NotContains(t, shown.Body, "<script>alert(1)")
			done := b.post(prefix+"/login", url.Values{"token": {tok}})
			require.Equal(t, http.StatusNotFound, done.Status, "%q", tok)
			require.Nil(t, b.session())
		}
		// A well-formed token nobody minted is as dead as a used one.
		b := h.browser()
		require.Equal(t, http.StatusGone, b.get(prefix+"/login?token="+strings.Repeat("A", 43)).Status)
		// The junk spent nothing.
		b.open(baseURL + "/login?token=" + good)
		require.NotNil(t, b.session())
	})
}

func TestSessionCookie(t *testing.T) {
	for _, tc := range []struct {
		base, name, path string
		secure           bool
	}{
		{"https://portal.example.com/portal", "__Host-portal_session", "/", true},
		{"http://portal.example.com/portal", "portal_session", "/portal/", false},
	} {
		t.Run(tc.base, func(t *testing.T) {
			h := newHarness(t, &options{baseURL: tc.base})
			link := h.mint(sandboxKey(licA))
			require.True(t, strings.HasPrefix(link, tc.base+"/login?token="), link)
			b := h.browser()
			b.get(link)
			done := b.post(prefix+"/login", url.Values{"token": {tokenOf(t, link)}})
			require.Equal(t, http.StatusSeeOther, done.Status, done.Body)
			cs := cookiesOf(done)
			require.Len(t, cs, 1)
			c := cs[0]
			require.Equal(t, tc.name, c.Name)
			require.Len(t, c.Value, 43)
			require.True(t, c.HttpOnly)
			require.Equal(t, http.SameSiteStrictMode, c.SameSite)
			require.Equal(t, tc.path, c.Path)
			require.Equal(t, tc.secure, c.Secure)
			require.Empty(t, c.Domain, "host-only")
			require.True(t, c.Expires.Equal(t0.Add(portal.DefaultSessionTTL)), "%v", c.Expires)
			require.Equal(t, tc.secure, done.Header.Get("Strict-Transport-Security") != "")
			require.Equal(t, http.StatusOK, b.follow(done).Status)
		})
	}
}

func TestSessionExpiry(t *testing.T) {
	h := newHarness(t, nil)
	b := h.login(sandboxKey(licA))
	// A browser whose clock is behind keeps sending the cookie: the portal decides.
	stale := h.browser()
	stale.jar.cookies[b.session().Name] = &http.Cookie{Name: b.session().Name, Value: b.session().Value}

	h.clock.Advance(portal.DefaultSessionTTL - time.Second)
	require.Equal(t, http.StatusOK, stale.get(prefix+"/endpoints").Status, "a second before the end")
	h.clock.Advance(time.Second)
	for _, p := range []*page{stale.get(prefix + "/endpoints"), stale.get(prefix + "/event_types"),
		stale.post(prefix+"/endpoints", url.Values{"url": {h.consumer.URL}})} {
		require.Equal(t, http.StatusUnauthorized, p.Status)
		require.Contains(t, p.Body, "Your session has ended")
		require.NotContains(t, p.Body, "Sign out", "nobody is signed in")
	}
	require.Empty(t, h.list(sandboxKey(licA)), "the form of an ended session did nothing")
}

func TestLogout(t *testing.T) {
	h := newHarness(t, nil)
	b := h.login(sandboxKey(licA))
	old := *b.session()
	out := b.post(prefix+"/logout", nil)
	require.Equal(t, http.StatusOK, out.Status)
	require.Contains(t, out.Body, "You are signed out")
	cs := cookiesOf(out)
	require.Len(t, cs, 1)
	require.Equal(t, old.Name, cs[0].Name)
	require.Equal(t, -1, cs[0].MaxAge, "cleared")
	require.Equal(t, "/", cs[0].Path, "the path it was set with")
	require.Nil(t, b.session())

	// The session itself is gone, not only the cookie.
	thief := h.browser()
	thief.jar.cookies[old.Name] = &http.Cookie{Name: old.Name, Value: old.Value}
	require.Equal(t, http.StatusUnauthorized, thief.get(prefix+"/endpoints").Status)

	// Signing out without a session is harmless.
	require.Equal(t, http.StatusOK, h.browser().post(prefix+"/logout", nil).Status)
}

func TestLoginReplacesSession(t *testing.T) {
	h := newHarness(t, nil)
	epB := h.register(sandboxKey(licB), nil)
	b := h.login(sandboxKey(licA))
	first := *b.session()
	// The same browser opens a link of another licensee's: it now sees B's endpoints, and A's
	// session is over.
	p := b.open(h.mint(sandboxKey(licB)))
	require.Equal(t, http.StatusOK, p.Status)
	require.Contains(t, p.Body, epB.ID)
	second := *b.session()
	require.NotEqual(t, first.Value, second.Value)

	other := h.browser()
	other.jar.cookies[first.Name] = &http.Cookie{Name: first.Name, Value: first.Value}
	require.Equal(t, http.StatusUnauthorized, other.get(prefix+"/endpoints").Status, "the replaced session was deleted")
	require.Equal(t, http.StatusOK, b.get(prefix+"/endpoints").Status)
}
