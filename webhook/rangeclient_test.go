package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/webhooktest"
)

const apiKey = "sk_sandbox_rangeclient"

func newRangeClient(t *testing.T, baseURL string, secret string, opts *webhook.RangeClientOptions) *webhook.RangeClient {
	t.Helper()
	v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return epoch }})
	require.NoError(t, err)
	c, err := webhook.NewRangeClient(baseURL, apiKey, v, opts)
	require.NoError(t, err)
	return c
}

// recordingSource serves a Source and records the requests it saw.
type recordingSource struct {
	*webhooktest.Source
	mu   sync.Mutex
	reqs []*http.Request
}

func (s *recordingSource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r.Clone(context.Background()))
	s.mu.Unlock()
	s.Source.ServeHTTP(w, r)
}

func TestRangeClientPages(t *testing.T) {
	secret := webhook.NewSecret()
	src := &recordingSource{Source: webhooktest.NewSource(secret, apiKey, &webhooktest.SourceOptions{Now: func() time.Time { return epoch }})}
	for i := range 50 {
		src.Emit("we/odd id", "order.created", map[string]int{"n": i})
	}
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)
	c := newRangeClient(t, srv.URL+"/", secret, &webhook.RangeClientOptions{PageSize: 7, HTTPClient: srv.Client()})

	evs, err := c.FetchRange(context.Background(), "we/odd id", 3, 40)
	require.NoError(t, err)
	require.Len(t, evs, 38)
	for i, ev := range evs {
		require.Equal(t, uint64(3+i), ev.Sequence)
	}
	require.Len(t, src.reqs, 6) // 7+7+7+7+7+3
	first := src.reqs[0]
	require.Equal(t, "/v1/webhook_endpoints/we%2Fodd%20id/events", first.URL.EscapedPath())
	require.Equal(t, "3", first.URL.Query().Get("from"))
	require.Equal(t, "40", first.URL.Query().Get("to"))
	require.Equal(t, "7", first.URL.Query().Get("limit"))
	require.Equal(t, "Bearer "+apiKey, first.Header.Get("Authorization"))
	require.Equal(t, "10", src.reqs[1].URL.Query().Get("from"))

	// Past the end of the stream: what exists, and no error (the Tracker decides what is missing).
	evs, err = c.FetchRange(context.Background(), "we/odd id", 45, 60)
	require.NoError(t, err)
	require.Len(t, evs, 6)
}

func TestNewRangeClientValidates(t *testing.T) {
	v, err := webhook.NewVerifier([]string{webhook.NewSecret()}, nil)
	require.NoError(t, err)
	cases := []struct {
		name, base, key string
		v               *webhook.Verifier
		opts            *webhook.RangeClientOptions
	}{
		{"relative URL", "/v1", apiKey, v, nil},
		{"no scheme", "api.example.com", apiKey, v, nil},
		{"ftp", "ftp://api.example.com", apiKey, v, nil},
		{"query", "https://api.example.com/?x=1", apiKey, v, nil},
		{"no key", "https://api.example.com", "", v, nil},
		{"no verifier", "https://api.example.com", apiKey, nil, nil},
		{"page too big", "https://api.example.com", apiKey, v, &webhook.RangeClientOptions{PageSize: 1001}},
		{"negative page", "https://api.example.com", apiKey, v, &webhook.RangeClientOptions{PageSize: -1}},
		{"negative cap", "https://api.example.com", apiKey, v, &webhook.RangeClientOptions{MaxResponseBytes: -1}},
		{"version without v", "https://api.example.com", apiKey, v, &webhook.RangeClientOptions{APIVersion: "2"}},
		{"version with a leading zero", "https://api.example.com", apiKey, v, &webhook.RangeClientOptions{APIVersion: "v02"}},
		{"version with a path", "https://api.example.com", apiKey, v, &webhook.RangeClientOptions{APIVersion: "v2/../admin"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := webhook.NewRangeClient(tc.base, tc.key, tc.v, tc.opts)
			require.Error(t, err)
			require.Nil(t, c)
		})
	}
}

// TestRangeClientRejects serves responses a client must not trust or cannot use.
func TestRangeClientRejects(t *testing.T) {
	secret := webhook.NewSecret()
	sign := func(w http.ResponseWriter, body []byte, secrets ...string) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(webhook.HeaderSignature, webhooktest.Header(body, epoch, secrets...))
		_, _ = w.Write(body)
	}
	list := func(has bool, seqs ...uint64) []byte {
		l := webhook.EventList{Object: "list", HasMore: has, Data: []webhook.Event{}}
		for _, s := range seqs {
			l.Data = append(l.Data, webhooktest.NewEvent(s, "t", nil, epoch))
		}
		b, _ := json.Marshal(l)
		return b
	}
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    error
		status  int // of an *apierror.Error in the chain
	}{
		{"unsigned", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write(list(false, 1, 2))
		}, webhook.ErrMissingHeader, 0},
		{"signed with another secret", func(w http.ResponseWriter, r *http.Request) {
			sign(w, list(false, 1, 2), webhook.NewSecret())
		}, webhook.ErrSignatureMismatch, 0},
		{"signature of another body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(webhook.HeaderSignature, webhooktest.Header(list(false, 1), epoch, secret))
			_, _ = w.Write(list(false, 1, 2))
		}, webhook.ErrSignatureMismatch, 0},
		{"stale signature", func(w http.ResponseWriter, r *http.Request) {
			body := list(false, 1, 2)
			w.Header().Set(webhook.HeaderSignature, webhooktest.Header(body, epoch.Add(-time.Hour), secret))
			_, _ = w.Write(body)
		}, webhook.ErrTooOld, 0},
		{"not JSON", func(w http.ResponseWriter, r *http.Request) { sign(w, []byte("<html>"), secret) }, webhook.ErrRangeResponse, 0},
		{"not a list", func(w http.ResponseWriter, r *http.Request) {
			sign(w, []byte(`{"object":"event","data":[]}`), secret)
		}, webhook.ErrRangeResponse, 0},
		{"hole", func(w http.ResponseWriter, r *http.Request) { sign(w, list(false, 1, 3), secret) }, webhook.ErrRangeResponse, 0},
		{"wrong start", func(w http.ResponseWriter, r *http.Request) { sign(w, list(false, 2, 3), secret) }, webhook.ErrRangeResponse, 0},
		{"beyond to", func(w http.ResponseWriter, r *http.Request) {
			sign(w, list(false, 1, 2, 3, 4, 5, 6), secret)
		}, webhook.ErrRangeResponse, 0},
		{"more than the limit", func(w http.ResponseWriter, r *http.Request) {
			sign(w, list(true, 1, 2, 3), secret)
		}, webhook.ErrRangeResponse, 0},
		{"empty page with has_more", func(w http.ResponseWriter, r *http.Request) { sign(w, list(true), secret) }, webhook.ErrRangeResponse, 0},
		{"body over the cap", func(w http.ResponseWriter, r *http.Request) {
			sign(w, []byte(`{"object":"list","data":[],"pad":"`+strings.Repeat("x", 5000)+`"}`), secret)
		}, webhook.ErrRangeResponse, 0},
		{"problem 401", func(w http.ResponseWriter, r *http.Request) {
			apierror.Write(w, r, apierror.Unauthenticated("api_key_invalid", "the API key is not valid"))
		}, nil, http.StatusUnauthorized},
		{"problem 404", func(w http.ResponseWriter, r *http.Request) {
			apierror.Write(w, r, apierror.NotFound("webhook_endpoint_not_found", "no such endpoint"))
		}, nil, http.StatusNotFound},
		{"plain 502", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad gateway", http.StatusBadGateway)
		}, apierror.ErrNotProblem, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			t.Cleanup(srv.Close)
			c := newRangeClient(t, srv.URL, secret, &webhook.RangeClientOptions{PageSize: 2, MaxResponseBytes: 4096, HTTPClient: srv.Client()})
			evs, err := c.FetchRange(context.Background(), stream, 1, 5)
			require.Error(t, err)
			require.Nil(t, evs)
			require.NotContains(t, err.Error(), apiKey)
			require.NotContains(t, err.Error(), secret)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			if tc.status != 0 {
				var p *apierror.Error
				require.True(t, errors.As(err, &p), "%v", err)
				require.Equal(t, tc.status, p.Status)
			}
		})
	}
}

func TestRangeClientAgainstSource(t *testing.T) {
	secret := webhook.NewSecret()
	src := webhooktest.NewSource(secret, apiKey, &webhooktest.SourceOptions{Now: func() time.Time { return epoch }})
	for range 10 {
		src.Emit(stream, "order.created", nil)
	}
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)

	t.Run("injected failure is a 503 problem", func(t *testing.T) {
		c := newRangeClient(t, srv.URL, secret, &webhook.RangeClientOptions{HTTPClient: srv.Client()})
		src.FailFetches(1)
		_, err := c.FetchRange(context.Background(), stream, 1, 10)
		var p *apierror.Error
		require.True(t, errors.As(err, &p), "%v", err)
		require.Equal(t, http.StatusServiceUnavailable, p.Status)
		evs, err := c.FetchRange(context.Background(), stream, 1, 10)
		require.NoError(t, err)
		require.Len(t, evs, 10)
	})
	t.Run("wrong API key", func(t *testing.T) {
		v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return epoch }})
		require.NoError(t, err)
		c, err := webhook.NewRangeClient(srv.URL, "sk_sandbox_wrong", v, &webhook.RangeClientOptions{HTTPClient: srv.Client()})
		require.NoError(t, err)
		_, err = c.FetchRange(context.Background(), stream, 1, 10)
		var p *apierror.Error
		require.True(t, errors.As(err, &p), "%v", err)
		require.Equal(t, http.StatusUnauthorized, p.Status)
		require.NotContains(t, err.Error(), "sk_sandbox_wrong")
	})
	t.Run("invalid arguments", func(t *testing.T) {
		c := newRangeClient(t, srv.URL, secret, nil)
		for _, r := range [][2]uint64{{0, 5}, {5, 4}, {1, webhook.MaxSequence + 1}} {
			_, err := c.FetchRange(context.Background(), stream, r[0], r[1])
			require.Error(t, err, strconv.FormatUint(r[0], 10))
		}
		_, err := c.FetchRange(context.Background(), "", 1, 2)
		require.Error(t, err)
	})
	t.Run("cancelled context", func(t *testing.T) {
		c := newRangeClient(t, srv.URL, secret, &webhook.RangeClientOptions{HTTPClient: srv.Client()})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := c.FetchRange(ctx, stream, 1, 10)
		require.ErrorIs(t, err, context.Canceled)
	})
}

// A consumer pinned to v2 asks for its ranges under /v2/: under /v1/ the producer would refuse it
// (403 version_not_enabled) and a dropped event would never be recovered.
func TestRangeClientAPIVersion(t *testing.T) {
	secret := webhook.NewSecret()
	src := &recordingSource{Source: webhooktest.NewSource(secret, apiKey,
		&webhooktest.SourceOptions{Now: func() time.Time { return epoch }, APIVersion: "v2"})}
	for i := range 3 {
		src.Emit("we_1", "order.created", map[string]int{"n": i})
	}
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)

	v1 := newRangeClient(t, srv.URL, secret, &webhook.RangeClientOptions{HTTPClient: srv.Client()})
	_, err := v1.FetchRange(context.Background(), "we_1", 1, 3)
	var p *apierror.Error
	require.ErrorAs(t, err, &p, "the default, v1, is refused by a producer that pins this licensee to v2")
	require.Equal(t, "version_not_enabled", p.Code)

	v2 := newRangeClient(t, srv.URL, secret, &webhook.RangeClientOptions{HTTPClient: srv.Client(), APIVersion: "v2"})
	evs, err := v2.FetchRange(context.Background(), "we_1", 1, 3)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	require.Equal(t, "/v2/webhook_endpoints/we_1/events", src.reqs[len(src.reqs)-1].URL.Path)
}

// Every event of a page must be an event: an envelope whose "object" says otherwise is refused.
func TestRangeClientRefusesAnotherObject(t *testing.T) {
	secret := webhook.NewSecret()
	for _, tc := range []struct {
		object string
		ok     bool
	}{{`"event"`, true}, {"", true}, {`"order"`, false}} {
		member := ""
		if tc.object != "" {
			member = `"object":` + tc.object + `,`
		}
		body := `{"object":"list","data":[{` + member + `"id":"evt_1","endpoint":"we_1","sequence":1,"type":"order.created","created":1767225600,"api_version":"v1","data":{}}],"has_more":false}`
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(webhook.HeaderSignature, webhooktest.Header([]byte(body), epoch, secret))
			_, _ = w.Write([]byte(body))
		}))
		c := newRangeClient(t, srv.URL, secret, &webhook.RangeClientOptions{HTTPClient: srv.Client()})
		evs, err := c.FetchRange(context.Background(), "we_1", 1, 1)
		srv.Close()
		if tc.ok {
			require.NoError(t, err, tc.object)
			require.Len(t, evs, 1)
			continue
		}
		require.ErrorIs(t, err, webhook.ErrRangeResponse, tc.object)
	}
}
