package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
)

// testServer is a Server in memory with a sandbox key, driven through its Handler without a network.
type testServer struct {
	*Server
	key string
	n   atomic.Int64
}

func newTestServer(t testing.TB) *testServer {
	t.Helper()
	s, err := New(Config{Now: func() time.Time { return time.Unix(1767225600, 0) },
		Webhooks: WebhookOptions{SandboxGuard: loopbackGuard()}})
	require.NoError(t, err)
	c, err := s.IssueCredentials(context.Background(), apikey.Sandbox)
	require.NoError(t, err)
	return &testServer{Server: s, key: c.APIKey}
}

func (ts *testServer) do(method, path, key, idemKey, body string) *httptest.ResponseRecorder {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, path, nil)
	} else {
		r = httptest.NewRequest(method, path, strings.NewReader(body))
	}
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	if idemKey != "" {
		r.Header.Set("Idempotency-Key", idemKey)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	ts.Handler().ServeHTTP(w, r)
	return w
}

func (ts *testServer) nextKey() string { return fmt.Sprintf("key-%d", ts.n.Add(1)) }

func TestServerInProcess(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()

	w := ts.do("POST", "/v1/orders", ts.key, "k1", `{"account":"acc_1","side":"buy"}`)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	var o Order
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &o))
	require.Equal(t, int64(1767225600), o.Created, "the injected clock stamps the order")

	replay := ts.do("POST", "/v1/orders", ts.key, "k1", `{"account":"acc_1","side":"buy"}`)
	require.Equal(t, "true", replay.Header().Get("Idempotent-Replayed"))
	require.Equal(t, w.Body.String(), replay.Body.String())

	got := ts.do("GET", "/v1/orders/"+o.ID, ts.key, "", "")
	require.Equal(t, http.StatusOK, got.Code)
	require.JSONEq(t, w.Body.String(), got.Body.String())

	st := ts.Stats()
	require.Equal(t, int64(1), st.OrdersCreated)
	require.Equal(t, uint64(1), st.Idempotency.Replayed)

	t.Run("an endpoint receives the events of later orders, rendered at its pin", func(t *testing.T) {
		w := ts.do("POST", "/v1/webhook_endpoints", ts.key, ts.nextKey(), `{"url":"http://127.0.0.1:9/hooks"}`)
		require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
		var ep WebhookEndpoint
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &ep))
		require.Equal(t, "v1", ep.APIVersion)
		ts.do("POST", "/v1/orders", ts.key, ts.nextKey(), `{"account":"acc_2","side":"sell"}`)
		evs, _, err := ts.store.Log().Range(ctx, ep.ID, 1, 10, 10)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		require.Equal(t, EventOrderCreated, evs[0].Type)
		require.Equal(t, "v2", evs[0].APIVersion, "stored at the newest version")
		require.Contains(t, string(evs[0].Data), `"direction":"sell"`)
		require.Equal(t, int64(1), ts.Stats().EventsEmitted)
		// Fetched, it is rendered at the licensee's pin, v1: "side", not "direction".
		rg := ts.do("GET", "/v1/webhook_endpoints/"+ep.ID+"/events?from=1", ts.key, "", "")
		require.Equal(t, http.StatusOK, rg.Code, rg.Body.String())
		var list struct {
			Data []struct {
				APIVersion string         `json:"api_version"`
				Data       map[string]any `json:"data"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(rg.Body.Bytes(), &list))
		require.Equal(t, "v1", list.Data[0].APIVersion)
		require.Equal(t, "sell", list.Data[0].Data["side"])
		require.NotContains(t, list.Data[0].Data, "direction")

		// The sandbox's trigger control emits through the same path.
		tr := ts.do("POST", "/v1/sandbox/events", ts.key, ts.nextKey(), `{"type":"sandbox.ping"}`)
		require.Equal(t, http.StatusCreated, tr.Code, tr.Body.String())
		evs, _, err = ts.store.Log().Range(ctx, ep.ID, 1, 10, 10)
		require.NoError(t, err)
		require.Len(t, evs, 2)
		require.Equal(t, "sandbox.ping", evs[1].Type)
	})

	t.Run("a missing principal is a wiring mistake, never an unscoped record", func(t *testing.T) {
		r := httptest.NewRequest("POST", "/orders", nil)
		_, err := ts.idempotencyScope(r)
		require.ErrorIs(t, err, apikey.ErrNoPrincipal)
	})
}

// FuzzCreateOrder feeds arbitrary bodies to POST /v1/orders: every answer is a 201 with a valid order
// or a 4xx that conforms to the error rules, never a 5xx.
func FuzzCreateOrder(f *testing.F) {
	for _, seed := range []string{
		`{"account":"acc_1","side":"buy"}`, `{}`, `{"account":5}`, `{"account":"a b","side":"x"}`,
		`{"account":"acc_1","side":"buy","x":1}`, `[`, `null`, `"str"`, `{"account":"é","side":"sell"}`,
	} {
		f.Add(seed)
	}
	ts := newTestServer(f)
	f.Fuzz(func(t *testing.T, body string) {
		w := ts.do("POST", "/v1/orders", ts.key, ts.nextKey(), body)
		switch {
		case w.Code == http.StatusCreated:
			var o struct{ Account, Side string } // v1's shape
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &o))
			require.True(t, validAccount(o.Account) && len(o.Account) >= 1 && len(o.Account) <= maxAccountLen)
			require.Contains(t, []string{SideBuy, SideSell}, o.Side)
		case w.Code >= 400 && w.Code < 500:
			require.NoError(t, apierror.Check(w.Code, w.Header(), w.Body.Bytes()), "%s", w.Body)
		default:
			t.Fatalf("status %d for body %q: %s", w.Code, body, w.Body)
		}
	})
}

func BenchmarkCreateOrder(b *testing.B) {
	ts := newTestServer(b)
	body := `{"account":"acc_1","side":"buy"}`
	b.ReportAllocs()
	for b.Loop() {
		w := ts.do("POST", "/v1/orders", ts.key, ts.nextKey(), body)
		if w.Code != http.StatusCreated {
			b.Fatal(w.Code, w.Body)
		}
	}
}

func BenchmarkReplayOrder(b *testing.B) {
	ts := newTestServer(b)
	body := `{"account":"acc_1","side":"buy"}`
	ts.do("POST", "/v1/orders", ts.key, "bench", body)
	b.ReportAllocs()
	for b.Loop() {
		if w := ts.do("POST", "/v1/orders", ts.key, "bench", body); w.Header().Get("Idempotent-Replayed") != "true" {
			b.Fatal(w.Code, w.Body)
		}
	}
}

func BenchmarkGetOrder(b *testing.B) {
	ts := newTestServer(b)
	w := ts.do("POST", "/v1/orders", ts.key, "k", `{"account":"acc_1","side":"buy"}`)
	var o Order
	require.NoError(b, json.Unmarshal(w.Body.Bytes(), &o))
	b.ReportAllocs()
	for b.Loop() {
		if w := ts.do("GET", "/v1/orders/"+o.ID, ts.key, "", ""); w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}
