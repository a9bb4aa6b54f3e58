// Package idemobserve serves requests through an idempotency middleware on a given store and writes
// down the store calls its Hooks see: the check, shared by pgstore and redisstore, that each store
// names its backend to the Hooks.
//
// It is part of this repository's shared test infrastructure, internal/testkit, published as a
// module of its own so that the nested modules' tests (pgstore, redisstore, examples, benchmarks)
// never import the root module's internal/: that would tie each of them to one commit of the root.
package idemobserve

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
)

// storeCalls writes down each store call its StoreEnd hook sees as "op backend result".
type storeCalls struct {
	mu    sync.Mutex
	calls []string
}

func (s *storeCalls) StoreEnd(_ context.Context, c idempotency.StoreCall, _ time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	result := "ok"
	if err != nil {
		result = err.Error()
	}
	s.calls = append(s.calls, c.Op.String()+" "+c.Backend+" "+result)
}

// StoreCalls sends one request and its retry, with the same key, through a middleware on store, and
// returns the store calls the Hooks saw: a claim and a completion, then the retry's claim.
func StoreCalls(store driver.Store) ([]string, error) {
	obs := &storeCalls{}
	m, err := idempotency.New(&idempotency.Options{Store: store, Hooks: &idempotency.Hooks{StoreEnd: obs.StoreEnd}})
	if err != nil {
		return nil, err
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	for range 2 {
		r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(`{}`))
		r.Header.Set("Authorization", "Bearer sk_sandbox_observer")
		r.Header.Set(idempotency.HeaderKey, "k1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			return nil, fmt.Errorf("idemobserve: status %d: %s", w.Code, w.Body)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	return obs.calls, nil
}
