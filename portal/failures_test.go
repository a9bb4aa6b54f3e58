package portal_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/portal"
)

// breaker stands between the portal and the API and, when told to, answers in the API's place the
// requests whose path contains a part.
type breaker struct {
	mu     sync.Mutex
	part   string
	answer http.HandlerFunc
}

func (br *breaker) set(part string, answer http.HandlerFunc) {
	br.mu.Lock()
	defer br.mu.Unlock()
	br.part, br.answer = part, answer
}

func (br *breaker) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		br.mu.Lock()
		part, answer := br.part, br.answer
		br.mu.Unlock()
		if answer != nil && strings.Contains(r.URL.Path, part) {
			answer(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func TestAPIFailures(t *testing.T) {
	br := &breaker{}
	h := newHarness(t, &options{wrapAPI: br.wrap})
	p := sandboxKey(licA)
	ep := h.register(p, map[string]any{"description": "steady"})
	h.publish(ep.ID, "order.created", map[string]any{"id": "ord_1"})
	h.deliver()
	b := h.login(p)
	before := h.snapshot(ep.ID)

	gets := []string{prefix + "/endpoints", endpointPath(ep.ID), endpointPath(ep.ID, "/deliveries"), endpointPath(ep.ID, "/events/1"),
		endpointPath(ep.ID, "/recover"), endpointPath(ep.ID, "/delete"), prefix + "/event_types"}
	posts := append(forged(ep.ID), struct {
		path string
		form url.Values
	}{prefix + "/endpoints", url.Values{"url": {h.consumer.URL}, "event": {"*"}}})

	for _, tc := range []struct {
		name   string
		answer http.HandlerFunc
		status int
		shows  []string
	}{
		{"a problem 500", func(w http.ResponseWriter, r *http.Request) {
			h.problems.Write(w, r, errors.New("database on fire"))
		}, http.StatusInternalServerError, []string{"Internal Server Error"}},
		{"a problem 503", func(w http.ResponseWriter, r *http.Request) {
			h.problems.Write(w, r, apierror.Unavailable(time.Second, "maintenance", "Back in a minute."))
		}, http.StatusServiceUnavailable, []string{"Back in a minute."}},
		{"an HTML 502", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<h1>upstream <script>alert(1)</script></h1>"))
		}, http.StatusBadGateway, []string{"Bad Gateway", "The request failed."}},
		{"a problem type with a broken body", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"title":`))
		}, http.StatusInternalServerError, []string{"The request failed."}},
		{"a 200 that is not JSON", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("<html>"))
		}, http.StatusInternalServerError, []string{"Something went wrong on our side"}},
		{"an empty 200", func(http.ResponseWriter, *http.Request) {}, http.StatusInternalServerError, []string{"Something went wrong on our side"}},
		{"an answer too large", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			chunk := bytes.Repeat([]byte(" "), 1<<20)
			for range 9 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, http.StatusInternalServerError, []string{"Something went wrong on our side"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br.set("/", tc.answer)
			defer br.set("", nil)
			check := func(what string, got *page) {
				t.Helper()
				if tc.status == http.StatusInternalServerError && strings.Contains(tc.name, "200") {
					// A POST whose 2xx the portal does not read may have acted; the page that
					// follows is the one that fails.
					got = b.follow(got)
				}
				require.Equal(t, tc.status, got.Status, "%s: %s", what, got.Body)
				require.Contains(t, got.Body, `<section class="card narrow">`, what)
				for _, s := range tc.shows {
					require.Contains(t, got.Body, s, what)
				}
				require.NotContains(t, got.Body, "<script>alert(1)", what)
				require.NotContains(t, got.Body, "upstream", "%s: what the API answered without a problem is not shown", what)
				require.Contains(t, got.Body, "Sign out", "%s: still signed in", what)
			}
			for _, path := range gets {
				check(path, b.get(path))
			}
			for _, f := range posts {
				check(f.path, b.post(f.path, f.form))
			}
		})
	}
	br.set("", nil)
	require.Equal(t, before, h.snapshot(ep.ID), "every action failed, so nothing changed")

	t.Run("statistics failing", func(t *testing.T) {
		br.set("/stats", func(w http.ResponseWriter, r *http.Request) { h.problems.Write(w, r, errors.New("no stats")) })
		defer br.set("", nil)
		list := b.get(prefix + "/endpoints")
		require.Equal(t, http.StatusOK, list.Status)
		require.Contains(t, list.Body, ep.ID)
		require.Contains(t, list.Body, `<td data-label="Success">—</td>`)
		page := b.get(endpointPath(ep.ID))
		require.Equal(t, http.StatusOK, page.Status)
		require.Contains(t, page.Body, "No statistics are available.")
	})
	t.Run("the catalogue failing", func(t *testing.T) {
		br.set("/event_types", func(w http.ResponseWriter, r *http.Request) { h.problems.Write(w, r, errors.New("no catalogue")) })
		defer br.set("", nil)
		list := b.get(prefix + "/endpoints")
		require.Equal(t, http.StatusOK, list.Status)
		require.Contains(t, list.Body, `value="*" checked`)
		require.NotContains(t, list.Body, `value="order.created"`, "the form offers what it knows")
		require.Equal(t, http.StatusInternalServerError, b.get(prefix+"/event_types").Status)
	})
}

// flakyStore is a Store whose chosen methods fail.
type flakyStore struct {
	portal.Store
	mu    sync.Mutex
	fails map[string]bool
	calls map[string]int
}

var errStore = errors.New("store: connection refused")

func newFlakyStore() *flakyStore {
	return &flakyStore{Store: portal.NewMemoryStore(), fails: map[string]bool{}, calls: map[string]int{}}
}

func (s *flakyStore) fail(methods ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails = map[string]bool{}
	for _, m := range methods {
		s.fails[m] = true
	}
}

func (s *flakyStore) failing(method string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[method]++
	return s.fails[method]
}

func (s *flakyStore) Put(ctx context.Context, key string, v portal.Session, now time.Time) error {
	if s.failing("Put") {
		return errStore
	}
	return s.Store.Put(ctx, key, v, now)
}

func (s *flakyStore) Get(ctx context.Context, key string, now time.Time) (portal.Session, error) {
	if s.failing("Get") {
		return portal.Session{}, errStore
	}
	return s.Store.Get(ctx, key, now)
}

func (s *flakyStore) Take(ctx context.Context, key string, now time.Time) (portal.Session, error) {
	if s.failing("Take") {
		return portal.Session{}, errStore
	}
	return s.Store.Take(ctx, key, now)
}

func (s *flakyStore) Delete(ctx context.Context, key string) error {
	if s.failing("Delete") {
		return errStore
	}
	return s.Store.Delete(ctx, key)
}

func TestStoreFailures(t *testing.T) {
	store := newFlakyStore()
	h := newHarness(t, &options{store: store})
	p := sandboxKey(licA)
	h.register(p, nil)

	t.Run("minting", func(t *testing.T) {
		store.fail("Put")
		defer store.fail()
		status, out := h.call(p, http.MethodPost, "/v1/portal_sessions", "")
		require.Equal(t, http.StatusInternalServerError, status)
		require.NotContains(t, string(out), "connection refused", "the opaque 500")
		_, err := h.portal.NewLink(t.Context(), portal.Session{Licensee: licA, Environment: p.Environment})
		require.ErrorIs(t, err, errStore)
	})
	t.Run("showing a link", func(t *testing.T) {
		link := h.mint(p)
		store.fail("Get")
		b := h.browser()
		got := b.get(link)
		require.Equal(t, http.StatusServiceUnavailable, got.Status)
		require.Contains(t, got.Body, "The portal is unavailable")
		require.NotContains(t, got.Body, `name="token"`)
		store.fail()
		b.open(link)
		require.NotNil(t, b.session(), "the link survived")
	})
	t.Run("a failing Take opens no session", func(t *testing.T) {
		link := h.mint(p)
		b := h.browser()
		b.get(link)
		store.fail("Take")
		puts := store.calls["Put"]
		got := b.post(prefix+"/login", url.Values{"token": {tokenOf(t, link)}})
		require.Equal(t, http.StatusServiceUnavailable, got.Status)
		require.Contains(t, got.Body, "The portal is unavailable")
		require.Empty(t, cookiesOf(got))
		require.Nil(t, b.session())
		require.Equal(t, puts, store.calls["Put"], "no session was stored")
		require.Equal(t, http.StatusUnauthorized, b.get(prefix+"/endpoints").Status)
		store.fail()
		b.open(link)
		require.NotNil(t, b.session(), "the link was not spent by the failure")
	})
	t.Run("a failing Put opens no session", func(t *testing.T) {
		link := h.mint(p)
		b := h.browser()
		b.get(link)
		store.fail("Put")
		got := b.post(prefix+"/login", url.Values{"token": {tokenOf(t, link)}})
		store.fail()
		require.Equal(t, http.StatusServiceUnavailable, got.Status)
		require.Contains(t, got.Body, "Your session could not be started")
		require.Empty(t, cookiesOf(got))
		require.Nil(t, b.session())
	})
	t.Run("reading a session", func(t *testing.T) {
		b := h.login(p)
		store.fail("Get")
		for _, path := range []string{prefix + "/endpoints", prefix + "/event_types"} {
			got := b.get(path)
			require.Equal(t, http.StatusServiceUnavailable, got.Status, path)
			require.Contains(t, got.Body, "Your session could not be checked just now")
			require.NotContains(t, got.Body, "Sign out")
		}
		before := len(h.callsTo(http.MethodPost, "/v1/webhook_endpoints"))
		got := b.post(prefix+"/endpoints", url.Values{"url": {h.consumer.URL}, "event": {"*"}})
		require.Equal(t, http.StatusServiceUnavailable, got.Status)
		require.Len(t, h.callsTo(http.MethodPost, "/v1/webhook_endpoints"), before, "no action without a session")
		store.fail()
		require.Equal(t, http.StatusOK, b.get(prefix+"/endpoints").Status)
	})
	t.Run("signing out", func(t *testing.T) {
		b := h.login(p)
		store.fail("Delete")
		got := b.post(prefix+"/logout", nil)
		require.Equal(t, http.StatusServiceUnavailable, got.Status)
		require.Contains(t, got.Body, "Signing out failed")
		store.fail()
		// The session is not over, and the visitor was told so: signing out again works.
		require.Equal(t, http.StatusOK, b.get(prefix+"/endpoints").Status)
		require.Equal(t, http.StatusOK, b.post(prefix+"/logout", nil).Status)
		require.Nil(t, b.session())
	})
}
