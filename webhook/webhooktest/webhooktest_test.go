package webhooktest_test

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

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/webhooktest"
)

var epoch = time.Unix(1767225600, 0)

func verifier(t *testing.T, secret string) *webhook.Verifier {
	t.Helper()
	v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return epoch }})
	require.NoError(t, err)
	return v
}

func TestNewRequestIsASignedDelivery(t *testing.T) {
	secret := webhook.NewSecret()
	ev := webhooktest.NewEvent(7, "order.created", map[string]string{"id": "ord_1"}, epoch)
	require.True(t, strings.HasPrefix(ev.ID, "evt_"))
	require.Equal(t, epoch.Unix(), ev.Created)
	require.JSONEq(t, `{"id":"ord_1"}`, string(ev.Data))

	r := webhooktest.NewRequest("/hook", ev, epoch, secret)
	require.Equal(t, http.MethodPost, r.Method)
	require.Equal(t, "7", r.Header.Get(webhook.HeaderSequence))
	body, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	require.NoError(t, verifier(t, secret).Verify(r.Header.Get(webhook.HeaderSignature), body))
	got, err := webhook.DecodeEvent(body)
	require.NoError(t, err)
	require.Equal(t, ev, got)
	require.NoError(t, webhook.CheckSequence(r.Header.Get(webhook.HeaderSequence), &got))

	require.JSONEq(t, `{}`, string(webhooktest.NewEvent(1, "t", nil, epoch).Data))
}

func TestHelpersPanicOnMisuse(t *testing.T) {
	require.Panics(t, func() { webhooktest.Header([]byte("x"), epoch) })
	require.Panics(t, func() { webhooktest.Header([]byte("x"), epoch, "") })
	require.Panics(t, func() { webhooktest.NewEvent(1, "t", func() {}, epoch) })
	require.Panics(t, func() { webhooktest.NewSource("", "k", nil) })
	require.Panics(t, func() { webhooktest.NewSource(webhook.NewSecret(), "k", nil).Event("we_1", 1) })
}

func TestSourceEmitsGapFreeStreams(t *testing.T) {
	src := webhooktest.NewSource(webhook.NewSecret(), "k", nil)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				src.Emit("we_1", "t", nil)
				src.Emit("we_2", "t", nil)
			}
		}()
	}
	wg.Wait()
	for _, s := range []string{"we_1", "we_2"} {
		evs := src.Events(s)
		require.Len(t, evs, 100)
		for i, ev := range evs {
			require.Equal(t, uint64(i+1), ev.Sequence)
		}
	}
}

func TestSourceDeliver(t *testing.T) {
	secret := webhook.NewSecret()
	src := webhooktest.NewSource(secret, "k", &webhooktest.SourceOptions{Now: func() time.Time { return epoch }})
	src.Emit("we_1", "order.created", nil)
	v := verifier(t, secret)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if v.Verify(r.Header.Get(webhook.HeaderSignature), body) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	require.Equal(t, http.StatusNoContent, src.Deliver(h, "we_1", 1).Code)
	require.Equal(t, http.StatusNoContent, webhooktest.Deliver(h, src.Event("we_1", 1), epoch, secret).Code)
	require.Equal(t, http.StatusUnauthorized, webhooktest.Deliver(h, src.Event("we_1", 1), epoch, webhook.NewSecret()).Code)
}

func TestSourceRangeEndpoint(t *testing.T) {
	secret := webhook.NewSecret()
	src := webhooktest.NewSource(secret, "sk_sandbox_k", &webhooktest.SourceOptions{Now: func() time.Time { return epoch }})
	for range 30 {
		src.Emit("we_1", "t", nil)
	}
	v := verifier(t, secret)
	get := func(path string, key string) (*http.Response, []byte) {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		w := httptest.NewRecorder()
		src.ServeHTTP(w, r)
		body, _ := io.ReadAll(w.Result().Body)
		return w.Result(), body
	}

	cases := []struct {
		name    string
		path    string
		key     string
		status  int
		seqs    [2]uint64 // first, last
		hasMore bool
	}{
		{"default limit", "/v1/webhook_endpoints/we_1/events?from=1&to=30", "sk_sandbox_k", 200, [2]uint64{1, 30}, false},
		{"limited", "/v1/webhook_endpoints/we_1/events?from=5&to=30&limit=10", "sk_sandbox_k", 200, [2]uint64{5, 14}, true},
		{"exact limit", "/v1/webhook_endpoints/we_1/events?from=21&to=30&limit=10", "sk_sandbox_k", 200, [2]uint64{21, 30}, false},
		{"past the end", "/v1/webhook_endpoints/we_1/events?from=25&to=90", "sk_sandbox_k", 200, [2]uint64{25, 30}, false},
		{"no key", "/v1/webhook_endpoints/we_1/events?from=1&to=2", "", 401, [2]uint64{}, false},
		{"wrong key", "/v1/webhook_endpoints/we_1/events?from=1&to=2", "sk_sandbox_x", 401, [2]uint64{}, false},
		{"missing from", "/v1/webhook_endpoints/we_1/events?to=2", "sk_sandbox_k", 400, [2]uint64{}, false},
		{"zero from", "/v1/webhook_endpoints/we_1/events?from=0&to=2", "sk_sandbox_k", 400, [2]uint64{}, false},
		{"to before from", "/v1/webhook_endpoints/we_1/events?from=5&to=2", "sk_sandbox_k", 400, [2]uint64{}, false},
		{"limit over 1000", "/v1/webhook_endpoints/we_1/events?from=1&to=2&limit=1001", "sk_sandbox_k", 400, [2]uint64{}, false},
		{"unknown endpoint", "/v1/webhook_endpoints/we_9/events?from=1&to=2", "sk_sandbox_k", 404, [2]uint64{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(tc.path, tc.key)
			require.Equal(t, tc.status, resp.StatusCode, "%s", body)
			if tc.status != http.StatusOK {
				require.NoError(t, apierror.Check(resp.StatusCode, resp.Header, body))
				return
			}
			require.NoError(t, v.Verify(resp.Header.Get(webhook.HeaderSignature), body))
			var list webhook.EventList
			require.NoError(t, json.Unmarshal(body, &list))
			require.Equal(t, "list", list.Object)
			require.Equal(t, tc.hasMore, list.HasMore)
			require.Equal(t, tc.seqs[0], list.Data[0].Sequence)
			require.Equal(t, tc.seqs[1], list.Data[len(list.Data)-1].Sequence)
		})
	}

	t.Run("injected failures", func(t *testing.T) {
		before := src.Fetches()
		src.FailFetches(2)
		resp, _ := get("/v1/webhook_endpoints/we_1/events?from=1&to=2", "sk_sandbox_k")
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
		_, err := src.FetchRange(context.Background(), "we_1", 1, 2)
		require.ErrorIs(t, err, webhooktest.ErrInjected)
		evs, err := src.FetchRange(context.Background(), "we_1", 1, 2)
		require.NoError(t, err)
		require.Len(t, evs, 2)
		require.Equal(t, before+3, src.Fetches())
	})
}
