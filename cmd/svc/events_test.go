package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook/webhooktest"
)

func TestEvents(t *testing.T) {
	src := webhooktest.NewSource(testSecret, testKey, nil)
	for i := range 1205 { // more than one page of the largest size
		src.Emit(testEP, "order.created", map[string]any{"n": i})
	}
	api := httptest.NewServer(src)
	defer api.Close()
	vars := map[string]string{envAPIKey: testKey, envSecret: testSecret, envBaseURL: api.URL, envEndpoint: testEP}

	t.Run("a range, each event on a line", func(t *testing.T) {
		r := runSvc(t, vars, "", "events", "--from", "3", "--to", "5")
		require.Equal(t, exitOK, r.code, r.stderr)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 3)
		require.True(t, strings.HasPrefix(lines[0], "#3  "), lines[0])
		require.Contains(t, lines[2], `order.created  `+src.Event(testEP, 5).ID+`  {"n":4}`)
		require.Contains(t, r.stderr, "3 events from sequence 3 on we_listen, every page's signature verified")
	})
	t.Run("--json: every envelope to the newest, as a delivery carries it", func(t *testing.T) {
		r := runSvc(t, vars, "", "events", "--from", "1", "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		var want bytes.Buffer
		for _, ev := range src.Events(testEP) {
			want.Write(webhooktest.Body(ev))
			want.WriteByte('\n')
		}
		require.Equal(t, want.String(), r.stdout)
	})
	t.Run("past the newest", func(t *testing.T) {
		r := runSvc(t, vars, "", "events", "--from", "5000")
		require.Equal(t, exitOK, r.code)
		require.Empty(t, r.stdout)
		require.Contains(t, r.stderr, "no events from sequence 5000")
	})
	t.Run("a page altered after signing is refused, and none of it printed", func(t *testing.T) {
		altered := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			src.ServeHTTP(rec, r)
			body := bytes.Replace(rec.Body.Bytes(), []byte(`{"n":2}`), []byte(`{"n":9}`), 1)
			copyHeader(w.Header(), rec.Header())
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body)
		}))
		defer altered.Close()
		r := runSvc(t, map[string]string{envAPIKey: testKey, envSecret: testSecret, envBaseURL: altered.URL}, "",
			"events", "--endpoint", testEP, "--from", "1", "--to", "10")
		require.Equal(t, exitInvalid, r.code)
		require.Empty(t, r.stdout)
		require.Contains(t, r.stderr, "the events 1–10 of we_listen are not authentic")
	})
	t.Run("the server's refusal, with its problem", func(t *testing.T) {
		r := runSvc(t, vars, "", "events", "--endpoint", "we_unknown", "--from", "1")
		require.Equal(t, exitRefused, r.code)
		require.Contains(t, r.stderr, "404 Not Found")
	})
	t.Run("a server that does not answer", func(t *testing.T) {
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		r := runSvc(t, map[string]string{envAPIKey: testKey, envSecret: testSecret, envBaseURL: down.URL}, "",
			"events", "--endpoint", testEP, "--from", "1")
		require.Equal(t, exitUnavailable, r.code)
		require.Contains(t, r.stderr, "connection refused")
	})
}
