package e2e

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The tests in this file drive the webhook portal of the real server over HTTP, without a browser:
// the link the API mints, its single use, the session it opens, and what the portal's pages show
// of the API. The browser tests (portal_browser_test.go) use it as a person would.

// portalLink mints a portal link with the key key and returns it.
func portalLink(t *testing.T, base, key string) string {
	t.Helper()
	r := request{Method: "POST", URL: base + "/v1/portal_sessions", Auth: bearer(key), Key: newKey()}.do(t)
	s := r.expectJSON(t, http.StatusCreated)
	require.Equal(t, "portal_session", s["object"])
	require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
	link := s["url"].(string)
	require.True(t, strings.HasPrefix(link, base+"/portal/login?token="), link)
	return link
}

// portalBrowser is an HTTP client with a cookie jar that sends forms as the portal's pages do (from
// the portal's own origin) and does not follow redirects.
type portalBrowser struct {
	t      *testing.T
	origin string
	c      *http.Client
}

func newPortalBrowser(t *testing.T, origin string) *portalBrowser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &portalBrowser{t: t, origin: origin, c: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *portalBrowser) get(u string) (int, string) {
	b.t.Helper()
	resp, err := b.c.Get(u)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp.StatusCode, string(body)
}

func (b *portalBrowser) post(u string, form url.Values) (int, http.Header, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.origin)
	resp, err := b.c.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp.StatusCode, resp.Header, string(body)
}

// login opens link and presses its button, and checks the session started.
func (b *portalBrowser) login(link string) {
	b.t.Helper()
	status, page := b.get(link)
	require.Equal(b.t, http.StatusOK, status, page)
	require.Contains(b.t, page, "Open the portal")
	u, err := url.Parse(link)
	require.NoError(b.t, err)
	status, h, page := b.post(b.origin+"/portal/login", url.Values{"token": {u.Query().Get("token")}})
	require.Equal(b.t, http.StatusSeeOther, status, page)
	require.Equal(b.t, "/portal/endpoints", h.Get("Location"))
	c := h.Get("Set-Cookie")
	require.Contains(b.t, c, "HttpOnly")
	require.Contains(b.t, c, "SameSite=Strict")
}

func TestPortalSessions(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	sk := srv.SandboxKey

	// An endpoint of the sandbox licensee, which its portal shows, and one of another licensee, which
	// it must not.
	mine := request{Method: "POST", URL: srv.URL + "/v1/webhook_endpoints", Auth: bearer(sk), Key: newKey(),
		Body: `{"url":"http://127.0.0.1:9/mine","description":"Mine <b>bold</b>"}`}.do(t).expectJSON(t, http.StatusCreated)
	other := issueCredentials(t, srv)
	theirs := request{Method: "POST", URL: srv.URL + "/v1/webhook_endpoints", Auth: bearer(other), Key: newKey(),
		Body: `{"url":"http://127.0.0.1:9/theirs","description":"Theirs"}`}.do(t).expectJSON(t, http.StatusCreated)

	link := portalLink(t, srv.URL, sk)
	b := newPortalBrowser(t, srv.URL)
	b.login(link)
	status, page := b.get(srv.URL + "/portal/endpoints")
	require.Equal(t, http.StatusOK, status, page)
	require.Contains(t, page, "Mine &lt;b&gt;bold&lt;/b&gt;", "the description, escaped")
	require.NotContains(t, page, "Theirs")
	require.Contains(t, page, `<span class="env env-sandbox">Sandbox</span>`)

	t.Run("a link works once", func(t *testing.T) {
		u, err := url.Parse(link)
		require.NoError(t, err)
		status, _, page := newPortalBrowser(t, srv.URL).post(srv.URL+"/portal/login", url.Values{"token": {u.Query().Get("token")}})
		require.Equal(t, http.StatusGone, status, page)
		require.Contains(t, page, "This link has expired or was used")
	})
	t.Run("another licensee's endpoint is not found", func(t *testing.T) {
		status, page := b.get(srv.URL + "/portal/endpoints/" + theirs["id"].(string))
		require.Equal(t, http.StatusNotFound, status, page)
		require.NotContains(t, page, "theirs")
		status, page = b.get(srv.URL + "/portal/endpoints/" + mine["id"].(string))
		require.Equal(t, http.StatusOK, status, page)
	})
	t.Run("the portal's actions are the licensee's requests", func(t *testing.T) {
		status, page := b.get(srv.URL + "/portal/endpoints/" + mine["id"].(string))
		require.Equal(t, http.StatusOK, status)
		key := hiddenValue(t, page, "idempotency_key")
		form := url.Values{"idempotency_key": {key}, "status": {"disabled"}}
		status, h, page := b.post(srv.URL+"/portal/endpoints/"+mine["id"].(string)+"/status", form)
		require.Equal(t, http.StatusSeeOther, status, page)
		require.Contains(t, h.Get("Location"), "done=disabled")
		ep := request{Method: "GET", URL: srv.URL + "/v1/webhook_endpoints/" + mine["id"].(string), Auth: bearer(sk)}.do(t).
			expectJSON(t, http.StatusOK)
		require.Equal(t, "disabled", ep["status"])
		// In the request log, under the key that minted the link, with the form's key.
		eventually(t, deliveryTimeout, func() bool {
			r := request{Method: "GET", URL: srv.URL + "/v1/requests?route=" + url.QueryEscape("PATCH /v1/webhook_endpoints/{id}"),
				Auth: bearer(sk)}.do(t)
			return r.Status == http.StatusOK && strings.Contains(string(r.Body), key)
		}, "the portal's PATCH is in the licensee's request log")
	})
	t.Run("a cross-origin form is refused", func(t *testing.T) {
		evil := &portalBrowser{t: t, origin: "https://evil.example", c: b.c}
		status, _, page := evil.post(srv.URL+"/portal/endpoints/"+mine["id"].(string)+"/delete", url.Values{})
		require.Equal(t, http.StatusForbidden, status, page)
		request{Method: "GET", URL: srv.URL + "/v1/webhook_endpoints/" + mine["id"].(string), Auth: bearer(sk)}.do(t).
			expectJSON(t, http.StatusOK)
	})
	t.Run("a replayed mint shows no link", func(t *testing.T) {
		key := newKey()
		rq := request{Method: "POST", URL: srv.URL + "/v1/portal_sessions", Auth: bearer(sk), Key: key, Body: `{}`}
		rq.do(t).expectJSON(t, http.StatusCreated)
		r := rq.do(t)
		require.Equal(t, http.StatusCreated, r.Status)
		require.Equal(t, "true", r.Header.Get("Idempotent-Replayed"))
		require.Equal(t, "true", r.Header.Get("Idempotent-Body-Omitted"))
		require.Empty(t, r.Body)
	})
	t.Run("a body other than {} is refused where it is wrong", func(t *testing.T) {
		p := request{Method: "POST", URL: srv.URL + "/v1/portal_sessions", Auth: bearer(sk), Key: newKey(), Body: `{"licensee":"lic_x"}`}.
			do(t).expectProblem(t, http.StatusBadRequest, "unknown_field")
		require.True(t, locates(p, "body", "/licensee"), "%v", p)
	})
	t.Run("a production link opens production, without sandbox tools", func(t *testing.T) {
		lb := newPortalBrowser(t, srv.URL)
		lb.login(portalLink(t, srv.URL, srv.LiveKey))
		status, page := lb.get(srv.URL + "/portal/endpoints")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, page, `<span class="env env-live">Production</span>`)
		require.NotContains(t, page, "Mine")
	})
	t.Run("a restricted key's portal shows no edit forms", func(t *testing.T) {
		ro := createAPIKey(t, srv.URL, sk, "webhook_endpoints:read")["secret"].(string)
		rb := newPortalBrowser(t, srv.URL)
		rb.login(portalLink(t, srv.URL, ro))
		status, page := rb.get(srv.URL + "/portal/endpoints/" + mine["id"].(string))
		require.Equal(t, http.StatusOK, status, page)
		require.NotContains(t, page, "Save changes")
		require.NotContains(t, page, "Roll secret")
		// And the API refuses what the page does not offer.
		status, _, page = rb.post(srv.URL+"/portal/endpoints/"+mine["id"].(string)+"/delete", url.Values{})
		require.Equal(t, http.StatusForbidden, status, page)
		require.Contains(t, page, "webhook_endpoints:write")
	})
	t.Run("signing out ends the session", func(t *testing.T) {
		status, _, _ := b.post(srv.URL+"/portal/logout", url.Values{})
		require.Equal(t, http.StatusOK, status)
		status, page := b.get(srv.URL + "/portal/endpoints")
		require.Equal(t, http.StatusUnauthorized, status, page)
	})
}

// hiddenValue returns the value of the first hidden input named name in page.
func hiddenValue(t *testing.T, page, name string) string {
	t.Helper()
	marker := `name="` + name + `" value="`
	i := strings.Index(page, marker)
	require.GreaterOrEqual(t, i, 0, "no hidden %s in the page", name)
	rest := page[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}
