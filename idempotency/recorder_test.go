package idempotency_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

// Every path by which a handler can put bytes on the wire is captured, so the replay is the
// original byte for byte.
func TestRecorderCapturesEveryPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "payload")
	payload := strings.Repeat("file-bytes;", 5000)
	require.NoError(t, os.WriteFile(file, []byte(payload), 0o600))

	cases := []struct {
		name  string
		write func(t *testing.T, w http.ResponseWriter)
		want  string
	}{
		{"Write", func(t *testing.T, w http.ResponseWriter) {
			_, _ = w.Write([]byte("a"))
			_, _ = w.Write([]byte("b"))
		}, "ab"},
		{"WriteString", func(t *testing.T, w http.ResponseWriter) {
			_, _ = io.WriteString(w, "hello ")
			_, _ = io.WriteString(w, "world")
		}, "hello world"},
		{"ReadFrom via io.Copy", func(t *testing.T, w http.ResponseWriter) {
			_, _ = io.Copy(w, strings.NewReader(strings.Repeat("r", 100_000)))
		}, strings.Repeat("r", 100_000)},
		{"ReadFrom with a file (the sendfile path)", func(t *testing.T, w http.ResponseWriter) {
			f, err := os.Open(file)
			require.NoError(t, err)
			defer f.Close()
			_, _ = io.Copy(w, f)
		}, payload},
		{"Flush between writes", func(t *testing.T, w http.ResponseWriter) {
			_, _ = w.Write([]byte("one,"))
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte("two,"))
			require.NoError(t, http.NewResponseController(w).Flush())
			_, _ = w.Write([]byte("three"))
		}, "one,two,three"},
		{"Flush before any write sends 200", func(t *testing.T, w http.ResponseWriter) {
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte("late"))
		}, "late"},
		{"bufio over the writer", func(t *testing.T, w http.ResponseWriter) {
			bw := bufio.NewWriterSize(w, 16)
			_, _ = bw.WriteString(strings.Repeat("b", 100))
			_ = bw.Flush()
		}, strings.Repeat("b", 100)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls int
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls++
				w.Header().Set("Content-Type", "text/plain")
				tc.write(t, w)
			})
			// A real server, so that the underlying writer really has ReadFrom, Flush and Hijack.
			srv := httptest.NewServer(must(idempotency.New(nil)).Handler(h))
			defer srv.Close()
			post := func() *http.Response {
				r, err := http.NewRequest("POST", srv.URL+"/v1/things", strings.NewReader("{}"))
				require.NoError(t, err)
				r.Header.Set(idempotency.HeaderKey, "k1")
				r.Header.Set("Authorization", authA)
				resp, err := srv.Client().Do(r)
				require.NoError(t, err)
				return resp
			}
			first := post()
			body, _ := io.ReadAll(first.Body)
			first.Body.Close()
			require.Equal(t, tc.want, string(body))
			replay := post()
			rbody, _ := io.ReadAll(replay.Body)
			replay.Body.Close()
			require.Equal(t, "true", replay.Header.Get(idempotency.HeaderReplayed))
			require.Equal(t, first.StatusCode, replay.StatusCode)
			require.Equal(t, tc.want, string(rbody), "the replay must carry every byte the handler wrote")
			require.Equal(t, 1, calls)
		})
	}
}

func TestRecorderRefusesHijack(t *testing.T) {
	var hijackErr, rcErr error
	var calls int
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		_, _, hijackErr = w.(http.Hijacker).Hijack()
		_, _, rcErr = http.NewResponseController(w).Hijack()
		w.WriteHeader(http.StatusAccepted)
	})
	srv := httptest.NewServer(must(idempotency.New(nil)).Handler(h))
	defer srv.Close()
	for range 2 {
		r, _ := http.NewRequest("POST", srv.URL, nil)
		r.Header.Set(idempotency.HeaderKey, "k1")
		r.Header.Set("Authorization", authA)
		resp, err := srv.Client().Do(r)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
	}
	require.ErrorIs(t, hijackErr, idempotency.ErrHijackRefused)
	require.ErrorIs(t, rcErr, idempotency.ErrHijackRefused, "ResponseController must not unwrap past the recorder to hijack")
	require.Equal(t, 1, calls)
}

func TestRecorderUnwrap(t *testing.T) {
	var inner http.ResponseWriter
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner = w.(interface{ Unwrap() http.ResponseWriter }).Unwrap()
		w.WriteHeader(204)
	})
	w := httptest.NewRecorder()
	must(idempotency.New(nil)).Handler(h).ServeHTTP(w, req("POST", "/", "k", authA, ""))
	require.Same(t, w, inner)
}

func TestRecorderStatusHandling(t *testing.T) {
	cases := []struct {
		name       string
		handler    http.HandlerFunc
		wantStatus int
		wantBody   string
	}{
		{"nothing written is 200", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "/x")
		}, 200, ""},
		{"superfluous WriteHeader ignored", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(201)
			w.WriteHeader(500)
			_, _ = w.Write([]byte("ok"))
		}, 201, "ok"},
		{"1xx is not the response", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte("accepted"))
		}, 202, "accepted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mw := must(idempotency.New(nil)).Handler(tc.handler)
			first := serve(mw, req("POST", "/", "k", authA, ""))
			require.Equal(t, tc.wantBody, first.Body.String()) // (httptest's recorder keeps a 1xx as Code)
			replay := serve(mw, req("POST", "/", "k", authA, ""))
			require.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed))
			require.Equal(t, tc.wantStatus, replay.Code)
			require.Equal(t, tc.wantBody, replay.Body.String())
		})
	}
}

// Above MaxResponseBytes the client still gets everything, the record keeps status and headers, and
// a retry never runs the handler again.
func TestResponseOverCap(t *testing.T) {
	var calls int
	big := strings.Repeat("z", 4096)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Location", "/v1/reports/rep_1")
		w.WriteHeader(http.StatusCreated)
		for i := 0; i < len(big); i += 1000 {
			_, _ = io.WriteString(w, big[i:min(i+1000, len(big))])
		}
	})
	m := must(idempotency.New(&idempotency.Options{MaxResponseBytes: 1024}))
	mw := m.Handler(h)
	first := serve(mw, req("POST", "/v1/reports", "k", authA, ""))
	require.Equal(t, 201, first.Code)
	require.Equal(t, big, first.Body.String(), "the first response streams in full")
	replay := serve(mw, req("POST", "/v1/reports", "k", authA, ""))
	require.Equal(t, 201, replay.Code)
	require.Empty(t, replay.Body.String())
	require.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed))
	require.Equal(t, "true", replay.Header().Get(idempotency.HeaderBodyOmitted))
	require.Equal(t, "/v1/reports/rep_1", replay.Header().Get("Location"))
	require.Empty(t, replay.Header().Get("Content-Type"), "no content, no content type")
	require.Equal(t, 1, calls)
}

// A store that refuses the full response (a memory store over its byte budget) still gets a record:
// the response without its body, so that a retry does not run the handler again.
func TestCompleteFailureFallsBackToBodylessRecord(t *testing.T) {
	store := memstore.New(&memstore.Options{MaxBytes: 4 << 10, Shards: 1})
	logs := &logBuffer{}
	var calls int
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Location", "/v1/x/1")
		w.WriteHeader(201)
		_, _ = w.Write(make([]byte, 8<<10))
	})
	m := must(idempotency.New(&idempotency.Options{Store: store, Logger: logs.logger()}))
	mw := m.Handler(h)
	require.Len(t, serve(mw, req("POST", "/", "k", authA, "")).Body.Bytes(), 8<<10)
	replay := serve(mw, req("POST", "/", "k", authA, ""))
	require.Equal(t, 201, replay.Code)
	require.Equal(t, "true", replay.Header().Get(idempotency.HeaderBodyOmitted))
	require.Equal(t, "/v1/x/1", replay.Header().Get("Location"))
	require.Equal(t, 1, calls)
	require.Contains(t, logs.String(), "memory store is full")
}
