package idempotency_test

import (
	"context"
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
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

// outageStore fails every call while down, as an unreachable PostgreSQL or an OOM Redis does.
type outageStore struct {
	driver.Store
	down                     atomic.Bool
	claims, renews, complets atomic.Int64
}

func (o *outageStore) Claim(ctx context.Context, key driver.Key, fp driver.Fingerprint, now, leaseUntil, expiresAt time.Time) (driver.Claim, error) {
	o.claims.Add(1)
	if o.down.Load() {
		return driver.Claim{}, errDown
	}
	return o.Store.Claim(ctx, key, fp, now, leaseUntil, expiresAt)
}

func (o *outageStore) Renew(ctx context.Context, key driver.Key, token uint64, leaseUntil time.Time) error {
	o.renews.Add(1)
	if o.down.Load() {
		return errDown
	}
	return o.Store.Renew(ctx, key, token, leaseUntil)
}

func (o *outageStore) Complete(ctx context.Context, key driver.Key, token uint64, resp driver.Response, expiresAt time.Time) error {
	o.complets.Add(1)
	if o.down.Load() {
		return errDown
	}
	return o.Store.Complete(ctx, key, token, resp, expiresAt)
}

// Issue 13, case 1: the store fails between the claim and the completion. The owner keeps its claim,
// renewing it, and retries the completion until it lands; duplicates meanwhile get 409 (or 503 while
// the store is down), and the handler runs once. Shown for an outage shorter than the lease and for
// one three times longer, where only the two-step take-over keeps a retry from taking the key.
func TestCompleteRetriedAfterStoreOutage(t *testing.T) {
	for _, outage := range []time.Duration{5 * time.Second, 90 * time.Second} {
		t.Run(outage.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &outageStore{Store: memstore.New(nil)}
				logs := &logBuffer{}
				h := &orders{}
				m := must(idempotency.New(&idempotency.Options{Store: store, Lease: 30 * time.Second, Logger: logs.logger()}))
				mw := m.Handler(h)
				// The store goes down while the handler runs: the claim succeeded, the completion fails.
				down := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					store.down.Store(true)
					h.ServeHTTP(w, r)
				})
				first := serve(m.Handler(down), req("POST", "/v1/orders", "k1", authA, order))
				require.Equal(t, http.StatusCreated, first.Code, "the first client gets its answer")
				require.EqualValues(t, 1, m.Stats().Pending)

				// Retries during the outage cannot be decided: 503, the handler does not run.
				requireProblem(t, serve(mw, req("POST", "/v1/orders", "k1", authA, order)), http.StatusServiceUnavailable, "service_unavailable")
				time.Sleep(outage)
				store.down.Store(false)

				// The moment the store is back, before the owner's next try lands, a retry arrives: it
				// finds the key in flight (a lapsed lease is only marked), never runs the handler.
				requireProblem(t, serve(mw, req("POST", "/v1/orders", "k1", authA, order)), http.StatusConflict, idempotency.CodeKeyInUse)
				time.Sleep(2 * time.Second) // the owner's backoff is capped at 1 s
				synctest.Wait()
				require.EqualValues(t, 0, m.Stats().Pending)
				replay := serve(mw, req("POST", "/v1/orders", "k1", authA, order))
				require.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed))
				require.Equal(t, first.Body.String(), replay.Body.String())
				require.EqualValues(t, 1, h.calls.Load(), "the handler ran once")
				require.Positive(t, m.Stats().CompletionRetries)
				require.Contains(t, logs.String(), "response stored after the store recovered")
				require.NoError(t, m.Close(context.Background()))
				idle(t, m)
			})
		})
	}
}

// Close waits for pending completions while its context allows, then gives them up and says so.
func TestCloseGivesUpPendingCompletions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &outageStore{Store: memstore.New(nil)}
		logs := &logBuffer{}
		m := must(idempotency.New(&idempotency.Options{Store: store, Lease: 30 * time.Second, Logger: logs.logger()}))
		down := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			store.down.Store(true)
			w.WriteHeader(http.StatusCreated)
		})
		require.Equal(t, http.StatusCreated, serve(m.Handler(down), req("POST", "/v1/orders", "k1", authA, order)).Code)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := m.Close(ctx)
		require.ErrorContains(t, err, "gave up 1 responses")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.EqualValues(t, 0, m.Stats().Pending)
		require.Contains(t, logs.String(), "gave up storing a response at Close")
		idle(t, m)
	})
}

// Close returns at once when the store recovers within its context.
func TestCloseWaitsForPendingCompletions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &outageStore{Store: memstore.New(nil)}
		h := &orders{}
		m := must(idempotency.New(&idempotency.Options{Store: store}))
		down := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			store.down.Store(true)
			h.ServeHTTP(w, r)
		})
		serve(m.Handler(down), req("POST", "/v1/orders", "k1", authA, order))
		go func() {
			time.Sleep(3 * time.Second)
			store.down.Store(false)
		}()
		require.NoError(t, m.Close(context.Background()))
		replay := serve(m.Handler(h), req("POST", "/v1/orders", "k1", authA, order))
		require.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed))
		require.EqualValues(t, 1, h.calls.Load())
		idle(t, m)
	})
}

// hangStore's Renew of one key hangs, ignoring its context, until released: a store call stuck on a
// dead connection.
type hangStore struct {
	driver.Store
	hangKey string
	release chan struct{}
}

func (s *hangStore) Renew(ctx context.Context, key driver.Key, token uint64, leaseUntil time.Time) error {
	if key.Key == s.hangKey {
		<-s.release
		return errDown
	}
	return s.Store.Renew(ctx, key, token, leaseUntil)
}

// Issue 13, case 2: one slow renewal must not make another key lose its lease.
func TestSlowRenewalDelaysNoOtherKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New(nil)
		store := &hangStore{Store: mem, hangKey: "slow", release: make(chan struct{})}
		const lease = 30 * time.Second
		m := must(idempotency.New(&idempotency.Options{Store: store, Lease: lease}))
		done := make(chan struct{})
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-done
			w.WriteHeader(http.StatusCreated)
		})
		mw := m.Handler(h)
		var wg sync.WaitGroup
		for _, k := range []string{"slow", "fast"} {
			wg.Go(func() { serve(mw, req("POST", "/v1/orders", k, authA, order)) })
		}
		synctest.Wait()
		fast := driver.Key{Scope: idempotency.CredentialScope(authA), Key: "fast"}
		// For five leases, the fast key's lease never lapses, though the slow key's renewal hangs.
		for range 5 * lease / time.Second {
			time.Sleep(time.Second)
			rec, err := mem.Lookup(context.Background(), fast, time.Now())
			require.NoError(t, err)
			require.True(t, rec.LeaseUntil.After(time.Now()), "the fast key's lease lapsed at %v", time.Now())
		}
		close(done)
		close(store.release)
		wg.Wait()
		idle(t, m)
	})
}

// blockingStore's Claim waits for its context, as a call to a partitioned database does.
type blockingStore struct{ driver.Store }

func (blockingStore) Claim(ctx context.Context, _ driver.Key, _ driver.Fingerprint, _, _, _ time.Time) (driver.Claim, error) {
	<-ctx.Done()
	return driver.Claim{}, ctx.Err()
}

// Issue 13, case 4: every store call has a deadline; a partitioned store costs a 503 with
// Retry-After after StoreTimeout, not a hang.
func TestStoreTimeoutAnswers503(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    time.Duration
	}{
		{"default", 0, idempotency.DefaultStoreTimeout},
		{"configured", 250 * time.Millisecond, 250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := &orders{}
				m := must(idempotency.New(&idempotency.Options{Store: blockingStore{memstore.New(nil)}, StoreTimeout: tc.timeout}))
				start := time.Now()
				w := serve(m.Handler(h), req("POST", "/v1/orders", "k1", authA, order))
				require.Equal(t, tc.want, time.Since(start), "answered at the deadline (fake time)")
				requireProblem(t, w, http.StatusServiceUnavailable, "service_unavailable")
				require.Equal(t, "1", w.Header().Get("Retry-After"))
				require.Zero(t, h.calls.Load())
			})
		})
	}
}

// Issue 13, case 5: a scope over its quota gets 429 idempotency_quota_exceeded at header
// Idempotency-Key with Retry-After; other scopes are untouched; its own keys still replay.
func TestQuotaPerScope(t *testing.T) {
	h := &orders{}
	store := memstore.New(&memstore.Options{MaxRecords: 1000, MaxRecordsPerScope: 3})
	m := must(idempotency.New(&idempotency.Options{Store: store}))
	mw := m.Handler(h)
	for i := range 3 {
		require.Equal(t, http.StatusCreated, serve(mw, req("POST", "/v1/orders", "k"+itoa(int64(i)), authA, order)).Code)
	}
	w := serve(mw, req("POST", "/v1/orders", "k3", authA, order))
	p := requireProblem(t, w, http.StatusTooManyRequests, idempotency.CodeQuotaExceeded)
	require.Equal(t, "60", w.Header().Get("Retry-After"))
	require.Len(t, p.Errors, 1)
	require.Equal(t, "header", p.Errors[0].Location)
	require.Equal(t, idempotency.HeaderKey, p.Errors[0].Name)
	require.Equal(t, http.StatusCreated, serve(mw, req("POST", "/v1/orders", "k3", authB, order)).Code, "another credential is untouched")
	require.Equal(t, "true", serve(mw, req("POST", "/v1/orders", "k0", authA, order)).Header().Get(idempotency.HeaderReplayed))
	require.EqualValues(t, 4, h.calls.Load())
	require.EqualValues(t, 1, m.Stats().QuotaExceeded)
}

// Issue 13, case 5: one tenant hammering the shared default store with a key per request fills its
// own quota, and every other tenant keeps being served.
func TestNoisyNeighbourFillsOnlyItsQuota(t *testing.T) {
	h := &orders{}
	m := must(idempotency.New(&idempotency.Options{Store: memstore.New(&memstore.Options{MaxRecords: 2000})}))
	mw := m.Handler(h)
	var refused int
	for i := range 2500 {
		w := serve(mw, req("POST", "/v1/orders", "flood-"+itoa(int64(i)), authA, order))
		if w.Code == http.StatusTooManyRequests {
			refused++
		}
	}
	require.Equal(t, 2500-200, refused, "the default quota is MaxRecords/10")
	for i := range 50 {
		auth := "Bearer sk_live_tenant" + itoa(int64(i))
		require.Equal(t, http.StatusCreated, serve(mw, req("POST", "/v1/orders", "k", auth, order)).Code)
	}
}

// MaxRecords is the store's bound exactly, however the records fall on its shards.
func TestMemoryMaxRecordsExact(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := memstore.New(&memstore.Options{MaxRecords: 1000, MaxRecordsPerScope: -1})
	for i := range 1000 {
		c, err := s.Claim(ctx, driver.Key{Scope: "s" + itoa(int64(i%7)), Key: itoa(int64(i))}, driver.Fingerprint{1}, now, now.Add(time.Minute), now.Add(time.Hour))
		require.NoError(t, err, "record %d of 1000", i+1)
		require.Equal(t, driver.Claimed, c.Status)
	}
	_, err := s.Claim(ctx, driver.Key{Scope: "s", Key: "one more"}, driver.Fingerprint{1}, now, now.Add(time.Minute), now.Add(time.Hour))
	require.ErrorIs(t, err, memstore.ErrStoreFull)
	require.Equal(t, 1000, s.Len())
	// Past their retention the records make room again, found by the full sweep.
	later := now.Add(2 * time.Hour)
	_, err = s.Claim(ctx, driver.Key{Scope: "s", Key: "one more"}, driver.Fingerprint{1}, later, later.Add(time.Minute), later.Add(time.Hour))
	require.NoError(t, err)
}

// Issue 13, case 6: a handler that refused the input before doing anything marks its 4xx
// NotPerformed: nothing is stored, so the corrected retry with the same key runs.
func TestNotPerformedReleasesTheKey(t *testing.T) {
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body := make([]byte, 64)
		n, _ := r.Body.Read(body)
		if !strings.Contains(string(body[:n]), "buy") {
			require.True(t, idempotency.NotPerformed(w))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	store := memstore.New(nil)
	mw := must(idempotency.New(&idempotency.Options{Store: store})).Handler(h)
	require.Equal(t, http.StatusBadRequest, serve(mw, req("POST", "/v1/orders", "k1", authA, `{"side":"junk"}`)).Code)
	require.Zero(t, store.Len(), "junk bodies do not fill the store")
	// The same key with the corrected body runs (not 422: nothing was stored for the junk).
	require.Equal(t, http.StatusCreated, serve(mw, req("POST", "/v1/orders", "k1", authA, order)).Code)
	require.Equal(t, "true", serve(mw, req("POST", "/v1/orders", "k1", authA, order)).Header().Get(idempotency.HeaderReplayed))
	require.EqualValues(t, 2, calls.Load())
	require.False(t, idempotency.NotPerformed(httptest.NewRecorder()), "not a governed response")
}

// A NotPerformed mark on a 2xx or 5xx is ignored: those may have done something, and a wrong mark
// must never make an action run twice.
func TestNotPerformedIgnoredOutside4xx(t *testing.T) {
	for _, status := range []int{http.StatusCreated, http.StatusInternalServerError} {
		var calls atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			idempotency.NotPerformed(w)
			w.WriteHeader(status)
		})
		mw := must(idempotency.New(nil)).Handler(h)
		serve(mw, req("POST", "/v1/orders", "k1", authA, order))
		replay := serve(mw, req("POST", "/v1/orders", "k1", authA, order))
		require.Equal(t, status, replay.Code)
		require.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed))
		require.EqualValues(t, 1, calls.Load())
	}
}

// Issue 13, case 9: the auth scheme is case-insensitive, so "Bearer x" and "bearer x" are one
// credential and the second is a replay.
func TestDefaultScopeSchemeCaseInsensitive(t *testing.T) {
	h := &orders{}
	mw := must(idempotency.New(nil)).Handler(h)
	const token = "sk_sandbox_aaaaaaaaaaaaaaaa"
	require.Equal(t, http.StatusCreated, serve(mw, req("POST", "/v1/orders", "k1", "Bearer "+token, order)).Code)
	for _, auth := range []string{"bearer " + token, "BEARER " + token, "Bearer   " + token} {
		w := serve(mw, req("POST", "/v1/orders", "k1", auth, order))
		require.Equal(t, "true", w.Header().Get(idempotency.HeaderReplayed), "%q", auth)
	}
	// The credential itself stays case-sensitive.
	require.Equal(t, http.StatusCreated, serve(mw, req("POST", "/v1/orders", "k1", "Bearer "+strings.ToUpper(token), order)).Code)
	require.EqualValues(t, 2, h.calls.Load())
	require.Equal(t, idempotency.CredentialScope("Bearer x"), idempotency.CredentialScope("bEaReR x"))
	require.NotEqual(t, idempotency.CredentialScope("Bearer x"), idempotency.CredentialScope("Bearer X"))
}
