package idempotency_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

// Of 1,000 identical requests racing on one key, exactly one runs the handler; every other gets the
// original response or 409; afterwards every retry replays the original exactly.
func TestThousandRacersOneExecution(t *testing.T) {
	for _, shards := range []int{1, 64} {
		t.Run("shards="+itoa(int64(shards)), func(t *testing.T) {
			var calls atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := calls.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Location", "/v1/orders/ord_"+itoa(n))
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"id":"ord_` + itoa(n) + `"}`))
			})
			store := memstore.New(&memstore.Options{Shards: shards})
			m := must(idempotency.New(&idempotency.Options{Store: store}))
			mw := m.Handler(h)
			const n = 1000
			results := make([]*httptest.ResponseRecorder, n)
			var start, done sync.WaitGroup
			start.Add(1)
			for i := range n {
				done.Add(1)
				go func() {
					defer done.Done()
					r := req("POST", "/v1/orders", "same-key", authA, order)
					start.Wait()
					results[i] = serve(mw, r)
				}()
			}
			start.Done()
			done.Wait()

			require.EqualValues(t, 1, calls.Load(), "exactly one execution")
			const original = `{"id":"ord_1"}`
			var executed, replayed, conflicts int
			for _, w := range results {
				switch w.Code {
				case http.StatusCreated:
					require.Equal(t, original, w.Body.String())
					require.Equal(t, "/v1/orders/ord_1", w.Header().Get("Location"))
					if w.Header().Get(idempotency.HeaderReplayed) == "true" {
						replayed++
					} else {
						executed++
					}
				case http.StatusConflict:
					var p problem
					require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
					require.Equal(t, idempotency.CodeKeyInUse, p.Code)
					require.NotEmpty(t, w.Header().Get("Retry-After"))
					conflicts++
				default:
					t.Fatalf("unexpected status %d: %s", w.Code, w.Body.String())
				}
			}
			require.Equal(t, 1, executed)
			require.Equal(t, n, executed+replayed+conflicts)
			st := m.Stats()
			require.EqualValues(t, replayed, st.Replayed)
			require.EqualValues(t, conflicts, st.Conflicts)
			for range 10 {
				w := serve(mw, req("POST", "/v1/orders", "same-key", authA, order))
				require.Equal(t, http.StatusCreated, w.Code)
				require.Equal(t, original, w.Body.String())
				require.Equal(t, "application/json", w.Header().Get("Content-Type"))
				require.Equal(t, "/v1/orders/ord_1", w.Header().Get("Location"))
				require.Equal(t, "true", w.Header().Get(idempotency.HeaderReplayed))
			}
			require.EqualValues(t, 1, calls.Load())
		})
	}
}

// A request whose process stalled past its lease is taken over by a retry, and the stale owner's
// late completion is refused: its client still gets its answer, but the record is the new owner's.
func TestLeaseExpiryTakeOverAndFencing(t *testing.T) {
	clk := newClock()
	logs := &logBuffer{}
	startedA, releaseA := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if n == 1 {
			close(startedA)
			<-releaseA // stalled: GC pause, partition, overloaded host
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("from execution " + itoa(n)))
	})
	// Renewal runs on the runtime's timers every Lease/3; with an hour's lease it never fires here,
	// so the injected clock alone decides when the lease is over.
	m := must(idempotency.New(&idempotency.Options{Now: clk.Now, Lease: time.Hour, Logger: logs.logger()}))
	mw := m.Handler(h)

	resA := make(chan *httptest.ResponseRecorder)
	go func() { resA <- serve(mw, req("POST", "/v1/orders", "k1", authA, order)) }()
	<-startedA

	clk.Advance(time.Hour - time.Second)
	requireProblem(t, serve(mw, req("POST", "/v1/orders", "k1", authA, order)), http.StatusConflict, idempotency.CodeKeyInUse)

	clk.Advance(time.Second) // the lease is over: the first retry marks the key and waits one more lease
	requireProblem(t, serve(mw, req("POST", "/v1/orders", "k1", authA, order)), http.StatusConflict, idempotency.CodeKeyInUse)
	clk.Advance(time.Hour)
	b := serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	require.Equal(t, http.StatusCreated, b.Code)
	require.Equal(t, "from execution 2", b.Body.String())

	close(releaseA)
	a := <-resA
	require.Equal(t, http.StatusCreated, a.Code)
	require.Equal(t, "from execution 1", a.Body.String(), "the stale request's client still gets its response")
	require.Contains(t, logs.String(), "stale owner's complete refused")
	require.EqualValues(t, 1, m.Stats().LeaseLost)

	c := serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	require.Equal(t, "true", c.Header().Get(idempotency.HeaderReplayed))
	require.Equal(t, "from execution 2", c.Body.String(), "the new owner's response is the record")
	require.EqualValues(t, 2, calls.Load())
}

// A handler slower than its lease keeps the key: the lease is renewed while it runs, so a retry gets
// 409, then the replay — never a second execution.
func TestLeaseRenewedWhileHandlerRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			time.Sleep(5 * time.Minute) // ten leases
			w.WriteHeader(http.StatusCreated)
		})
		m := must(idempotency.New(&idempotency.Options{Lease: 30 * time.Second}))
		mw := m.Handler(h)
		done := make(chan int)
		go func() { done <- serve(mw, req("POST", "/v1/orders", "k1", authA, order)).Code }()
		for range 9 {
			time.Sleep(31 * time.Second)
			requireProblem(t, serve(mw, req("POST", "/v1/orders", "k1", authA, order)), http.StatusConflict, idempotency.CodeKeyInUse)
		}
		require.Equal(t, http.StatusCreated, <-done)
		w := serve(mw, req("POST", "/v1/orders", "k1", authA, order))
		require.Equal(t, "true", w.Header().Get(idempotency.HeaderReplayed))
		require.EqualValues(t, 1, calls.Load())
		require.GreaterOrEqual(t, m.Stats().Renewals, uint64(29))
		idle(t, m)
	})
}

// With CancelOnLeaseLoss, when renewal finds the key taken over, the handler's context is cancelled
// with cause ErrLeaseLost.
func TestLeaseLostCancelsHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &faultStore{Store: memstore.New(nil)}
		logs := &logBuffer{}
		var cause error
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			store.fail(&store.renewErr, idempotency.ErrLeaseLost)
			<-r.Context().Done()
			cause = context.Cause(r.Context())
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		m := must(idempotency.New(&idempotency.Options{Store: store, Lease: 30 * time.Second, Logger: logs.logger(), CancelOnLeaseLoss: true}))
		start := time.Now()
		serve(m.Handler(h), req("POST", "/v1/orders", "k1", authA, order))
		require.ErrorIs(t, cause, idempotency.ErrLeaseLost)
		require.LessOrEqual(t, time.Since(start), 10*time.Second, "noticed at the first renewal, within Lease/3")
		require.Contains(t, logs.String(), "lease lost while the handler runs")
		require.GreaterOrEqual(t, m.Stats().LeaseLost, uint64(1))
		idle(t, m)
	})
}

// Renewal keeps going through transient store errors.
func TestLeaseRenewalSurvivesStoreErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &faultStore{Store: memstore.New(nil)}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			store.fail(&store.renewErr, errDown)
			time.Sleep(15 * time.Second) // one renewal fails
			store.renewErr.Store(nil)
			time.Sleep(45 * time.Second) // the next ones work
			require.NoError(t, r.Context().Err())
			w.WriteHeader(http.StatusCreated)
		})
		m := must(idempotency.New(&idempotency.Options{Store: store, Lease: 30 * time.Second}))
		require.Equal(t, 201, serve(m.Handler(h), req("POST", "/v1/orders", "k1", authA, order)).Code)
		st := m.Stats()
		// The failed renewal is tried again at the next tick, which may still fall in the fault.
		require.GreaterOrEqual(t, st.StoreErrors, uint64(1))
		require.LessOrEqual(t, st.StoreErrors, uint64(2))
		require.GreaterOrEqual(t, st.Renewals, uint64(4))
		idle(t, m)
	})
}

// A gone client does not stop the record from being completed.
func TestClientGoneStillCompletes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel()
		w.WriteHeader(http.StatusCreated)
	})
	mw := must(idempotency.New(nil)).Handler(h)
	serve(mw, req("POST", "/v1/orders", "k1", authA, order).WithContext(ctx))
	w := serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	require.Equal(t, "true", w.Header().Get(idempotency.HeaderReplayed))
	require.Equal(t, 201, w.Code)
}

func TestRetentionExpiry(t *testing.T) {
	clk := newClock()
	h := &orders{}
	mw := must(idempotency.New(&idempotency.Options{Now: clk.Now, Retention: time.Hour})).Handler(h)
	serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	clk.Advance(time.Hour - time.Millisecond)
	require.Equal(t, "true", serve(mw, req("POST", "/v1/orders", "k1", authA, order)).Header().Get(idempotency.HeaderReplayed))
	clk.Advance(time.Millisecond)
	w := serve(mw, req("POST", "/v1/orders", "k1", authA, strings.ToUpper(order)))
	require.Equal(t, 201, w.Code, "after retention the key is free, for any request")
	require.Empty(t, w.Header().Get(idempotency.HeaderReplayed))
	require.EqualValues(t, 2, h.calls.Load())
}

// idle lets a synctest bubble's time run past the renewer's next tick: with no claim in flight, its
// goroutine exits, and the bubble can end. Renewals stop with the claims: the count stays put.
func idle(t *testing.T, m *idempotency.Middleware) {
	t.Helper()
	before := m.Stats().Renewals
	time.Sleep(time.Hour)
	synctest.Wait()
	require.Equal(t, before, m.Stats().Renewals, "no renewal after the last claim ended")
}

// Renewal state is reused across requests (it lives in the pooled per-request state). Under churn —
// many short requests, each renewed several times, their state recycled while the renewer works —
// every claim keeps its lease and the race detector sees no conflict.
func TestRenewalUnderChurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			time.Sleep(20 * time.Millisecond) // several leases of work
			w.WriteHeader(http.StatusCreated)
		})
		m := must(idempotency.New(&idempotency.Options{Lease: 6 * time.Millisecond}))
		mw := m.Handler(h)
		const workers, each = 8, 25
		var wg sync.WaitGroup
		for g := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					key := "w" + itoa(int64(g)) + "-" + itoa(int64(i))
					w := serve(mw, req("POST", "/v1/orders", key, authA, order))
					require.Equal(t, http.StatusCreated, w.Code)
					// A duplicate right after: the record is there, whatever the renewer did.
					require.Equal(t, "true", serve(mw, req("POST", "/v1/orders", key, authA, order)).Header().Get(idempotency.HeaderReplayed))
				}
			}()
		}
		wg.Wait()
		st := m.Stats()
		require.EqualValues(t, workers*each, calls.Load())
		require.Zero(t, st.LeaseLost)
		require.Zero(t, st.StoreErrors)
		require.Greater(t, st.Renewals, uint64(workers*each))
		idle(t, m)
	})
}
