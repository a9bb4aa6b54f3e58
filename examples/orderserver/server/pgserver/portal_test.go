package pgserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/pgstore"
)

// TestPortalAcrossReplicas: Config keeps the portal's links and sessions in PostgreSQL (the table
// Migrate creates), so that a link minted on one replica opens on another, once, and the session it
// starts is known to every replica.
func TestPortalAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	pool, a, b, creds := twoReplicas(t, func(cfg server.Config) { require.IsType(t, &pgstore.PortalStore{}, cfg.Portal) })

	r := httptest.NewRequest(http.MethodPost, "/v1/portal_sessions", nil)
	r.Header.Set("Authorization", "Bearer "+creds.APIKey)
	r.Header.Set("Idempotency-Key", "portal-link-1")
	w := httptest.NewRecorder()
	a.Handler().ServeHTTP(w, r)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	var minted struct {
		URL string `json:"url"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &minted))
	link, err := url.Parse(minted.URL)
	require.NoError(t, err)
	token := link.Query().Get("token")
	require.NotEmpty(t, token)

	page := func(s *server.Server, method, target, cookie string, form url.Values) *httptest.ResponseRecorder {
		var r *http.Request
		if form != nil {
			r = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			r = httptest.NewRequest(method, target, nil)
		}
		if cookie != "" {
			r.Header.Set("Cookie", cookie)
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w
	}
	// B shows the link A minted, and opening it there starts a session.
	require.Equal(t, http.StatusOK, page(b, http.MethodGet, link.RequestURI(), "", nil).Code)
	opened := page(b, http.MethodPost, server.PortalPath+"/login", "", url.Values{"token": {token}})
	require.Equal(t, http.StatusSeeOther, opened.Code, opened.Body.String())
	cookies := opened.Result().Cookies()
	require.Len(t, cookies, 1)
	session := cookies[0].Name + "=" + cookies[0].Value

	// The link is spent on every replica.
	require.Equal(t, http.StatusGone, page(a, http.MethodPost, server.PortalPath+"/login", "", url.Values{"token": {token}}).Code)
	require.Equal(t, http.StatusGone, page(b, http.MethodGet, link.RequestURI(), "", nil).Code)
	// A knows the session B started.
	endpoints := page(a, http.MethodGet, server.PortalPath+"/endpoints", session, nil)
	require.Equal(t, http.StatusOK, endpoints.Code, endpoints.Body.String())
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM portal_sessions`).Scan(&rows))
	require.Equal(t, 1, rows, "the session; the link is gone")
}
