package storetest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/internal/testclock"
)

// OutageBackend is a store whose connections to its server pass through something the test can
// break: a fault-injecting TCP proxy, say. The zero value is not usable: RunOutage fails the test
// when Store, Cut or Restore is nil (Stall is optional).
type OutageBackend struct {
	// Store reaches the server through the breakable path.
	Store driver.Store
	// Cut makes the server unreachable (connections reset, new ones refused); Restore ends it.
	Cut, Restore func()
	// Stall, when set, keeps connections open but stops every byte (a partition that drops
	// packets); Restore ends it.
	Stall func()
}

// RunOutage checks the middleware on a real backend that fails at the worst moment: between the
// claim and the completion. The handler runs once whatever the outage's length, duplicates meanwhile
// get 503 (store down) or 409 (in flight), and the response is stored once the store is back. With
// Stall, a stalled store costs a 503 after StoreTimeout instead of a hang. newBackend is called once
// per subtest.
func RunOutage(t *testing.T, newBackend func(t *testing.T) OutageBackend) {
	t.Helper()
	for _, tc := range []struct {
		name   string
		outage time.Duration // of the injected clock: longer than the lease or not
	}{{"ShorterThanLease", 5 * time.Second}, {"LongerThanLease", 3 * replicaLease}} {
		t.Run("CompleteAfter"+tc.name, func(t *testing.T) { testOutage(t, outageBackend(t, newBackend), tc.outage) })
	}
	t.Run("StalledStoreAnswers503", func(t *testing.T) {
		b := outageBackend(t, newBackend)
		if b.Stall == nil {
			t.Skip("the backend has no Stall")
		}
		var runs atomic.Int32
		m := newMiddleware(t, &idempotency.Options{Store: b.Store, StoreTimeout: 300 * time.Millisecond,
			Scope: func(*http.Request) (string, error) { return "outage", nil }})
		b.Stall()
		defer b.Restore()
		w := httptest.NewRecorder()
		m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { runs.Add(1) })).
			ServeHTTP(w, outageRequest(randid.New("key_")))
		check.Equal(t, http.StatusServiceUnavailable, w.Code, w.Body.String())
		check.True(t, w.Header().Get("Retry-After") != "", "a 503 without Retry-After")
		check.Equal(t, 0, runs.Load())
	})
}

// outageBackend builds a subtest's backend and fails the test when a required member is missing: a
// nil Store would test the middleware's default in-memory store instead of the backend.
func outageBackend(t *testing.T, newBackend func(t *testing.T) OutageBackend) OutageBackend {
	t.Helper()
	b := newBackend(t)
	if b.Store == nil || b.Cut == nil || b.Restore == nil {
		t.Fatal("storetest: OutageBackend.Store, OutageBackend.Cut and OutageBackend.Restore are required")
	}
	return b
}

func outageRequest(key string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(`{"side":"buy"}`))
	r.Header.Set(idempotency.HeaderKey, key)
	return r
}

func testOutage(t *testing.T, b OutageBackend, outage time.Duration) {
	clock := testclock.New(time.Now().UTC())
	var runs atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		b.Cut() // the store fails after the claim, while the work is being done
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"ord_1"}`)
	})
	m := newMiddleware(t, &idempotency.Options{Store: b.Store, Now: clock.Now, Lease: replicaLease,
		StoreTimeout: 2 * time.Second, Scope: func(*http.Request) (string, error) { return "outage", nil }})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	h := m.Handler(handler)
	key := randid.New("key_")
	serve := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, outageRequest(key))
		return w
	}

	first := serve()
	check.Equal(t, http.StatusCreated, first.Code)
	check.Equal(t, 1, m.Stats().Pending, "the completion is pending")
	check.Equal(t, http.StatusServiceUnavailable, serve().Code, "a retry during the outage is not decided")

	clock.Advance(outage)
	b.Restore()
	// Right after the store is back a retry may land before the owner's next try: it never runs the
	// handler (in flight, or the lapsed lease only marked), and the owner's try then lands.
	// No deadline of its own: a completion that never lands is a hang that go test's -timeout reports,
	// and a busy machine only makes the loop longer.
	for m.Stats().Pending > 0 {
		w := serve()
		if !slices.Contains([]int{http.StatusConflict, http.StatusServiceUnavailable, http.StatusCreated}, w.Code) {
			t.Fatalf("a retry right after the outage got %d %s, want 409, 503 or a replayed 201", w.Code, w.Body.String())
		}
		if w.Code == http.StatusCreated {
			check.Equal(t, "true", w.Header().Get(idempotency.HeaderReplayed))
		}
		time.Sleep(20 * time.Millisecond) // polling for the background completion, not timing it
	}
	replay := serve()
	check.Equal(t, http.StatusCreated, replay.Code)
	check.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed))
	check.Equal(t, first.Body.String(), replay.Body.String())
	check.Equal(t, 1, runs.Load(), "the handler ran once")
}
