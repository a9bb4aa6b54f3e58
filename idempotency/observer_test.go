package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
)

// recordingObserver writes down every call, in order, as a short line.
type recordingObserver struct {
	mu     sync.Mutex
	events []string
	tookOK bool // every duration seen was >= 0
}

type obsCtxKey struct{}

func (o *recordingObserver) add(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, fmt.Sprintf(format, args...))
}

func (o *recordingObserver) took(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d < 0 {
		o.tookOK = false
	}
}

func (o *recordingObserver) StoreStart(ctx context.Context, call idempotency.StoreCall) context.Context {
	o.add("store %s %s", call.Op, call.Backend)
	return context.WithValue(ctx, obsCtxKey{}, call.Op.String())
}

func (o *recordingObserver) StoreEnd(ctx context.Context, call idempotency.StoreCall, took time.Duration, err error) {
	if ctx.Value(obsCtxKey{}) != call.Op.String() {
		o.add("store %s end: not StoreStart's context", call.Op)
	}
	o.took(took)
	result := "ok"
	switch {
	case errors.Is(err, idempotency.ErrLeaseLost):
		result = "lease_lost"
	case errors.Is(err, idempotency.ErrQuotaExceeded):
		result = "quota"
	case err != nil:
		result = "error"
	}
	o.add("store %s end %s", call.Op, result)
}

func (o *recordingObserver) HandlerStart(ctx context.Context) context.Context {
	o.add("handler")
	return context.WithValue(ctx, obsCtxKey{}, "handler")
}

func (o *recordingObserver) HandlerEnd(ctx context.Context, status int, took time.Duration, panicked bool) {
	if ctx.Value(obsCtxKey{}) != "handler" {
		o.add("handler end: not HandlerStart's context")
	}
	o.took(took)
	o.add("handler end %d panicked=%t", status, panicked)
}

func (o *recordingObserver) Outcome(_ context.Context, outcome idempotency.Outcome) {
	o.add("outcome %s", outcome)
}

func (o *recordingObserver) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	ev := o.events
	o.events = nil
	return ev
}

// ran is what an Observer sees of a claimed request whose handler ran: the claim, the handler with
// its status, the completion or release (op), and the outcome.
func ran(status int, panicked bool, op, outcome string) []string {
	return []string{
		"store claim custom", "store claim end ok",
		"handler", fmt.Sprintf("handler end %d panicked=%t", status, panicked),
		"store " + op + " custom", "store " + op + " end ok",
		"outcome " + outcome,
	}
}

// handlerCtxSeen is a handler that checks it runs in the context HandlerStart returned.
func handlerCtxSeen(status int, seen *bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*seen = r.Context().Value(obsCtxKey{}) == "handler"
		w.WriteHeader(status)
	})
}

// Every decision point of the middleware tells the Observer once, in order, with the outcome the
// client got.
func TestObserverSeesEveryDecision(t *testing.T) {
	obs := &recordingObserver{tookOK: true}
	store := &faultStore{Store: idempotency.NewMemoryStore(&idempotency.MemoryOptions{MaxRecordsPerScope: 3})}
	m := must(idempotency.New(&idempotency.Options{Store: store, Observer: obs, ReleaseServerErrors: true}))
	var seen bool
	created := m.Handler(handlerCtxSeen(http.StatusCreated, &seen))

	require.Equal(t, http.StatusCreated, serve(created, req("POST", "/v1/orders", "k1", authA, order)).Code)
	require.True(t, seen, "the handler runs in HandlerStart's context")
	require.Equal(t, ran(201, false, "complete", "executed"), obs.take())

	serve(created, req("POST", "/v1/orders", "k1", authA, order))
	require.Equal(t, []string{"store claim custom", "store claim end ok", "outcome replayed"}, obs.take())

	serve(created, req("POST", "/v1/orders", "k1", authA, `{"other":1}`))
	require.Equal(t, []string{"store claim custom", "store claim end ok", "outcome reused"}, obs.take())

	for _, r := range []*http.Request{
		req("POST", "/v1/orders", "", authA, order),         // no key
		req("POST", "/v1/orders", "bad key!", authA, order), // malformed key
		req("POST", "/v1/orders", "k2", "", order),          // no credential, no scope
	} {
		require.GreaterOrEqual(t, serve(created, r).Code, 400)
		require.Equal(t, []string{"outcome rejected"}, obs.take())
	}

	// In flight: a claim held through Begin.
	a := must(m.Begin(context.Background(), idempotency.Request{Scope: "s", Key: "k9", Fingerprint: idempotency.NewFingerprint("POST", "/x", "", [32]byte{}), NoRenew: true}))
	require.Equal(t, idempotency.Execute, a.Decision)
	obs.take()
	held := must(m.Begin(context.Background(), idempotency.Request{Scope: a.Key.Scope, Key: "k9", Fingerprint: a.Fingerprint}))
	require.Equal(t, idempotency.InProgress, held.Decision)
	require.Equal(t, []string{"store claim custom", "store claim end ok", "outcome in_use"}, obs.take())
	require.NoError(t, a.Release(context.Background()))
	require.Equal(t, []string{"store release custom", "store release end ok", "outcome released"}, obs.take())

	// A 5xx under ReleaseServerErrors is released, and so is a panic.
	failing := m.Handler(handlerCtxSeen(http.StatusBadGateway, &seen))
	require.Equal(t, http.StatusBadGateway, serve(failing, req("POST", "/v1/orders", "k3", authA, order)).Code)
	require.Equal(t, ran(502, false, "release", "released"), obs.take())
	panicky := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	require.Panics(t, func() { serve(panicky, req("POST", "/v1/orders", "k4", authA, order)) })
	require.Equal(t, ran(500, true, "release", "released"), obs.take())

	// The store fails the claim: 503, the call's error is seen.
	store.fail(&store.claimErr, errDown)
	require.Equal(t, http.StatusServiceUnavailable, serve(created, req("POST", "/v1/orders", "k5", authA, order)).Code)
	require.Equal(t, []string{"store claim custom", "store claim end error", "outcome store_error"}, obs.take())
	store.fail(&store.claimErr, nil)

	// The scope's quota of 3 records: k1 is its only live one (k3 and k4 were released, k5 never
	// claimed), so fill two more and go over.
	for _, k := range []string{"q1", "q2"} {
		require.Equal(t, http.StatusCreated, serve(created, req("POST", "/v1/orders", k, authA, order)).Code)
	}
	obs.take()
	require.Equal(t, http.StatusTooManyRequests, serve(created, req("POST", "/v1/orders", "q3", authA, order)).Code)
	require.Equal(t, []string{"store claim custom", "store claim end quota", "outcome quota"}, obs.take())

	obs.mu.Lock()
	require.True(t, obs.tookOK, "no negative duration")
	obs.mu.Unlock()
}

// FailOpen runs the handler without idempotency; the observer is told so.
func TestObserverFailedOpen(t *testing.T) {
	obs := &recordingObserver{tookOK: true}
	store := &faultStore{Store: idempotency.NewMemoryStore(nil)}
	store.fail(&store.claimErr, errDown)
	m := must(idempotency.New(&idempotency.Options{Store: store, Observer: obs, FailOpen: true}))
	require.Equal(t, http.StatusCreated, serve(m.Handler(&orders{}), req("POST", "/v1/orders", "k1", authA, order)).Code)
	require.Equal(t, []string{"store claim custom", "store claim end error", "outcome failed_open"}, obs.take())
}

// A stale owner's completion is refused: the handler ran, the outcome is lease_lost.
func TestObserverLeaseLost(t *testing.T) {
	obs := &recordingObserver{tookOK: true}
	store := &faultStore{Store: idempotency.NewMemoryStore(nil)}
	m := must(idempotency.New(&idempotency.Options{Store: store, Observer: obs}))
	fp := idempotency.NewFingerprint("POST", "/x", "", [32]byte{})
	stale := must(m.Begin(context.Background(), idempotency.Request{Scope: "s", Key: "k", Fingerprint: fp, NoRenew: true}))
	require.Equal(t, idempotency.Execute, stale.Decision)
	obs.take()
	store.fail(&store.completeErr, idempotency.ErrLeaseLost) // a newer claim took the key over
	require.ErrorIs(t, stale.Complete(context.Background(), idempotency.Response{Status: 201}), idempotency.ErrLeaseLost)
	require.Equal(t, []string{"store complete custom", "store complete end lease_lost", "outcome lease_lost"}, obs.take())
}

// A completion the store refuses is retried in the background: every try is seen, and one outcome
// when it lands. Renewals are store calls too.
func TestObserverPendingCompletionAndRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &recordingObserver{tookOK: true}
		store := &outageStore{Store: idempotency.NewMemoryStore(nil)}
		m := must(idempotency.New(&idempotency.Options{Store: store, Observer: obs, Lease: 3 * time.Second}))
		down := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			store.down.Store(true)
			w.WriteHeader(http.StatusCreated)
		})
		require.Equal(t, http.StatusCreated, serve(m.Handler(down), req("POST", "/v1/orders", "k1", authA, order)).Code)
		time.Sleep(5 * time.Second) // synctest's fake clock: renewals and retries fail meanwhile
		store.down.Store(false)
		require.NoError(t, m.Close(context.Background()))
		ev := obs.take()
		count := map[string]int{}
		for _, e := range ev {
			count[e]++
		}
		require.Equal(t, 1, count["outcome executed"], "%q", ev)
		require.Equal(t, 1, count["store complete end ok"], "%q", ev)
		require.Positive(t, count["store complete end error"], "%q", ev)
		require.Positive(t, count["store renew end error"], "%q", ev)
		require.Equal(t, count["store complete custom"], count["store complete end ok"]+count["store complete end error"])
		require.Equal(t, "outcome executed", ev[len(ev)-1])
		idle(t, m)
	})
}

// Transactional mode reports the outcome after the commit: a commit that fails is a store error,
// not an execution.
func TestObserverTransactional(t *testing.T) {
	obs := &recordingObserver{tookOK: true}
	tx := &txStore{records: map[idempotency.Key]idempotency.Record{}}
	m := must(idempotency.New(&idempotency.Options{Transactor: tx, Observer: obs}))
	var seen bool
	h := m.Handler(handlerCtxSeen(http.StatusCreated, &seen))
	require.Equal(t, http.StatusCreated, serve(h, req("POST", "/v1/orders", "k1", authA, order)).Code)
	require.True(t, seen)
	require.Equal(t, ran(201, false, "complete", "executed"), obs.take())
	tx.failNext = errDown
	require.Equal(t, http.StatusServiceUnavailable, serve(h, req("POST", "/v1/orders", "k2", authA, order)).Code)
	require.Equal(t, ran(201, false, "complete", "store_error"), obs.take())
}

// Without an Observer the middleware allocates exactly what it did before observers existed; with
// one that does nothing, the executed request's path adds no allocation of its own.
func TestObserverCostsNothingWhenUnset(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under the race detector")
	}
	run := func(opts *idempotency.Options) float64 {
		m := must(idempotency.New(opts))
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
		w := &discardWriter{h: http.Header{}}
		r := req("POST", "/v1/orders", "k", authA, order)
		i := 0
		keys := make([]string, 1000)
		for j := range keys {
			keys[j] = "key-" + itoa(int64(j))
		}
		return testing.AllocsPerRun(500, func() {
			r.Header.Set(idempotency.HeaderKey, keys[i%len(keys)])
			i++
			r.Body = http.NoBody
			h.ServeHTTP(w, r)
		})
	}
	without := run(&idempotency.Options{})
	with := run(&idempotency.Options{Observer: nopObserver{}})
	require.Equal(t, without, with, "an Observer that keeps no context adds no allocation")
}

// nopObserver does nothing and returns the context it gets.
type nopObserver struct{}

func (nopObserver) StoreStart(ctx context.Context, _ idempotency.StoreCall) context.Context {
	return ctx
}
func (nopObserver) StoreEnd(context.Context, idempotency.StoreCall, time.Duration, error) {}
func (nopObserver) HandlerStart(ctx context.Context) context.Context                      { return ctx }
func (nopObserver) HandlerEnd(context.Context, int, time.Duration, bool)                  {}
func (nopObserver) Outcome(context.Context, idempotency.Outcome)                          {}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

func TestOutcomeAndStoreOpNames(t *testing.T) {
	var names []string
	for o := idempotency.OutcomeExecuted; o < idempotency.NumOutcomes; o++ {
		names = append(names, o.String())
	}
	require.Equal(t, []string{"executed", "replayed", "in_use", "reused", "rejected", "quota", "store_error", "failed_open", "lease_lost", "released"}, names)
	require.Equal(t, "unknown", idempotency.Outcome(200).String())
	require.Equal(t, "claim", idempotency.OpClaim.String())
	require.Equal(t, "renew", idempotency.OpRenew.String())
	require.Equal(t, "unknown", idempotency.StoreOp(99).String())
	require.Equal(t, "memory", idempotency.NewMemoryStore(nil).Backend())
}

func TestNumOutcomesAndStoreOps(t *testing.T) {
	require.EqualValues(t, idempotency.OutcomeReleased+1, idempotency.NumOutcomes)
	require.EqualValues(t, idempotency.OpRenew+1, idempotency.NumStoreOps)
	require.Equal(t, "released", idempotency.Outcome(idempotency.NumOutcomes-1).String())
}
