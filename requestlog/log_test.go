package requestlog_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/internal/testclock"
	"github.com/svcplatform/conventions/requestlog"
)

func TestRecordsCreated(t *testing.T) {
	s := newService(t, nil)
	w, id := s.do(t, http.MethodPost, "/v2/orders", "lic_a", "order-1", `{"amount":5}`)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())

	e := s.entry(t, owner("lic_a"), id)
	require.Equal(t, requestlog.Entry{
		RequestID: id, Owner: "live:lic_a", KeyID: s.keys["lic_a"].KeyID, Environment: "live", Method: "POST",
		Route: "POST /{version}/orders", Status: 201, IdempotencyKey: "order-1", Version: "v2",
		Latency: 3 * time.Millisecond, At: t0,
	}, e)
	require.Equal(t, requestlog.Stats{Recorded: 1, Written: 1}, s.log.Stats())
}

func TestRecordsRefused(t *testing.T) {
	s := newService(t, nil)
	for _, tc := range []struct {
		name, auth, code string
	}{
		{"Missing", "", apikey.CodeMissing},
		{"Invalid", "Bearer sk_live_" + strings.Repeat("a", 40), apikey.CodeMalformed},
		{"Scheme", "Basic dXNlcjpwYXNz", apikey.CodeSchemeUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v2/orders", strings.NewReader(`{"amount":5}`))
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			w := httptest.NewRecorder()
			s.handler.ServeHTTP(w, r)
			require.Equal(t, http.StatusUnauthorized, w.Code)
			id := w.Header().Get(apierror.HeaderRequestID)
			e := s.entry(t, "", id)
			require.Equal(t, requestlog.Entry{RequestID: id, Method: "POST", Status: 401, Code: tc.code, At: t0}, e,
				"no owner, no key, no route: the request never got past authentication")
		})
	}
}

func TestRecordsProblemCode(t *testing.T) {
	s := newService(t, nil)
	// The first request pins lic_a to the newest version, v2.
	_, _ = s.do(t, http.MethodGet, "/v2/orders/ord_9", "lic_a", "", "")
	for _, tc := range []struct {
		name, method, target, idemKey, body string
		status                              int
		code, version, route                string
	}{
		{"VersionNotEnabled", http.MethodGet, "/v1/orders/ord_9", "", "", http.StatusForbidden, "version_not_enabled", "v1", ""},
		{"UnknownVersion", http.MethodGet, "/v9/orders/ord_9", "", "", http.StatusNotFound, "version_unknown", "", ""},
		{"IdempotencyKeyMissing", http.MethodPost, "/v2/orders", "", `{"amount":5}`, http.StatusBadRequest, idempotency.CodeKeyMissing, "", ""},
		{"HandlersOwn", http.MethodGet, "/v2/orders/ord_9", "", "", http.StatusNotFound, "order_not_found", "v2", "GET /{version}/orders/{id}"},
		{"Validation", http.MethodPost, "/v2/orders", "order-bad", `{"amount":"x"}`, http.StatusBadRequest, apierror.CodeWrongType, "v2", "POST /{version}/orders"},
		{"RouteNotFound", http.MethodGet, "/v2/nothing", "", "", http.StatusNotFound, apierror.CodeRouteNotFound, "v2", ""},
		{"Panic", http.MethodGet, "/v2/boom", "", "", http.StatusInternalServerError, apierror.CodeInternal, "v2", "GET /{version}/boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, id := s.do(t, tc.method, tc.target, "lic_a", tc.idemKey, tc.body)
			require.Equal(t, tc.status, w.Code, w.Body.String())
			p, err := apierror.Parse(w.Result())
			require.NoError(t, err)
			e := s.entry(t, owner("lic_a"), id)
			require.Equal(t, tc.status, e.Status)
			require.Equal(t, p.Code, e.Code, "the code the client got")
			if tc.code != "version_unknown" { // the router's own code, whatever its spelling
				require.Equal(t, tc.code, e.Code)
			}
			require.Equal(t, tc.version, e.Version)
			require.Equal(t, tc.route, e.Route)
			require.Equal(t, tc.idemKey, e.IdempotencyKey)
			require.Equal(t, s.keys["lic_a"].KeyID, e.KeyID)
		})
	}
}

func TestRecordsReplay(t *testing.T) {
	s := newService(t, nil)
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"Success", `{"amount":5}`, http.StatusCreated, ""},
		// A stored problem is replayed without apierror's Writer: the code still comes through.
		{"StoredProblem", `{"amount":5000}`, http.StatusUnprocessableEntity, "amount_over_limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "order-" + tc.name
			first, firstID := s.do(t, http.MethodPost, "/v2/orders", "lic_a", key, tc.body)
			again, againID := s.do(t, http.MethodPost, "/v2/orders", "lic_a", key, tc.body)
			require.Equal(t, tc.status, first.Code)
			require.Equal(t, tc.status, again.Code)
			require.Equal(t, "true", again.Header().Get(idempotency.HeaderReplayed))
			require.NotEqual(t, firstID, againID)

			e1, e2 := s.entry(t, owner("lic_a"), firstID), s.entry(t, owner("lic_a"), againID)
			require.False(t, e1.Replayed)
			require.True(t, e2.Replayed)
			for _, e := range []requestlog.Entry{e1, e2} {
				require.Equal(t, key, e.IdempotencyKey)
				require.Equal(t, tc.status, e.Status)
				require.Equal(t, tc.code, e.Code)
				require.Equal(t, s.keys["lic_a"].KeyID, e.KeyID)
			}
			require.Equal(t, "POST /{version}/orders", e1.Route)
			require.Equal(t, "v2", e1.Version)
			// In this chain the idempotency middleware answers a replay before the router and the mux.
			require.Equal(t, "", e2.Route)
			require.Equal(t, "", e2.Version)
		})
	}
}

// One owner never reads another's entries, and nobody reads those of refused requests.
func TestTenancy(t *testing.T) {
	s := newService(t, nil)
	_, aID := s.do(t, http.MethodPost, "/v2/orders", "lic_a", "order-1", `{"amount":5}`)
	_, bID := s.do(t, http.MethodPost, "/v2/orders", "lic_b", "order-1", `{"amount":5}`)
	_, refusedID := s.do(t, http.MethodPost, "/v2/orders", "", "order-1", `{"amount":5}`)
	require.NoError(t, s.log.Flush(context.Background()))

	w, _ := s.do(t, http.MethodGet, "/v2/requests/"+aID, "lic_a", "", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	for _, id := range []string{bID, refusedID, "req_unknown"} {
		w, _ := s.do(t, http.MethodGet, "/v2/requests/"+id, "lic_a", "", "")
		require.Equal(t, http.StatusNotFound, w.Code)
		p, err := apierror.Parse(w.Result())
		require.NoError(t, err)
		require.Equal(t, requestlog.CodeRequestNotFound, p.Code)
		require.Equal(t, []apierror.Violation{{Location: apierror.LocationPath, Name: "request_id", Code: requestlog.CodeRequestNotFound,
			Detail: "names no request of yours"}}, p.Errors, "another owner's entry is the same 404 as an unknown one")
	}
	w, _ = s.do(t, http.MethodGet, "/v2/requests?limit=100", "lic_a", "", "")
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	require.NotContains(t, body, bID)
	require.NotContains(t, body, refusedID)
	require.Contains(t, body, aID)
}

// No recorded field holds the API key, the body, the query, a header or the path's values, wherever
// the client put them.
func TestNoSecretRecorded(t *testing.T) {
	s := newService(t, nil)
	const marker = "MARKER7f3a"
	key := s.keys["lic_a"].APIKey
	for _, tc := range []struct {
		name, method, target, idemKey, body, auth string
	}{
		{"Body", http.MethodPost, "/v2/orders?note=" + marker, "order-" + marker[:3], `{"amount":5,"note":"` + marker + `"}`, "Bearer " + key},
		{"PathValue", http.MethodGet, "/v2/orders/" + marker, "", "", "Bearer " + key},
		{"KeyAsIdempotencyKey", http.MethodPost, "/v2/orders", key, `{"amount":5}`, "Bearer " + key},
		{"KeyInPath", http.MethodGet, "/v2/orders/" + key, "", "", "Bearer " + key},
		{"KeyInQuery", http.MethodGet, "/v2/requests?route=" + key, "", "", "Bearer " + key},
		{"RefusedKey", http.MethodPost, "/v2/orders", "", `{"note":"` + marker + `"}`, "Bearer " + key + "x"},
		{"KeyAsMethod", key, "/v2/orders", "", "", "Bearer " + key},
		{"NoRoute", http.MethodPost, "/v2/" + marker + "/" + key, "", "", "Bearer " + key},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tc.target, strings.NewReader(tc.body))
			r.Method = tc.method
			r.Header.Set("Authorization", tc.auth)
			r.Header.Set("X-Note", marker)
			r.Header.Set("User-Agent", marker)
			if tc.idemKey != "" {
				r.Header.Set(idempotency.HeaderKey, tc.idemKey)
			}
			s.handler.ServeHTTP(httptest.NewRecorder(), r)
		})
	}
	require.NoError(t, s.log.Flush(context.Background()))
	st := s.log.Stats()
	require.Equal(t, uint64(8), st.Written)

	var entries []requestlog.Entry
	for _, o := range []string{owner("lic_a"), ""} {
		list, _, err := s.store.List(context.Background(), requestlog.Query{Owner: o, Limit: 100})
		require.NoError(t, err)
		entries = append(entries, list...)
	}
	require.Len(t, entries, 8)
	for _, e := range entries {
		v := reflect.ValueOf(e)
		for i := range v.NumField() {
			f := v.Field(i)
			if f.Kind() != reflect.String {
				continue
			}
			require.NotContains(t, f.String(), marker, "%s of %s", v.Type().Field(i).Name, e.RequestID)
			require.NotContains(t, f.String(), key[len(key)-20:], "%s of %s", v.Type().Field(i).Name, e.RequestID)
			require.False(t, apierror.LooksLikeCredential(f.String()), "%s of %s: %q", v.Type().Field(i).Name, e.RequestID, f.String())
		}
	}
}

// gateStore is a Store whose Insert waits for the gate to open.
type gateStore struct {
	*requestlog.MemoryStore
	gate chan struct{}
}

func (g *gateStore) Insert(ctx context.Context, entries []requestlog.Entry) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.MemoryStore.Insert(ctx, entries)
}

// A full buffer drops the entry and counts it; the request is served at once all the same.
func TestBufferFullDropsAndCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &gateStore{MemoryStore: must(requestlog.NewMemoryStore(nil)), gate: make(chan struct{})}
		l := must(requestlog.New(&requestlog.Options{Store: store, BufferSize: 2, BatchSize: 1}))
		h := apierror.WithRequestID(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		})))
		serve := func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
			require.Equal(t, http.StatusNoContent, w.Code)
		}
		serve()
		synctest.Wait() // the flusher took the first entry and waits in Insert
		start := time.Now()
		for range 10 {
			serve() // two fill the buffer, eight are dropped
		}
		require.Zero(t, time.Since(start), "no request waited")
		require.Equal(t, requestlog.Stats{Recorded: 3, Dropped: 8}, l.Stats())

		close(store.gate)
		require.NoError(t, l.Close(context.Background()))
		require.Equal(t, requestlog.Stats{Recorded: 3, Dropped: 8, Written: 3}, l.Stats())
		list, _, err := store.List(context.Background(), requestlog.Query{Owner: "", Limit: 100})
		require.NoError(t, err)
		require.Len(t, list, 3)
	})
}

// Batches are written when full, or at the flush interval, without Flush.
func TestFlushTriggers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := must(requestlog.NewMemoryStore(nil))
		l := must(requestlog.New(&requestlog.Options{Store: store, BatchSize: 3, FlushInterval: time.Second}))
		defer func() { require.NoError(t, l.Close(context.Background())) }()
		record := func(n int) {
			for i := range n {
				require.True(t, l.Record(requestlog.Entry{RequestID: "req_" + strings.Repeat("x", i+1) + time.Now().Format("150405"), Method: "GET", Status: 200, At: time.Now()}))
			}
		}
		record(2)
		synctest.Wait()
		require.Zero(t, l.Stats().Written, "a batch of 2 waits for the interval")
		record(1)
		synctest.Wait()
		require.Equal(t, uint64(3), l.Stats().Written, "a full batch is written at once")
		record(1)
		time.Sleep(time.Second) // synctest's clock: no real wait
		synctest.Wait()
		require.Equal(t, uint64(4), l.Stats().Written, "the interval writes what is there")
	})
}

func TestCloseFlushes(t *testing.T) {
	s := newService(t, &requestlog.Options{BatchSize: 1000})
	var ids []string
	for i := range 5 {
		_, id := s.do(t, http.MethodGet, "/v2/orders/ord_"+string(rune('a'+i)), "lic_a", "", "")
		ids = append(ids, id)
	}
	list, _, err := s.store.List(context.Background(), requestlog.Query{Owner: owner("lic_a"), Limit: 100})
	require.NoError(t, err)
	require.Empty(t, list, "nothing written yet: the batch is not full and the interval is an hour")

	require.NoError(t, s.log.Close(context.Background()))
	require.NoError(t, s.log.Close(context.Background()), "a second Close")
	for _, id := range ids {
		_, err := s.store.Get(context.Background(), owner("lic_a"), id)
		require.NoError(t, err)
	}
	require.Equal(t, requestlog.Stats{Recorded: 5, Written: 5}, s.log.Stats())

	// After Close requests are served and not recorded.
	w, _ := s.do(t, http.MethodGet, "/v2/orders/ord_z", "lic_a", "", "")
	require.Equal(t, http.StatusNotFound, w.Code)
	require.Equal(t, uint64(1), s.log.Stats().Dropped)
	require.ErrorIs(t, s.log.Flush(context.Background()), requestlog.ErrClosed)
}

// Close gives up when its context ends: a store that never answers does not hold shutdown.
func TestCloseGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &gateStore{MemoryStore: must(requestlog.NewMemoryStore(nil)), gate: make(chan struct{})}
		l := must(requestlog.New(&requestlog.Options{Store: store}))
		require.True(t, l.Record(requestlog.Entry{RequestID: "req_1", Method: "GET", Status: 200, At: time.Now()}))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.ErrorIs(t, l.Close(ctx), context.DeadlineExceeded)
		synctest.Wait() // the flusher's Insert was cancelled, and it returned
		require.Equal(t, uint64(1), l.Stats().Failed)
	})
}

func TestRetentionPrunes(t *testing.T) {
	clock := testclock.New(t0)
	store := must(requestlog.NewMemoryStore(nil))
	old := requestlog.Entry{RequestID: "req_old", Owner: "o", Method: "GET", Status: 200, At: t0.Add(-8 * 24 * time.Hour)}
	recent := requestlog.Entry{RequestID: "req_recent", Owner: "o", Method: "GET", Status: 200, At: t0.Add(-6 * 24 * time.Hour)}
	require.NoError(t, store.Insert(context.Background(), []requestlog.Entry{old, recent}))
	l := must(requestlog.New(&requestlog.Options{Store: store, Now: clock.Now, FlushInterval: time.Hour}))
	defer l.Close(context.Background())

	present := func(id string) bool {
		_, err := store.Get(context.Background(), "o", id)
		return err == nil
	}
	require.NoError(t, l.Flush(context.Background()))
	require.False(t, present("req_old"), "past the default retention of 7 days")
	require.True(t, present("req_recent"))
	require.Equal(t, uint64(1), l.Stats().Pruned)

	clock.Advance(2 * 24 * time.Hour) // req_recent is now 8 days old…
	require.NoError(t, l.Flush(context.Background()))
	require.False(t, present("req_recent"), "…and the pruning was due (PruneInterval, 10 minutes)")

	require.NoError(t, store.Insert(context.Background(), []requestlog.Entry{old}))
	clock.Advance(requestlog.DefaultPruneInterval - time.Second)
	require.NoError(t, l.Flush(context.Background()))
	require.True(t, present("req_old"), "not due yet")
	clock.Advance(time.Second)
	require.NoError(t, l.Flush(context.Background()))
	require.False(t, present("req_old"))
	require.Equal(t, uint64(3), l.Stats().Pruned)
}

// failStore fails every Insert.
// outageStore fails every Insert while down, as a database that is unreachable; a failing Insert
// may still have stored its batch (the answer was lost), as one that timed out after committing.
type outageStore struct {
	*requestlog.MemoryStore
	mu        sync.Mutex
	down      bool
	lateStore bool // a failed Insert stores its batch all the same
	calls     int
}

func (s *outageStore) Insert(ctx context.Context, entries []requestlog.Entry) error {
	s.mu.Lock()
	down, late := s.down, s.lateStore
	s.calls++
	s.mu.Unlock()
	if !down {
		return s.MemoryStore.Insert(ctx, entries)
	}
	if late {
		_ = s.MemoryStore.Insert(ctx, entries)
	}
	return errors.New("disk full")
}

func (s *outageStore) set(down, late bool) {
	s.mu.Lock()
	s.down, s.lateStore = down, late
	s.mu.Unlock()
}

// TestStoreOutageLosesNothing: a batch the Store refuses is kept and written once the Store is back,
// each entry once, even when a failed Insert had stored it (its answer lost); while the Store is
// down the flusher calls it once a tick, not once an entry.
func TestStoreOutageLosesNothing(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("stored_late=%v", late), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &outageStore{MemoryStore: must(requestlog.NewMemoryStore(nil))}
				l := must(requestlog.New(&requestlog.Options{Store: store, BatchSize: 2, FlushInterval: time.Second}))
				defer l.Close(context.Background())
				store.set(true, late)
				for i := range 10 {
					l.Record(requestlog.Entry{RequestID: fmt.Sprintf("req_%02d", i), Method: "GET", Status: 200, At: t0})
				}
				synctest.Wait()
				store.mu.Lock()
				calls := store.calls
				store.mu.Unlock()
				require.Equal(t, 1, calls, "a full batch is tried once, then held until the next tick")
				err := l.Flush(context.Background())
				require.ErrorContains(t, err, "disk full")
				time.Sleep(5 * time.Second) // five ticks, five tries
				synctest.Wait()
				store.set(false, false)
				time.Sleep(time.Second)
				synctest.Wait()
				require.NoError(t, l.Flush(context.Background()))
				st := l.Stats()
				require.Equal(t, uint64(10), st.Recorded)
				require.Equal(t, uint64(10), st.Written)
				require.Zero(t, st.Failed)
				require.Zero(t, st.Dropped)
				require.GreaterOrEqual(t, st.Retried, uint64(6))
				list, _, err := store.List(context.Background(), requestlog.Query{Limit: 100})
				require.NoError(t, err)
				require.Len(t, list, 10, "every entry once")
			})
		})
	}
}

// TestStoreFailureAtClose: what the Store still refuses when the Log closes is lost, and counted.
func TestStoreFailureAtClose(t *testing.T) {
	store := &outageStore{MemoryStore: must(requestlog.NewMemoryStore(nil)), down: true}
	l := must(requestlog.New(&requestlog.Options{Store: store, FlushInterval: time.Hour}))
	l.Record(requestlog.Entry{RequestID: "req_1", Method: "GET", Status: 200, At: t0})
	l.Record(requestlog.Entry{RequestID: "req_2", Method: "GET", Status: 200, At: t0})
	require.NoError(t, l.Close(context.Background()))
	st := l.Stats()
	require.Equal(t, uint64(2), st.Failed)
	require.Zero(t, st.Written)
}

// A Log outside apierror.WithRequestID has no ID to record under: nothing is recorded, it is counted.
func TestNoRequestID(t *testing.T) {
	l := must(requestlog.New(&requestlog.Options{FlushInterval: time.Hour}))
	defer l.Close(context.Background())
	w := httptest.NewRecorder()
	l.Handler(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusNotFound, w.Code)
	require.Equal(t, requestlog.Stats{Dropped: 1}, l.Stats())
}

// A panic that nothing inside recovers is recorded as a 500 and goes on.
func TestPanicRecorded(t *testing.T) {
	store := must(requestlog.NewMemoryStore(nil))
	l := must(requestlog.New(&requestlog.Options{Store: store, FlushInterval: time.Hour}))
	defer l.Close(context.Background())
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r = r.WithContext(apierror.NewRequestIDContext(r.Context(), "req_panic"))
	require.PanicsWithValue(t, http.ErrAbortHandler, func() { h.ServeHTTP(httptest.NewRecorder(), r) })
	require.NoError(t, l.Flush(context.Background()))
	e, err := store.Get(context.Background(), "", "req_panic")
	require.NoError(t, err)
	require.Equal(t, http.StatusInternalServerError, e.Status)
}

// Options.Route names the pattern for a router that does not note it: here a plain ServeMux.
func TestRouteOption(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) {})
	store := must(requestlog.NewMemoryStore(nil))
	for _, tc := range []struct {
		name  string
		route func(*http.Request) string
		want  string
	}{
		{"None", nil, ""},
		{"Mux", func(r *http.Request) string { _, p := mux.Handler(r); return p }, "GET /v1/orders/{id}"},
		{"TooLong", func(*http.Request) string { return "GET /" + strings.Repeat("a", 300) }, ""},
		{"Credential", func(r *http.Request) string { return r.URL.Path }, ""}, // a path is not a pattern: here it holds a key
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := must(requestlog.New(&requestlog.Options{Store: store, Route: tc.route, FlushInterval: time.Hour}))
			defer l.Close(context.Background())
			r := httptest.NewRequest(http.MethodGet, "/v1/orders/sk_live_"+strings.Repeat("a", 40), nil)
			r = r.WithContext(apierror.NewRequestIDContext(r.Context(), "req_"+tc.name))
			l.Handler(mux).ServeHTTP(httptest.NewRecorder(), r)
			require.NoError(t, l.Flush(context.Background()))
			e, err := store.Get(context.Background(), "", "req_"+tc.name)
			require.NoError(t, err)
			require.Equal(t, tc.want, e.Route)
		})
	}
}

// The wrapped writer keeps what the writer under it can do, and sees the final status.
func TestResponseWriter(t *testing.T) {
	store := must(requestlog.NewMemoryStore(nil))
	l := must(requestlog.New(&requestlog.Options{Store: store, FlushInterval: time.Hour}))
	defer l.Close(context.Background())
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		status  int
		body    string
	}{
		{"Nothing", func(http.ResponseWriter, *http.Request) {}, 200, ""},
		{"WriteOnly", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hi")) }, 200, "hi"},
		{"EarlyHints", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusAccepted)
			w.WriteHeader(http.StatusTeapot) // superfluous
		}, 202, ""},
		{"Flusher", func(w http.ResponseWriter, r *http.Request) {
			f, ok := w.(http.Flusher)
			require.True(t, ok)
			_, _ = io.WriteString(w, "a")
			f.Flush()
		}, 200, "a"},
		{"ResponseController", func(w http.ResponseWriter, r *http.Request) {
			require.NoError(t, http.NewResponseController(w).Flush())
			_, err := w.(io.ReaderFrom).ReadFrom(strings.NewReader("copied"))
			require.NoError(t, err)
		}, 200, "copied"},
		{"Unwrap", func(w http.ResponseWriter, r *http.Request) {
			u, ok := w.(interface{ Unwrap() http.ResponseWriter })
			require.True(t, ok)
			_, ok = u.Unwrap().(*httptest.ResponseRecorder)
			require.True(t, ok)
			w.WriteHeader(http.StatusCreated)
		}, 201, ""},
		{"HijackUnsupported", func(w http.ResponseWriter, r *http.Request) {
			_, _, err := w.(http.Hijacker).Hijack()
			require.ErrorIs(t, err, http.ErrNotSupported)
			w.WriteHeader(http.StatusConflict)
		}, 409, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r = r.WithContext(apierror.NewRequestIDContext(r.Context(), "req_"+tc.name))
			l.Handler(tc.handler).ServeHTTP(w, r)
			if tc.name != "EarlyHints" { // the recorder keeps the first code it sees, 103 included
				require.Equal(t, tc.status, w.Code)
			}
			require.Equal(t, tc.body, w.Body.String())
			require.NoError(t, l.Flush(context.Background()))
			e, err := store.Get(context.Background(), "", "req_"+tc.name)
			require.NoError(t, err)
			require.Equal(t, tc.status, e.Status)
		})
	}
}

// A method a client made up is not kept.
func TestMethodBounded(t *testing.T) {
	store := must(requestlog.NewMemoryStore(nil))
	l := must(requestlog.New(&requestlog.Options{Store: store, FlushInterval: time.Hour}))
	defer l.Close(context.Background())
	for i, m := range []string{"PATCH", "PROPFIND", "X-" + strings.Repeat("Y", 1000)} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Method = m
		id := "req_" + string(rune('a'+i))
		r = r.WithContext(apierror.NewRequestIDContext(r.Context(), id))
		l.Handler(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), r)
		require.NoError(t, l.Flush(context.Background()))
		e, err := store.Get(context.Background(), "", id)
		require.NoError(t, err)
		want := "_OTHER"
		if m == "PATCH" {
			want = m
		}
		require.Equal(t, want, e.Method)
	}
}

// Requests from many goroutines, while the flusher writes: every entry is written once (-race).
func TestConcurrentRequests(t *testing.T) {
	s := newService(t, &requestlog.Options{BatchSize: 7})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				r := httptest.NewRequest(http.MethodGet, "/v2/orders/ord_1", nil)
				r.Header.Set("Authorization", "Bearer "+s.keys["lic_b"].APIKey)
				s.handler.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
	wg.Wait()
	require.NoError(t, s.log.Close(context.Background()))
	require.Equal(t, requestlog.Stats{Recorded: 200, Written: 200}, s.log.Stats())
	list, more, err := s.store.List(context.Background(), requestlog.Query{Owner: owner("lic_b"), Limit: 100, Status: 404})
	require.NoError(t, err)
	require.Len(t, list, 100)
	require.True(t, more)
}

func TestNewRefusesBadOptions(t *testing.T) {
	for _, o := range []requestlog.Options{
		{Retention: -1}, {FlushInterval: -1}, {PruneInterval: -1}, {StoreTimeout: -1}, {BufferSize: -1}, {BatchSize: -1},
	} {
		_, err := requestlog.New(&o)
		require.Error(t, err, "%+v", o)
	}
	_, err := requestlog.NewMemoryStore(&requestlog.MemoryStoreOptions{MaxEntriesPerOwner: -1})
	require.Error(t, err)
	_, err = requestlog.NewRequestsHandler(nil, apikey.RequestScope, nil)
	require.Error(t, err)
	_, err = requestlog.NewRequestsHandler(must(requestlog.NewMemoryStore(nil)), nil, nil)
	require.Error(t, err)
	l := must(requestlog.New(nil))
	require.NoError(t, l.Close(context.Background()))
}

func TestZeroValues(t *testing.T) {
	ctx := context.Background()
	for _, l := range []*requestlog.Log{{}, nil} {
		w := httptest.NewRecorder()
		l.Handler(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		require.Equal(t, http.StatusInternalServerError, w.Code)
		require.False(t, l.Record(requestlog.Entry{RequestID: "req_1"}))
		require.ErrorIs(t, l.Flush(ctx), requestlog.ErrNotBuilt)
		require.ErrorIs(t, l.Close(ctx), requestlog.ErrNotBuilt)
		require.Equal(t, requestlog.Stats{}, l.Stats())
	}
	for _, s := range []*requestlog.MemoryStore{{}, nil} {
		require.ErrorIs(t, s.Insert(ctx, nil), requestlog.ErrNotBuilt)
		_, err := s.Get(ctx, "o", "req_1")
		require.ErrorIs(t, err, requestlog.ErrNotBuilt)
		_, _, err = s.List(ctx, requestlog.Query{Owner: "o", Limit: 1})
		require.ErrorIs(t, err, requestlog.ErrNotBuilt)
		_, err = s.DeleteBefore(ctx, t0, 1)
		require.ErrorIs(t, err, requestlog.ErrNotBuilt)
	}
	for _, h := range []*requestlog.RequestsHandler{{}, nil} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/requests", nil))
		require.Equal(t, http.StatusInternalServerError, w.Code)
	}
}

// The memory store bounds each owner: one owner's traffic evicts its own oldest entries only.
func TestMemoryStorePerOwnerBound(t *testing.T) {
	ctx := context.Background()
	s := must(requestlog.NewMemoryStore(&requestlog.MemoryStoreOptions{MaxEntriesPerOwner: 3}))
	require.NoError(t, s.Insert(ctx, []requestlog.Entry{{RequestID: "req_b", Owner: "b", At: t0}}))
	for i := range 10 {
		require.NoError(t, s.Insert(ctx, []requestlog.Entry{{RequestID: "req_a" + string(rune('0'+i)), Owner: "a", At: t0.Add(time.Duration(i) * time.Second)}}))
	}
	list, _, err := s.List(ctx, requestlog.Query{Owner: "a", Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{"req_a9", "req_a8", "req_a7"}, []string{list[0].RequestID, list[1].RequestID, list[2].RequestID})
	require.Len(t, list, 3)
	_, err = s.Get(ctx, "a", "req_a0")
	require.ErrorIs(t, err, requestlog.ErrNotFound)
	_, err = s.Get(ctx, "b", "req_b")
	require.NoError(t, err, "another owner's entry stays")
}

// TestBuffersTakeTurns: the flusher's buffer and Record's never alias, whatever the order of empty
// and full flushes: entries recorded while batches are written all arrive once, intact (the race
// detector watches the buffers).
func TestBuffersTakeTurns(t *testing.T) {
	store := must(requestlog.NewMemoryStore(&requestlog.MemoryStoreOptions{MaxEntriesPerOwner: 100_000}))
	l := must(requestlog.New(&requestlog.Options{Store: store, BatchSize: 8, FlushInterval: time.Hour}))
	defer l.Close(context.Background())
	ctx := context.Background()
	const writers, each = 4, 200
	for round := range 3 {
		require.NoError(t, l.Flush(ctx)) // an empty flush first: the buffer must stay Record's own
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					id := fmt.Sprintf("req_r%dw%di%03d", round, w, i)
					l.Record(requestlog.Entry{RequestID: id, Owner: "o", Method: "GET", Route: id, Status: 200, At: t0})
				}
			})
		}
		wg.Go(func() {
			for range 20 {
				_ = l.Flush(ctx)
			}
		})
		wg.Wait()
		require.NoError(t, l.Flush(ctx))
	}
	got, more, err := store.List(ctx, requestlog.Query{Owner: "o", Limit: requestlog.MaxListLimit})
	require.NoError(t, err)
	require.True(t, more)
	st := l.Stats()
	require.Equal(t, uint64(3*writers*each), st.Written)
	require.Zero(t, st.Dropped)
	for _, e := range got {
		require.Equal(t, e.RequestID, e.Route, "an entry arrived intact")
	}
	n := 0
	for q := (requestlog.Query{Owner: "o", Limit: requestlog.MaxListLimit}); ; {
		page, more, err := store.List(ctx, q)
		require.NoError(t, err)
		n += len(page)
		if !more {
			break
		}
		q.After = page[len(page)-1].RequestID
	}
	require.Equal(t, 3*writers*each, n, "every entry once")
}

// TestRecordsInProcessPrincipal: a request that reaches the log already authenticated — an in-process
// call such as the portal's, with the principal in its context and no Authorization header — is
// recorded as that principal's, so its owner finds it through the requests API.
func TestRecordsInProcessPrincipal(t *testing.T) {
	s := newService(t, nil)
	key := s.keys["lic_a"]
	p := apikey.Principal{Licensee: "lic_a", Environment: apikey.Live, KeyID: key.KeyID}
	r := httptest.NewRequestWithContext(apikey.NewContext(context.Background(), p), http.MethodGet, "/v2/orders/ord_9", nil)
	w := httptest.NewRecorder()
	s.handler.ServeHTTP(w, r)
	// The Authenticator in the chain still wants the header: the call is refused, and recorded as
	// lic_a's all the same, because the principal came with it.
	id := w.Header().Get(apierror.HeaderRequestID)
	e := s.entry(t, owner("lic_a"), id)
	require.Equal(t, "live:lic_a", e.Owner)
	require.Equal(t, key.KeyID, e.KeyID)
	require.Equal(t, "live", e.Environment)

	// A request without one is recorded with no owner, as before.
	r = httptest.NewRequest(http.MethodGet, "/v2/orders/ord_9", nil)
	w = httptest.NewRecorder()
	s.handler.ServeHTTP(w, r)
	require.Empty(t, s.entry(t, "", w.Header().Get(apierror.HeaderRequestID)).Owner)
}
