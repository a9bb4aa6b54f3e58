package idempotency_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

// TestWireBehaviour walks the D2 table: every status the middleware answers, with httptest.
func TestWireBehaviour(t *testing.T) {
	type step struct {
		method, target, key, auth, body string
		wantStatus                      int
		wantCode                        string // problem code, or "" for the handler's response
		wantReplayed                    bool
		wantCalls                       int64 // executions after this step
	}
	cases := []struct {
		name  string
		opts  *idempotency.Options
		steps []step
	}{
		{"first request runs, repeat replays", nil, []step{
			{"POST", "/v1/orders", "k1", authA, order, 201, "", false, 1},
			{"POST", "/v1/orders", "k1", authA, order, 201, "", true, 1},
			{"POST", "/v1/orders", "k1", authA, order, 201, "", true, 1},
		}},
		{"every default method needs a key", nil, []step{
			{"POST", "/v1/orders", "", authA, order, 400, idempotency.CodeKeyMissing, false, 0},
			{"PUT", "/v1/orders/1", "", authA, order, 400, idempotency.CodeKeyMissing, false, 0},
			{"PATCH", "/v1/orders/1", "", authA, order, 400, idempotency.CodeKeyMissing, false, 0},
			{"DELETE", "/v1/orders/1", "", authA, "", 400, idempotency.CodeKeyMissing, false, 0},
		}},
		{"safe methods pass through", nil, []step{
			{"GET", "/v1/orders", "", "", "", 201, "", false, 1},
			{"HEAD", "/v1/orders", "", "", "", 201, "", false, 2},
			{"OPTIONS", "/v1/orders", "k1", "", "", 201, "", false, 3},
		}},
		{"configured methods", &idempotency.Options{Methods: []string{"POST"}}, []step{
			{"PUT", "/v1/orders/1", "", authA, order, 201, "", false, 1},
			{"POST", "/v1/orders", "", authA, order, 400, idempotency.CodeKeyMissing, false, 1},
		}},
		{"malformed keys", nil, []step{
			{"POST", "/v1/orders", "has space", authA, order, 400, idempotency.CodeKeyInvalid, false, 0},
			{"POST", "/v1/orders", strings.Repeat("k", 256), authA, order, 400, idempotency.CodeKeyInvalid, false, 0},
			{"POST", "/v1/orders", "caf\u00e9", authA, order, 400, idempotency.CodeKeyInvalid, false, 0},
			{"POST", "/v1/orders", strings.Repeat("k", 255), authA, order, 201, "", false, 1},
		}},
		{"same key, different body", nil, []step{
			{"POST", "/v1/orders", "k1", authA, order, 201, "", false, 1},
			{"POST", "/v1/orders", "k1", authA, `{"account":"acc_1","side":"sell"}`, 422, idempotency.CodeKeyReused, false, 1},
		}},
		{"same key, different path, method or query", nil, []step{
			{"POST", "/v1/orders?x=1&y=2", "k1", authA, order, 201, "", false, 1},
			{"POST", "/v1/orders?y=2&x=1", "k1", authA, order, 201, "", true, 1}, // canonical query
			{"POST", "/v1/orders?x=2&y=2", "k1", authA, order, 422, idempotency.CodeKeyReused, false, 1},
			{"POST", "/v1/payments?x=1&y=2", "k1", authA, order, 422, idempotency.CodeKeyReused, false, 1},
			{"PUT", "/v1/orders?x=1&y=2", "k1", authA, order, 422, idempotency.CodeKeyReused, false, 1},
		}},
		{"same key, two credentials: two requests", nil, []step{
			{"POST", "/v1/orders", "k1", authA, order, 201, "", false, 1},
			{"POST", "/v1/orders", "k1", authB, `{"other":true}`, 201, "", false, 2},
			{"POST", "/v1/orders", "k1", authA, order, 201, "", true, 2},
		}},
		{"no credential with the default scope", nil, []step{
			{"POST", "/v1/orders", "k1", "", order, 401, idempotency.CodeCredentialMissing, false, 0},
		}},
		{"body over the cap", &idempotency.Options{MaxRequestBytes: 16}, []step{
			{"POST", "/v1/orders", "k1", authA, order, 413, apierror.CodeBodyTooLarge, false, 0},
			{"POST", "/v1/orders", "k1", authA, `{"a":1}`, 201, "", false, 1}, // nothing was stored
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &orders{}
			mw := must(idempotency.New(tc.opts)).Handler(h)
			first := map[string]string{} // scope and key → the original body
			for i, s := range tc.steps {
				w := serve(mw, req(s.method, s.target, s.key, s.auth, s.body))
				if s.wantCode != "" {
					requireProblem(t, w, s.wantStatus, s.wantCode)
				} else {
					require.Equal(t, s.wantStatus, w.Code, "step %d: %s", i, w.Body.String())
					if s.wantReplayed {
						require.Equal(t, "true", w.Header().Get(idempotency.HeaderReplayed), "step %d", i)
						require.Equal(t, first[s.auth+"|"+s.key], w.Body.String(), "step %d: a replay is the original", i)
					} else {
						require.Empty(t, w.Header().Get(idempotency.HeaderReplayed), "step %d", i)
						first[s.auth+"|"+s.key] = w.Body.String()
					}
				}
				require.Equal(t, s.wantCalls, h.calls.Load(), "step %d: executions", i)
			}
		})
	}
}

func TestProblemsAreLocated(t *testing.T) {
	mw := must(idempotency.New(&idempotency.Options{MaxRequestBytes: 4})).Handler(&orders{})
	cases := []struct {
		name              string
		r                 *http.Request
		status            int
		code              string
		location, nameOrP string
	}{
		{"missing", req("POST", "/v1/orders", "", authA, order), 400, idempotency.CodeKeyMissing, "header", idempotency.HeaderKey},
		{"invalid", req("POST", "/v1/orders", "a b", authA, order), 400, idempotency.CodeKeyInvalid, "header", idempotency.HeaderKey},
		{"no credential", req("POST", "/v1/orders", "k", "", order), 401, idempotency.CodeCredentialMissing, "header", "Authorization"},
		{"too large", req("POST", "/v1/orders", "k", authA, order), 413, apierror.CodeBodyTooLarge, "body", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(mw, tc.r)
			p := requireProblem(t, w, tc.status, tc.code)
			require.Len(t, p.Errors, 1)
			require.Equal(t, tc.location, p.Errors[0].Location)
			require.Equal(t, tc.nameOrP, p.Errors[0].Name)
			require.Equal(t, tc.code, p.Errors[0].Code)
			// Nothing secret comes back: neither the credential nor the key.
			require.NotContains(t, w.Body.String(), "sk_sandbox")
			if tc.status == 401 {
				require.Equal(t, `Bearer realm="svcplatform"`, w.Header().Get("WWW-Authenticate"))
			}
		})
	}
	t.Run("duplicate header", func(t *testing.T) {
		r := req("POST", "/v1/orders", "k1", authA, "{}")
		r.Header.Add(idempotency.HeaderKey, "k2")
		requireProblem(t, serve(mw, r), 400, idempotency.CodeKeyInvalid)
	})
}

func TestInFlightConflict(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var calls int
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		close(started)
		<-release
		w.WriteHeader(http.StatusCreated)
	})
	mw := must(idempotency.New(&idempotency.Options{RetryAfter: 3 * time.Second})).Handler(h)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- serve(mw, req("POST", "/v1/orders", "k1", authA, order)) }()
	<-started
	w := serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	p := requireProblem(t, w, http.StatusConflict, idempotency.CodeKeyInUse)
	require.Equal(t, "3", w.Header().Get("Retry-After"))
	require.Equal(t, idempotency.HeaderKey, p.Errors[0].Name)
	// A different request with the in-flight key is a mismatch, not a conflict.
	requireProblem(t, serve(mw, req("POST", "/v1/orders", "k1", authA, `{}`)), http.StatusUnprocessableEntity, idempotency.CodeKeyReused)
	close(release)
	require.Equal(t, http.StatusCreated, (<-done).Code)
	w = serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	require.Equal(t, http.StatusCreated, w.Code)
	require.Equal(t, "true", w.Header().Get(idempotency.HeaderReplayed))
	require.Equal(t, 1, calls)
}

func TestReplayHeaders(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/orders/ord_1")
		w.Header().Add("Link", "</a>; rel=a")
		w.Header().Add("Link", "</b>; rel=b")
		w.Header().Set("Set-Cookie", "session=secret")
		w.Header().Set("X-Request-Id", "req_first")
		w.WriteHeader(http.StatusCreated)
		// Changes after the status is written never reach the client, nor the replay.
		w.Header().Set("Location", "/changed")
		_, _ = io.WriteString(w, `{"id":"ord_1"}`)
	})
	mw := must(idempotency.New(&idempotency.Options{ReplayHeaders: []string{"link"}})).Handler(h)
	first := serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	require.Equal(t, 201, first.Code)
	replay := serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	require.Equal(t, 201, replay.Code)
	require.Equal(t, `{"id":"ord_1"}`, replay.Body.String())
	require.Equal(t, http.Header{
		"Content-Type":             {"application/json"},
		"Location":                 {"/v1/orders/ord_1"},
		"Link":                     {"</a>; rel=a", "</b>; rel=b"},
		"Cache-Control":            {"no-store"},
		idempotency.HeaderReplayed: {"true"},
	}, replay.Header())

	// The handler's own Cache-Control is stored and replayed (Options.ReplayHeaders says so), in
	// place of the no-store a replay otherwise gets.
	cached := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "private, max-age=60")
		w.WriteHeader(http.StatusOK)
	})
	mw = must(idempotency.New(nil)).Handler(cached)
	require.Equal(t, "private, max-age=60", serve(mw, req("POST", "/v1/orders", "k2", authA, order)).Header().Get("Cache-Control"))
	replay = serve(mw, req("POST", "/v1/orders", "k2", authA, order))
	require.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed))
	require.Equal(t, []string{"private, max-age=60"}, replay.Header()["Cache-Control"])
}

func TestReplayedHeaderSlicesAreNotShared(t *testing.T) {
	mw := must(idempotency.New(nil)).Handler(&orders{})
	serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	// A later middleware that appends to a replayed header must not change what the store holds.
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mw.ServeHTTP(w, r)
		w.Header().Add("Location", "/appended")
		w.Header()["Content-Type"][0] = "mutated/by-caller"
	})
	serve(wrapped, req("POST", "/v1/orders", "k1", authA, order))
	w := serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	require.Equal(t, []string{"/v1/orders/ord_1"}, w.Header()["Location"])
	require.Equal(t, "true", w.Header().Get(idempotency.HeaderReplayed))
}

func TestServerErrorsAreStoredByDefault(t *testing.T) {
	for _, release := range []bool{false, true} {
		t.Run(map[bool]string{false: "stored", true: "ReleaseServerErrors"}[release], func(t *testing.T) {
			var calls int
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls++
				apierror.Write(w, r, apierror.Internal())
			})
			m := must(idempotency.New(&idempotency.Options{ReleaseServerErrors: release}))
			mw := m.Handler(h)
			require.Equal(t, 500, serve(mw, req("POST", "/v1/orders", "k1", authA, order)).Code)
			w := serve(mw, req("POST", "/v1/orders", "k1", authA, order))
			require.Equal(t, 500, w.Code)
			if release {
				require.Equal(t, 2, calls, "a released 5xx runs again")
				require.Empty(t, w.Header().Get(idempotency.HeaderReplayed))
				require.EqualValues(t, 2, m.Stats().Released)
			} else {
				require.Equal(t, 1, calls, "a stored 5xx is replayed")
				require.Equal(t, "true", w.Header().Get(idempotency.HeaderReplayed))
				require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
			}
		})
	}
}

func TestStoreFailureFailsClosed(t *testing.T) {
	store := &faultStore{Store: memstore.New(nil)}
	store.fail(&store.claimErr, errDown)
	logs := &logBuffer{}
	h := &orders{}
	m := must(idempotency.New(&idempotency.Options{Store: store, Logger: logs.logger(), RetryAfter: 2 * time.Second}))
	w := serve(m.Handler(h), req("POST", "/v1/orders", "k1", authA, order))
	requireProblem(t, w, http.StatusServiceUnavailable, apierror.CodeUnavailable)
	require.Equal(t, "2", w.Header().Get("Retry-After"))
	require.NotContains(t, w.Body.String(), "connection refused", "no internal detail in a 5xx")
	require.Zero(t, h.calls.Load(), "the handler must not run when the store cannot be read")
	require.EqualValues(t, 1, m.Stats().StoreErrors)
	require.Contains(t, logs.String(), "connection refused")
	require.NotContains(t, logs.String(), "sk_sandbox", "credentials are never logged")
}

func TestStoreFailureFailOpen(t *testing.T) {
	store := &faultStore{Store: memstore.New(nil)}
	store.fail(&store.claimErr, errDown)
	h := &orders{}
	m := must(idempotency.New(&idempotency.Options{Store: store, FailOpen: true}))
	w := serve(m.Handler(h), req("POST", "/v1/orders", "k1", authA, order))
	require.Equal(t, 201, w.Code)
	require.Contains(t, w.Body.String(), `"request":`+order, "the handler gets the whole body")
	require.EqualValues(t, 1, h.calls.Load())
	require.EqualValues(t, 1, m.Stats().FailedOpen)
}

func TestCustomScope(t *testing.T) {
	type tenantKey struct{}
	scope := func(r *http.Request) (string, error) {
		tenant, _ := r.Context().Value(tenantKey{}).(string)
		if tenant == "" {
			return "", apierror.Unauthenticated("unauthenticated", "no principal")
		}
		return "tenant:" + tenant, nil
	}
	h := &orders{}
	mw := must(idempotency.New(&idempotency.Options{Scope: scope})).Handler(h)
	as := func(tenant string, r *http.Request) *http.Request {
		if tenant == "" {
			return r
		}
		return r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant))
	}
	// No Authorization header needed: the scope comes from the principal.
	require.Equal(t, 201, serve(mw, as("t1", req("POST", "/v1/orders", "k1", "", order))).Code)
	require.Equal(t, "true", serve(mw, as("t1", req("POST", "/v1/orders", "k1", "", order))).Header().Get(idempotency.HeaderReplayed))
	require.Empty(t, serve(mw, as("t2", req("POST", "/v1/orders", "k1", "", order))).Header().Get(idempotency.HeaderReplayed))
	requireProblem(t, serve(mw, as("", req("POST", "/v1/orders", "k1", "", order))), 401, "unauthenticated")
	require.EqualValues(t, 2, h.calls.Load())

	t.Run("empty scope is a server error, never a shared scope", func(t *testing.T) {
		logs := &logBuffer{}
		mw := must(idempotency.New(&idempotency.Options{Scope: func(*http.Request) (string, error) { return "", nil }, Logger: logs.logger()})).Handler(h)
		requireProblem(t, serve(mw, req("POST", "/v1/orders", "k1", "", order)), 500, apierror.CodeInternal)
		require.Contains(t, logs.String(), "empty scope")
	})
}

func TestBodyHandling(t *testing.T) {
	t.Run("chunked body over the cap", func(t *testing.T) {
		h := &orders{}
		mw := must(idempotency.New(&idempotency.Options{MaxRequestBytes: 10})).Handler(h)
		r := req("POST", "/v1/orders", "k1", authA, "")
		r.Body = io.NopCloser(strings.NewReader(strings.Repeat("x", 11)))
		r.ContentLength = -1
		requireProblem(t, serve(mw, r), 413, apierror.CodeBodyTooLarge)
		r = req("POST", "/v1/orders", "k2", authA, "")
		r.Body = io.NopCloser(strings.NewReader(strings.Repeat("x", 10)))
		r.ContentLength = -1
		require.Equal(t, 201, serve(mw, r).Code, "exactly at the cap is fine")
		require.EqualValues(t, 1, h.calls.Load())
	})
	t.Run("outer MaxBytesReader", func(t *testing.T) {
		h := &orders{}
		mw := must(idempotency.New(nil)).Handler(h)
		r := req("POST", "/v1/orders", "k1", authA, strings.Repeat("x", 100))
		w := httptest.NewRecorder()
		r.Body = http.MaxBytesReader(w, r.Body, 50)
		mw.ServeHTTP(w, r)
		requireProblem(t, w, 413, apierror.CodeBodyTooLarge)
	})
	t.Run("read error", func(t *testing.T) {
		h := &orders{}
		mw := must(idempotency.New(nil)).Handler(h)
		r := req("POST", "/v1/orders", "k1", authA, "")
		r.Body = io.NopCloser(io.MultiReader(strings.NewReader("part"), iotest{}))
		r.ContentLength = -1
		requireProblem(t, serve(mw, r), 400, idempotency.CodeBodyUnreadable)
		require.Zero(t, h.calls.Load())
	})
	t.Run("the handler reads the body it was fingerprinted with", func(t *testing.T) {
		var got []byte
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var sb strings.Builder
			_, err := io.Copy(&sb, r.Body) // WriteTo path
			require.NoError(t, err)
			got = []byte(sb.String())
			w.WriteHeader(204)
		})
		mw := must(idempotency.New(nil)).Handler(h)
		body := strings.Repeat("0123456789", 10_000)
		require.Equal(t, 204, serve(mw, req("POST", "/v1/orders", "k1", authA, body)).Code)
		require.Equal(t, body, string(got))
	})
}

type iotest struct{}

func (iotest) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

func TestHandlerPanicReleasesKey(t *testing.T) {
	logs := &logBuffer{}
	var calls int
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			w.WriteHeader(201) // even after writing, a panic stores nothing
			panic("boom")
		}
		w.WriteHeader(202)
	})
	m := must(idempotency.New(&idempotency.Options{Logger: logs.logger()}))
	mw := m.Handler(h)
	require.PanicsWithValue(t, "boom", func() { serve(mw, req("POST", "/v1/orders", "k1", authA, order)) })
	require.Contains(t, logs.String(), "handler panicked")
	// The key is free at once: the retry runs.
	w := serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	require.Equal(t, 202, w.Code)
	require.Empty(t, w.Header().Get(idempotency.HeaderReplayed))
	require.Equal(t, 2, calls)
	st := m.Stats()
	require.EqualValues(t, 1, st.Panics)
	require.EqualValues(t, 1, st.Released)

	t.Run("http.ErrAbortHandler", func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) })
		mw := must(idempotency.New(nil)).Handler(h)
		require.PanicsWithValue(t, http.ErrAbortHandler, func() { serve(mw, req("POST", "/v1/orders", "k2", authA, order)) })
		require.PanicsWithValue(t, http.ErrAbortHandler, func() { serve(mw, req("POST", "/v1/orders", "k2", authA, order)) },
			"released: the retry runs (and panics) again instead of getting 409")
	})
}

func TestStats(t *testing.T) {
	h := &orders{}
	m := must(idempotency.New(nil))
	mw := m.Handler(h)
	serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	serve(mw, req("POST", "/v1/orders", "k1", authA, "{}"))
	serve(mw, req("POST", "/v1/orders", "", authA, order))
	serve(mw, req("GET", "/v1/orders", "", authA, ""))
	require.Equal(t, idempotency.Stats{Executed: 1, Replayed: 1, Reused: 1, Rejected: 1}, m.Stats())
}

func TestConcurrentDistinctKeys(t *testing.T) {
	h := &orders{}
	mw := must(idempotency.New(nil)).Handler(h)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "key-" + itoa(int64(i))
			w := serve(mw, req("POST", "/v1/orders", key, authA, order))
			require.Equal(t, 201, w.Code)
			again := serve(mw, req("POST", "/v1/orders", key, authA, order))
			require.Equal(t, w.Body.String(), again.Body.String())
		}()
	}
	wg.Wait()
	require.EqualValues(t, 200, h.calls.Load())
}
