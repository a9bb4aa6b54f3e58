package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/webhook"
)

// recordingReceiver is a webhook consumer on loopback that keeps every delivery's verified body.
type recordingReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   [][]byte
	verifier *webhook.Verifier
}

func newRecordingReceiver(t *testing.T) *recordingReceiver {
	t.Helper()
	rc := &recordingReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err != nil || rc.verifier == nil || rc.verifier.Verify(r.Header.Get(webhook.HeaderSignature), body) != nil {
			http.Error(w, "bad signature", http.StatusBadRequest)
			return
		}
		rc.bodies = append(rc.bodies, body)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// TestTwoVersions: one licensee pinned to v1 and another pinned to v2 each see their own shape of an
// order — in the create response, in GET, in the webhook delivery and in range retrieval — and v1
// announces its deprecation, its sunset and its successor on every response.
func TestTwoVersions(t *testing.T) {
	clock := newTestClock()
	ts, _ := newWebhookServer(t, WebhookOptions{SandboxGuard: loopbackGuard()}, clock)
	ctx := context.Background()
	type licensee struct {
		version, key, member, absent string
		rc                           *recordingReceiver
		endpoint                     string
	}
	lics := []*licensee{{version: "v1", member: "side", absent: "direction"}, {version: "v2", member: "direction", absent: "side"}}
	for _, l := range lics {
		c, err := ts.IssueCredentials(ctx, apikey.Sandbox)
		require.NoError(t, err)
		l.key, l.rc = c.APIKey, newRecordingReceiver(t)
		// The first request pins the licensee to its version.
		w := ts.do("POST", "/"+l.version+"/webhook_endpoints", l.key, ts.nextKey(), `{"url":"`+l.rc.URL+`/hooks"}`)
		require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
		var ep WebhookEndpoint
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &ep))
		require.Equal(t, l.version, ep.APIVersion, "pinned to the version of its first request")
		l.endpoint = ep.ID
		v, err := webhook.NewVerifier([]string{ep.Secret}, &webhook.VerifierOptions{Now: clock.Now})
		require.NoError(t, err)
		l.rc.mu.Lock()
		l.rc.verifier = v
		l.rc.mu.Unlock()
	}

	shape := func(t *testing.T, l *licensee, body []byte) map[string]any {
		t.Helper()
		var o map[string]any
		require.NoError(t, json.Unmarshal(body, &o))
		require.Equal(t, "order", o["object"], "%s", body)
		require.Equal(t, "buy", o[l.member], "%s: %s", l.version, body)
		require.NotContains(t, o, l.absent, "%s: %s", l.version, body)
		return o
	}
	for _, l := range lics {
		t.Run(l.version, func(t *testing.T) {
			w := ts.do("POST", "/"+l.version+"/orders", l.key, ts.nextKey(), `{"account":"acc_1","`+l.member+`":"buy"}`)
			require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
			o := shape(t, l, w.Body.Bytes())
			require.Equal(t, "/"+l.version+"/orders/"+o["id"].(string), w.Header().Get("Location"))
			got := ts.do("GET", "/"+l.version+"/orders/"+o["id"].(string), l.key, "", "")
			require.Equal(t, http.StatusOK, got.Code)
			shape(t, l, got.Body.Bytes())
			require.Equal(t, l.version, got.Header().Get("X-SVC-Version"))
			if l.version == "v1" {
				require.NotEmpty(t, got.Header().Get("Deprecation"))
				sunset, err := http.ParseTime(got.Header().Get("Sunset"))
				require.NoError(t, err)
				require.True(t, sunset.After(clock.Now()))
				require.Contains(t, got.Header().Values("Link"), `</v2/orders/`+o["id"].(string)+`>; rel="successor-version"`)
			} else {
				require.Empty(t, got.Header().Get("Deprecation"))
				require.Empty(t, got.Header().Values("Link"))
			}
			// The other version's member is unknown in this version.
			other := map[string]string{"side": "direction", "direction": "side"}[l.member]
			bad := ts.do("POST", "/"+l.version+"/orders", l.key, ts.nextKey(), `{"account":"acc_1","`+other+`":"buy"}`)
			require.Equal(t, http.StatusBadRequest, bad.Code)
			require.Contains(t, bad.Body.String(), `"pointer":"/`+other+`"`)
		})
	}

	_, err := ts.DeliverDue(ctx)
	require.NoError(t, err)
	for _, l := range lics {
		t.Run(l.version+" delivery and range", func(t *testing.T) {
			l.rc.mu.Lock()
			bodies := l.rc.bodies
			l.rc.mu.Unlock()
			require.Len(t, bodies, 1)
			var ev struct {
				Object     string          `json:"object"`
				APIVersion string          `json:"api_version"`
				Data       json.RawMessage `json:"data"`
			}
			require.NoError(t, json.Unmarshal(bodies[0], &ev))
			require.Equal(t, "event", ev.Object)
			require.Equal(t, l.version, ev.APIVersion)
			shape(t, l, ev.Data)

			rg := ts.do("GET", "/"+l.version+"/webhook_endpoints/"+l.endpoint+"/events?from=1", l.key, "", "")
			require.Equal(t, http.StatusOK, rg.Code, rg.Body.String())
			var list struct {
				Data []json.RawMessage `json:"data"`
			}
			require.NoError(t, json.Unmarshal(rg.Body.Bytes(), &list))
			require.Len(t, list.Data, 1)
			require.JSONEq(t, string(bodies[0]), string(list.Data[0]), "a fetched event reads exactly as its delivery")
		})
	}

	t.Run("a production key cannot leave its pin", func(t *testing.T) {
		c, err := ts.IssueCredentials(ctx, apikey.Live)
		require.NoError(t, err)
		w := ts.do("POST", "/v2/orders", c.APIKey, ts.nextKey(), `{"account":"acc_1","direction":"sell"}`)
		require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
		w = ts.do("GET", "/v1/orders/ord_x", c.APIKey, "", "")
		p := expectProblem(t, w, http.StatusForbidden, "version_not_enabled")
		require.Equal(t, "v2", p.Extensions["pinned_version"])
	})

	t.Run("v1 answers 410 after its sunset, naming v2", func(t *testing.T) {
		sunsetAt := clock.Now().Add(V1SunsetsIn + 48*time.Hour)
		s, err := New(Config{Now: func() time.Time { return sunsetAt }, V1Sunset: sunsetAt.Add(-time.Hour),
			V1Deprecated: sunsetAt.Add(-2 * time.Hour)})
		require.NoError(t, err)
		c, err := s.IssueCredentials(ctx, apikey.Sandbox)
		require.NoError(t, err)
		late := &testServer{Server: s, key: c.APIKey}
		w := late.do("GET", "/v1/orders/ord_x", late.key, "", "")
		p := expectProblem(t, w, http.StatusGone, "version_sunset")
		require.Equal(t, "v2", p.Extensions["successor_version"])
		require.True(t, strings.Contains(w.Header().Get("Link"), "/v2/orders/ord_x"))
	})
}
