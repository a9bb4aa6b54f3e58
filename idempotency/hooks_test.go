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
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

// hookRecorder writes down every call of its hooks, in order, as a short line.
type hookRecorder struct {
	mu     sync.Mutex
	events []string
	tookOK bool // every duration seen was >= 0
}

type obsCtxKey struct{}

func (o *hookRecorder) add(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, fmt.Sprintf(format, args...))
}

func (o *hookRecorder) took(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d < 0 {
		o.tookOK = false
	}
}

func (o *hookRecorder) StoreStart(ctx context.Context, call idempotency.StoreCall) context.Context {
	o.add("store %s %s", call.Op, call.Backend)
	return context.WithValue(ctx, obsCtxKey{}, call.Op.String())
}

func (o *hookRecorder) StoreEnd(ctx context.Context, call idempotency.StoreCall, took time.Duration, err error) {
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

func (o *hookRecorder) HandlerStart(ctx context.Context) context.Context {
	o.add("handler")
	return context.WithValue(ctx, obsCtxKey{}, "handler")
}

func (o *hookRecorder) HandlerEnd(ctx context.Context, status int, took time.Duration, panicked bool) {
	if ctx.Value(obsCtxKey{}) != "handler" {
		o.add("handler end: not HandlerStart's context")
	}
	o.took(took)
	o.add("handler end %d panicked=%t", status, panicked)
}

func (o *hookRecorder) Outcome(_ context.Context, outcome idempotency.Outcome) {
	o.add("outcome %s", outcome)
}

// hooks are the recorder's methods as idempotency.Hooks.
func (o *hookRecorder) hooks() *idempotency.Hooks {
	return &idempotency.Hooks{StoreStart: o.StoreStart, StoreEnd: o.StoreEnd, HandlerStart: o.HandlerStart,
		HandlerEnd: o.HandlerEnd, Outcome: o.Outcome}
}

func (o *hookRecorder) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	ev := o.events
	o.events = nil
	return ev
}

// ran is what the Hooks see of a claimed request whose handler ran: the claim, the handler with
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

// Every decision point of the middleware tells the Hooks once, in order, with the outcome the
// client got.
func TestHooksSeeEveryDecision(t *testing.T) {
	obs := &hookRecorder{tookOK: true}
	store := &faultStore{Store: memstore.New(&memstore.Options{MaxRecordsPerScope: 3})}
	m := must(idempotency.New(&idempotency.Options{Store: store, Hooks: obs.hooks(), ReleaseServerErrors: true}))
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
	require.Equal(t, idempotency.InUse, held.Decision)
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

// FailOpen runs the handler without idempotency; the Hooks are told so.
func TestHooksFailedOpen(t *testing.T) {
	obs := &hookRecorder{tookOK: true}
	store := &faultStore{Store: memstore.New(nil)}
	store.fail(&store.claimErr, errDown)
	m := must(idempotency.New(&idempotency.Options{Store: store, Hooks: obs.hooks(), FailOpen: true}))
	require.Equal(t, http.StatusCreated, serve(m.Handler(&orders{}), req("POST", "/v1/orders", "k1", authA, order)).Code)
	require.Equal(t, []string{"store claim custom", "store claim end error", "outcome failed_open"}, obs.take())
}

// A stale owner's completion is refused: the handler ran, the outcome is lease_lost.
func TestHooksLeaseLost(t *testing.T) {
	obs := &hookRecorder{tookOK: true}
	store := &faultStore{Store: memstore.New(nil)}
	m := must(idempotency.New(&idempotency.Options{Store: store, Hooks: obs.hooks()}))
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
func TestHooksPendingCompletionAndRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &hookRecorder{tookOK: true}
		store := &outageStore{Store: memstore.New(nil)}
		m := must(idempotency.New(&idempotency.Options{Store: store, Hooks: obs.hooks(), Lease: 3 * time.Second}))
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
func TestHooksTransactional(t *testing.T) {
	obs := &hookRecorder{tookOK: true}
	tx := &txStore{records: map[driver.Key]driver.Record{}}
	m := must(idempotency.New(&idempotency.Options{Transactor: tx, Hooks: obs.hooks()}))
	var seen bool
	h := m.Handler(handlerCtxSeen(http.StatusCreated, &seen))
	require.Equal(t, http.StatusCreated, serve(h, req("POST", "/v1/orders", "k1", authA, order)).Code)
	require.True(t, seen)
	require.Equal(t, ran(201, false, "complete", "executed"), obs.take())
	tx.failNext = errDown
	require.Equal(t, http.StatusServiceUnavailable, serve(h, req("POST", "/v1/orders", "k2", authA, order)).Code)
	require.Equal(t, ran(201, false, "complete", "store_error"), obs.take())
}

// Without Hooks the middleware allocates exactly what it did before hooks existed; with hooks that
// do nothing, or with an empty Hooks, the executed request's path adds no allocation of its own.
func TestHooksCostNothingWhenUnset(t *testing.T) {
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
	require.Equal(t, without, run(&idempotency.Options{Hooks: &idempotency.Hooks{}}), "empty Hooks are no Hooks")
	require.Equal(t, without, run(&idempotency.Options{Hooks: nopHooks()}), "hooks that keep no context add no allocation")
}

// nopHooks sets every hook to one that does nothing and returns the context it gets.
func nopHooks() *idempotency.Hooks {
	return &idempotency.Hooks{
		StoreStart:   func(ctx context.Context, _ idempotency.StoreCall) context.Context { return ctx },
		StoreEnd:     func(context.Context, idempotency.StoreCall, time.Duration, error) {},
		HandlerStart: func(ctx context.Context) context.Context { return ctx },
		HandlerEnd:   func(context.Context, int, time.Duration, bool) {},
		Outcome:      func(context.Context, idempotency.Outcome) {},
	}
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

func TestEnumNames(t *testing.T) {
	var names []string
	for o := idempotency.OutcomeExecuted; o <= idempotency.OutcomeReleased+1; o++ {
		names = append(names, o.String())
	}
	require.Equal(t, []string{"executed", "replayed", "in_use", "reused", "rejected", "quota", "store_error", "failed_open", "lease_lost", "released", "unknown"}, names, "OutcomeReleased is the last")
	require.Equal(t, "unknown", idempotency.Outcome(200).String())
	require.Equal(t, "claim", idempotency.OpClaim.String())
	require.Equal(t, "renew", idempotency.OpRenew.String())
	require.Equal(t, "unknown", idempotency.StoreOp(99).String())
	require.Equal(t, []string{"execute", "replay", "in_use", "reused"}, []string{idempotency.Execute.String(),
		idempotency.Replay.String(), idempotency.InUse.String(), idempotency.Reused.String()})
	require.Equal(t, []string{"claimed", "in_flight", "completed"}, []string{driver.Claimed.String(),
		driver.InFlight.String(), driver.Completed.String()})
	// Every enum's zero value is "none", and a value this version does not know is "unknown".
	require.Equal(t, []string{"none", "none", "none", "none"}, []string{idempotency.Decision(0).String(),
		driver.Status(0).String(), idempotency.Outcome(0).String(), idempotency.StoreOp(0).String()})
	require.Equal(t, []string{"unknown", "unknown"}, []string{idempotency.Decision(9).String(), driver.Status(9).String()})
	// A Decision and the Outcome it is share a word.
	require.Equal(t, idempotency.InUse.String(), idempotency.OutcomeInUse.String())
	require.Equal(t, idempotency.Reused.String(), idempotency.OutcomeReused.String())
	require.Equal(t, "memory", memstore.New(nil).Backend())
}

// TestLastOutcomeAndStoreOp: OutcomeReleased and OpRenew are the last of their enums, the values
// otelconv sizes its tables by.
func TestLastOutcomeAndStoreOp(t *testing.T) {
	require.Equal(t, "released", idempotency.OutcomeReleased.String())
	require.Equal(t, "unknown", (idempotency.OutcomeReleased + 1).String())
	var ops []string
	for op := range idempotency.OpRenew + 2 {
		ops = append(ops, op.String())
	}
	require.Equal(t, []string{"none", "claim", "complete", "release", "renew", "unknown"}, ops)
}

// TestHooksMayBePartial: Hooks written before a field existed leave it nil, and every nil field is
// skipped — Hooks with one field set work on every path: a request executed, replayed, refused as
// reused or rejected, a handler that panics, Begin with Complete and Release, and transactional
// mode's execution and replay. Each field alone is called as often as it is with all of them set.
func TestHooksMayBePartial(t *testing.T) {
	type counts struct{ storeStart, storeEnd, handlerStart, handlerEnd, outcome int }
	// paths runs every path through middlewares built with hooks; it checks each answer.
	paths := func(t *testing.T, hooks *idempotency.Hooks) {
		t.Helper()
		ctx := context.Background()
		m := must(idempotency.New(&idempotency.Options{Hooks: hooks, Lease: time.Hour}))
		var seen bool
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = r.Context().Value(obsCtxKey{}) == "handler"
			w.WriteHeader(http.StatusCreated)
		}))
		require.Equal(t, http.StatusCreated, serve(h, req("POST", "/v1/orders", "k1", authA, order)).Code)
		require.Equal(t, hooks.HandlerStart != nil, seen, "the handler runs in HandlerStart's context, when there is one")
		replay := serve(h, req("POST", "/v1/orders", "k1", authA, order))
		require.Equal(t, http.StatusCreated, replay.Code)
		require.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed))
		requireProblem(t, serve(h, req("POST", "/v1/orders", "k1", authA, `{"other":1}`)), http.StatusUnprocessableEntity, idempotency.CodeKeyReused)
		requireProblem(t, serve(h, req("POST", "/v1/orders", "", authA, order)), http.StatusBadRequest, idempotency.CodeKeyMissing)
		panicky := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
		require.Panics(t, func() { serve(panicky, req("POST", "/v1/orders", "k2", authA, order)) })

		fp := idempotency.NewFingerprint("POST", "/x", "", [32]byte{})
		a := must(m.Begin(ctx, idempotency.Request{Scope: "s", Key: "b1", Fingerprint: fp, NoRenew: true}))
		require.Equal(t, idempotency.Execute, a.Decision)
		require.NoError(t, a.Release(ctx))
		a = must(m.Begin(ctx, idempotency.Request{Scope: "s", Key: "b2", Fingerprint: fp, NoRenew: true}))
		require.NoError(t, a.Complete(ctx, idempotency.Response{Status: http.StatusCreated}))

		tx := &txStore{records: map[driver.Key]driver.Record{}}
		mtx := must(idempotency.New(&idempotency.Options{Transactor: tx, Hooks: hooks}))
		htx := mtx.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
		require.Equal(t, http.StatusCreated, serve(htx, req("POST", "/v1/orders", "t1", authA, order)).Code)
		replay = serve(htx, req("POST", "/v1/orders", "t1", authA, order))
		require.Equal(t, http.StatusCreated, replay.Code)
		require.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed))
		require.Equal(t, 1, tx.commits, "the replay rolled back")
		require.NoError(t, m.Close(ctx))
		require.NoError(t, mtx.Close(ctx))
	}

	// With every field set, the counts each field alone must reach.
	var mu sync.Mutex
	var all counts
	count := func(n *int) { mu.Lock(); *n++; mu.Unlock() }
	full := &idempotency.Hooks{
		StoreStart: func(ctx context.Context, _ idempotency.StoreCall) context.Context { count(&all.storeStart); return ctx },
		StoreEnd:   func(context.Context, idempotency.StoreCall, time.Duration, error) { count(&all.storeEnd) },
		HandlerStart: func(ctx context.Context) context.Context {
			count(&all.handlerStart)
			return context.WithValue(ctx, obsCtxKey{}, "handler")
		},
		HandlerEnd: func(context.Context, int, time.Duration, bool) { count(&all.handlerEnd) },
		Outcome:    func(context.Context, idempotency.Outcome) { count(&all.outcome) },
	}
	paths(t, full)
	// 13 store calls: 6 claims through Handler and Begin, 3 through the Transactor, 2 completions
	// and 2 releases (the panic, Begin's Release); 3 handlers; 9 outcomes, the rejection included.
	require.Equal(t, counts{storeStart: 13, storeEnd: 13, handlerStart: 3, handlerEnd: 3, outcome: 9}, all)

	for _, tc := range []struct {
		name  string
		hooks func(n *int) *idempotency.Hooks
		want  int
	}{
		{"StoreStart", func(n *int) *idempotency.Hooks {
			return &idempotency.Hooks{StoreStart: func(ctx context.Context, _ idempotency.StoreCall) context.Context { count(n); return ctx }}
		}, all.storeStart},
		{"StoreEnd", func(n *int) *idempotency.Hooks {
			return &idempotency.Hooks{StoreEnd: func(_ context.Context, _ idempotency.StoreCall, took time.Duration, _ error) {
				if took >= 0 {
					count(n)
				}
			}}
		}, all.storeEnd},
		{"HandlerStart", func(n *int) *idempotency.Hooks {
			return &idempotency.Hooks{HandlerStart: func(ctx context.Context) context.Context {
				count(n)
				return context.WithValue(ctx, obsCtxKey{}, "handler")
			}}
		}, all.handlerStart},
		{"HandlerEnd", func(n *int) *idempotency.Hooks {
			return &idempotency.Hooks{HandlerEnd: func(_ context.Context, _ int, took time.Duration, _ bool) {
				if took >= 0 {
					count(n)
				}
			}}
		}, all.handlerEnd},
		{"Outcome", func(n *int) *idempotency.Hooks {
			return &idempotency.Hooks{Outcome: func(_ context.Context, o idempotency.Outcome) {
				if o != 0 {
					count(n)
				}
			}}
		}, all.outcome},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n int
			paths(t, tc.hooks(&n))
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, tc.want, n)
		})
	}
}

// New keeps a copy of the Hooks: a field set afterwards is not called.
func TestHooksCopiedByNew(t *testing.T) {
	var outcomes, late int
	hooks := &idempotency.Hooks{Outcome: func(context.Context, idempotency.Outcome) { outcomes++ }}
	m := must(idempotency.New(&idempotency.Options{Hooks: hooks}))
	hooks.Outcome = func(context.Context, idempotency.Outcome) { late++ }
	hooks.HandlerEnd = func(context.Context, int, time.Duration, bool) { late++ }
	require.Equal(t, http.StatusCreated, serve(m.Handler(&orders{}), req("POST", "/v1/orders", "k1", authA, order)).Code)
	require.Equal(t, []int{1, 0}, []int{outcomes, late})
}
