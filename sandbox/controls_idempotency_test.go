package sandbox

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/webhook"
)

// idemControls is the controls behind the Authenticator and the idempotency middleware, as a server
// mounts them, with a Trigger hook that refuses (429, as a full event log) while full is set, and
// counts what it published.
type idemControls struct {
	h         http.Handler
	key       string
	mu        sync.Mutex
	full      bool
	broken    bool
	calls     int
	published int
}

func newIdemControls(t *testing.T) *idemControls {
	t.Helper()
	c := &idemControls{}
	iss := must(apikey.NewIssuer(nil, nil))
	idem, err := idempotency.New(&idempotency.Options{Scope: apikey.RequestScope})
	require.NoError(t, err)
	controls := must(NewControls(Hooks{
		Trigger: func(ctx context.Context, p apikey.Principal, req TriggerRequest) ([]Triggered, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.calls++
			switch {
			case req.Endpoint != "" && req.Endpoint != "we_1":
				return nil, ErrUnknownEndpoint
			case c.broken:
				return nil, errors.New("sandbox test: the log is down")
			case c.full:
				return nil, apierror.New(http.StatusTooManyRequests, "events_quota_exceeded",
					"the endpoint keeps as many events as it may; retry after the number of seconds in Retry-After",
					apierror.Body("/data", "events_quota_exceeded", "no room for another event")).
					WithHeader("Retry-After", apierror.RetryAfter(time.Minute))
			}
			c.published++
			return []Triggered{{Endpoint: "we_1", Event: webhook.Event{ID: "evt_1", Sequence: uint64(c.published),
				Type: req.Type, Created: 1767225600, APIVersion: "v1", Data: req.Data}}}, nil
		},
		SetFaults: func(ctx context.Context, p apikey.Principal, id string, f Faults) error {
			if id != "we_1" {
				return ErrUnknownEndpoint
			}
			return nil
		},
	}, nil))
	c.h = must(apikey.NewAuthenticator(iss, nil)).Handler(idem.Handler(controls))
	c.key = issue(t, iss, "lic_a", apikey.Sandbox).APIKey
	return c
}

func (c *idemControls) do(t *testing.T, method, path, idemKey, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, bytes.NewBufferString(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+c.key)
	r.Header.Set(idempotency.HeaderKey, idemKey)
	rec := httptest.NewRecorder()
	apierror.WithRequestID(c.h).ServeHTTP(rec, r)
	return rec
}

func (c *idemControls) counts() (calls, published int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, c.published
}

// TestControlsRefusalsReleaseTheKey: a control's answer to a request refused before anything was
// done — a hook's 4xx problem (a quota, say), invalid input, an unknown endpoint — is not stored as
// the Idempotency-Key's response: the same key retried once the cause is gone runs, and runs once.
func TestControlsRefusalsReleaseTheKey(t *testing.T) {
	t.Run("a hook's refusal", func(t *testing.T) {
		c := newIdemControls(t)
		c.full = true
		const body = `{"type":"order.created","data":{"n":1}}`
		for i := range 2 {
			rec := c.do(t, http.MethodPost, "/v1/sandbox/events", "k1", body)
			require.Equal(t, http.StatusTooManyRequests, rec.Code, rec.Body.String())
			require.NotEmpty(t, rec.Header().Get("Retry-After"))
			require.Empty(t, rec.Header().Get(idempotency.HeaderReplayed), "attempt %d: the refusal is decided again, not replayed", i+1)
		}
		calls, published := c.counts()
		require.Equal(t, 2, calls, "the hook decided each attempt")
		require.Zero(t, published)

		c.mu.Lock()
		c.full = false // retention freed room
		c.mu.Unlock()
		rec := c.do(t, http.MethodPost, "/v1/sandbox/events", "k1", body)
		require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
		require.Empty(t, rec.Header().Get(idempotency.HeaderReplayed))
		replay := c.do(t, http.MethodPost, "/v1/sandbox/events", "k1", body)
		require.Equal(t, http.StatusCreated, replay.Code, replay.Body.String())
		require.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed))
		require.Equal(t, rec.Body.String(), replay.Body.String())
		calls, published = c.counts()
		require.Equal(t, 3, calls)
		require.Equal(t, 1, published, "published once")
	})

	t.Run("a hook's failure is stored", func(t *testing.T) {
		// A 5xx may have done something: it is stored as D2 says, so the retry never runs it again.
		c := newIdemControls(t)
		c.broken = true
		rec := c.do(t, http.MethodPost, "/v1/sandbox/events", "k1", `{}`)
		require.Equal(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
		c.mu.Lock()
		c.broken = false
		c.mu.Unlock()
		replay := c.do(t, http.MethodPost, "/v1/sandbox/events", "k1", `{}`)
		require.Equal(t, http.StatusInternalServerError, replay.Code)
		require.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed))
		calls, _ := c.counts()
		require.Equal(t, 1, calls)
	})

	// Invalid input refused by the controls themselves: the corrected request reuses the key (were
	// the refusal stored, it would be 422 idempotency_key_reused: another body).
	for _, tc := range []struct {
		name, method, path, bad, good string
		badCode, goodCode             int
	}{
		{"a trigger's invalid type", http.MethodPost, "/v1/sandbox/events", `{"type":"Nope"}`, `{"type":"order.created"}`,
			http.StatusBadRequest, http.StatusCreated},
		{"a trigger to an unknown endpoint", http.MethodPost, "/v1/sandbox/events", `{"endpoint":"we_9"}`, `{"endpoint":"we_1"}`,
			http.StatusNotFound, http.StatusCreated},
		{"invalid faults", http.MethodPut, "/v1/sandbox/webhook_endpoints/we_1/faults", `{"drop":2}`, `{"drop":0.5}`,
			http.StatusBadRequest, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newIdemControls(t)
			rec := c.do(t, tc.method, tc.path, "k1", tc.bad)
			require.Equal(t, tc.badCode, rec.Code, rec.Body.String())
			rec = c.do(t, tc.method, tc.path, "k1", tc.good)
			require.Equal(t, tc.goodCode, rec.Code, rec.Body.String())
			require.Empty(t, rec.Header().Get(idempotency.HeaderReplayed))
		})
	}
	t.Run("faults of an unknown endpoint", func(t *testing.T) {
		c := newIdemControls(t)
		for range 2 {
			rec := c.do(t, http.MethodPut, "/v1/sandbox/webhook_endpoints/we_9/faults", "k1", `{"drop":0.5}`)
			require.Equal(t, http.StatusNotFound, rec.Code, rec.Body.String())
			require.Empty(t, rec.Header().Get(idempotency.HeaderReplayed))
		}
	})
}
