package redisstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
)

// storeCalls is an idempotency.Observer that writes down each store call's operation and backend.
type storeCalls struct {
	mu    sync.Mutex
	calls []string
}

func (s *storeCalls) StoreStart(ctx context.Context, c idempotency.StoreCall) context.Context {
	return ctx
}

func (s *storeCalls) StoreEnd(_ context.Context, c idempotency.StoreCall, _ time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := "ok"
	if err != nil {
		r = err.Error()
	}
	s.calls = append(s.calls, c.Op.String()+" "+c.Backend+" "+r)
}

func (s *storeCalls) HandlerStart(ctx context.Context) context.Context     { return ctx }
func (s *storeCalls) HandlerEnd(context.Context, int, time.Duration, bool) {}
func (s *storeCalls) Outcome(context.Context, idempotency.Outcome)         {}

// An observer of a middleware on Redis sees its store calls as the redis backend's.
func TestIdempotencyObserverNamesRedis(t *testing.T) {
	store, _ := newIdemStore(t)
	obs := &storeCalls{}
	m, err := idempotency.New(&idempotency.Options{Store: store, Observer: obs})
	require.NoError(t, err)
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	for range 2 {
		r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(`{}`))
		r.Header.Set("Authorization", "Bearer sk_sandbox_observer")
		r.Header.Set(idempotency.HeaderKey, "k1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, http.StatusCreated, w.Code)
	}
	require.Equal(t, []string{"claim redis ok", "complete redis ok", "claim redis ok"}, obs.calls)
}
