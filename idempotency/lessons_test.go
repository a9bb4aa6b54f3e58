package idempotency_test

// One test per idempotency item of LESSONS.md: the bug a peer shipped, reproduced against this
// package. Several are also covered in depth elsewhere (named in each comment).

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

// lookupCounter fails the test if the middleware ever reads a record outside of Claim.
type lookupCounter struct {
	driver.Store
	lookups atomic.Int64
}

func (l *lookupCounter) Lookup(ctx context.Context, key driver.Key, now time.Time) (driver.Record, error) {
	l.lookups.Add(1)
	return l.Store.Lookup(ctx, key, now)
}

// "Check, then lock, never re-check": the decision comes from the atomic Claim alone, so there is no
// window between a check and a lock. A duplicate arriving right after the first finished replays.
// (In depth: TestThousandRacersOneExecution, storetest ClaimRace.)
func TestLesson_NoCheckThenLock(t *testing.T) {
	store := &lookupCounter{Store: memstore.New(nil)}
	h := &orders{}
	mw := must(idempotency.New(&idempotency.Options{Store: store})).Handler(h)
	for range 3 {
		require.Equal(t, 201, serve(mw, req("POST", "/v1/orders", "k1", authA, order)).Code)
	}
	require.Zero(t, store.lookups.Load(), "the middleware must decide from Claim, never from a separate check")
	require.EqualValues(t, 1, h.calls.Load())
}

// "Unlock without an owner check": a slow first request that panics after its key was taken over
// must not release the claim the second request now holds.
func TestLesson_ReleaseNeedsOwnership(t *testing.T) {
	clk := newClock()
	started, release := make(chan struct{}), make(chan struct{})
	started2, release2 := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			close(started)
			<-release
			panic("slow first request fails late")
		case 2:
			close(started2)
			<-release2
			w.WriteHeader(201)
		}
	})
	m := must(idempotency.New(&idempotency.Options{Now: clk.Now, Lease: time.Hour}))
	mw := m.Handler(h)
	panicked := make(chan any)
	go func() {
		defer func() { panicked <- recover() }()
		serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	}()
	<-started
	clk.Advance(time.Hour) // the lease lapsed: the first retry marks the key, one after the extra lease takes it
	requireProblem(t, serve(mw, req("POST", "/v1/orders", "k1", authA, order)), 409, idempotency.CodeKeyInUse)
	clk.Advance(time.Hour)
	second := make(chan int)
	go func() { second <- serve(mw, req("POST", "/v1/orders", "k1", authA, order)).Code }()
	<-started2
	close(release)
	require.NotNil(t, <-panicked)
	// The first request's release was refused: the second still owns the key.
	requireProblem(t, serve(mw, req("POST", "/v1/orders", "k1", authA, order)), 409, idempotency.CodeKeyInUse)
	close(release2)
	require.Equal(t, 201, <-second)
	require.EqualValues(t, 2, calls.Load())
}

// "Lock TTL equal to the record TTL": a crashed request blocks its key for the lease only, not for
// the retention.
func TestLesson_LeaseIsNotRetention(t *testing.T) {
	clk := newClock()
	m := must(idempotency.New(&idempotency.Options{Now: clk.Now, Lease: 30 * time.Second, Retention: 24 * time.Hour}))
	// A process claims and dies: no renewal, no completion.
	crashed, err := m.Begin(context.Background(), idempotency.Request{Scope: "s", Key: "k1", NoRenew: true})
	require.NoError(t, err)
	require.Equal(t, idempotency.Execute, crashed.Decision)
	clk.Advance(29 * time.Second)
	a, err := m.Begin(context.Background(), idempotency.Request{Scope: "s", Key: "k1"})
	require.NoError(t, err)
	require.Equal(t, idempotency.InUse, a.Decision)
	clk.Advance(time.Second)
	mark, err := m.Begin(context.Background(), idempotency.Request{Scope: "s", Key: "k1"})
	require.NoError(t, err)
	require.Equal(t, idempotency.InUse, mark.Decision, "the first retry after the lease marks the key")
	clk.Advance(30 * time.Second)
	b, err := m.Begin(context.Background(), idempotency.Request{Scope: "s", Key: "k1"})
	require.NoError(t, err)
	require.Equal(t, idempotency.Execute, b.Decision, "the retry takes over after the lease and one more, not after a day")
	require.NoError(t, b.Complete(context.Background(), idempotency.Response{Status: 201}))
	require.ErrorIs(t, crashed.Complete(context.Background(), idempotency.Response{Status: 201}), idempotency.ErrLeaseLost)
}

// "Lease expiry then duplicates" (Powertools #8049): a handler slower than the lease runs once,
// because the lease is renewed while it runs. (In depth: TestLeaseRenewedWhileHandlerRuns.)
func TestLesson_SlowHandlerRunsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			time.Sleep(2 * time.Minute)
			w.WriteHeader(201)
		})
		m := must(idempotency.New(&idempotency.Options{Lease: 10 * time.Second}))
		mw := m.Handler(h)
		go serve(mw, req("POST", "/v1/orders", "k1", authA, order))
		time.Sleep(time.Minute)
		require.Equal(t, 409, serve(mw, req("POST", "/v1/orders", "k1", authA, order)).Code)
		time.Sleep(2 * time.Minute)
		require.Equal(t, "true", serve(mw, req("POST", "/v1/orders", "k1", authA, order)).Header().Get(idempotency.HeaderReplayed))
		require.EqualValues(t, 1, calls.Load())
		idle(t, m)
	})
}

// "Payload validation skipped on the fast path" (Powertools TS #2058, Java #2260, Python #3781): a
// different request with a known key gets 422 on every path — completed, in flight, expired lease.
func TestLesson_FingerprintOnEveryPath(t *testing.T) {
	clk := newClock()
	started, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		w.WriteHeader(201)
	})
	mw := must(idempotency.New(&idempotency.Options{Now: clk.Now, Lease: time.Hour})).Handler(h)

	serve(mw, req("POST", "/fast", "done", authA, order))
	requireProblem(t, serve(mw, req("POST", "/fast", "done", authA, `{"side":"sell"}`)), 422, idempotency.CodeKeyReused)

	done := make(chan struct{})
	go func() { serve(mw, req("POST", "/slow", "busy", authA, order)); close(done) }()
	<-started
	requireProblem(t, serve(mw, req("POST", "/slow", "busy", authA, `{"side":"sell"}`)), 422, idempotency.CodeKeyReused)
	clk.Advance(2 * time.Hour) // the lease is over: still 422, never a take-over by another request
	requireProblem(t, serve(mw, req("POST", "/slow", "busy", authA, `{"side":"sell"}`)), 422, idempotency.CodeKeyReused)
	close(release)
	<-done
}

// "All keyless requests hashed to one record" (Powertools TS #1501): a missing key is an error,
// never "" shared by everyone.
func TestLesson_MissingKeyIsAnError(t *testing.T) {
	store := memstore.New(nil)
	h := &orders{}
	mw := must(idempotency.New(&idempotency.Options{Store: store})).Handler(h)
	requireProblem(t, serve(mw, req("POST", "/v1/orders", "", authA, order)), 400, idempotency.CodeKeyMissing)
	requireProblem(t, serve(mw, req("POST", "/v1/orders", "", authB, `{}`)), 400, idempotency.CodeKeyMissing)
	r := req("POST", "/v1/orders", "", authA, order)
	r.Header[idempotency.HeaderKey] = []string{""}
	requireProblem(t, serve(mw, r), 400, idempotency.CodeKeyInvalid)
	require.Zero(t, h.calls.Load())
	require.Zero(t, store.Len())
}

// "Recorder bypass": ReadFrom (sendfile), Flush and Hijack cannot get bytes past the capture.
// (In depth: TestRecorderCapturesEveryPath, TestRecorderRefusesHijack.)
func TestLesson_RecorderCannotBeBypassed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, []byte(strings.Repeat("f", 70_000)), 0o600))
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if _, _, err := http.NewResponseController(w).Hijack(); err == nil {
			t.Error("hijack must be refused")
		}
		f, _ := os.Open(file)
		defer f.Close()
		_, _ = w.Write([]byte("head;"))
		http.NewResponseController(w).Flush()
		_, _ = io.Copy(w, f)
	})
	srv := httptest.NewServer(must(idempotency.New(nil)).Handler(h))
	defer srv.Close()
	var bodies []string
	for range 2 {
		r, _ := http.NewRequest("POST", srv.URL, nil)
		r.Header.Set(idempotency.HeaderKey, "k1")
		r.Header.Set("Authorization", authA)
		resp, err := srv.Client().Do(r)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		bodies = append(bodies, string(b))
	}
	require.Equal(t, "head;"+strings.Repeat("f", 70_000), bodies[0])
	require.Equal(t, bodies[0], bodies[1])
	require.EqualValues(t, 1, calls.Load())
}

// "Unicode keys pass a character-length check but overflow a byte limit" (hono-idempotency #93).
func TestLesson_KeyLimitsAreBytes(t *testing.T) {
	mw := must(idempotency.New(nil)).Handler(&orders{})
	require.False(t, idempotency.ValidKey(strings.Repeat("€", 85)), "85 characters, 255 bytes, not visible ASCII")
	require.False(t, idempotency.ValidKey(strings.Repeat("a", 256)))
	require.True(t, idempotency.ValidKey(strings.Repeat("a", 255)))
	requireProblem(t, serve(mw, req("POST", "/v1/orders", strings.Repeat("€", 85), authA, order)), 400, idempotency.CodeKeyInvalid)
}

// "Cross-account leaks through low-entropy keys": the same key from two credentials is two requests;
// neither ever receives the other's response.
func TestLesson_ScopedByCredential(t *testing.T) {
	h := &orders{}
	mw := must(idempotency.New(nil)).Handler(h)
	a := serve(mw, req("POST", "/v1/orders", "1", authA, `{"account":"acc_A"}`))
	b := serve(mw, req("POST", "/v1/orders", "1", authB, `{"account":"acc_B"}`))
	require.Empty(t, b.Header().Get(idempotency.HeaderReplayed))
	require.NotContains(t, b.Body.String(), "acc_A")
	require.Contains(t, serve(mw, req("POST", "/v1/orders", "1", authA, `{"account":"acc_A"}`)).Body.String(), "acc_A")
	require.Contains(t, serve(mw, req("POST", "/v1/orders", "1", authB, `{"account":"acc_B"}`)).Body.String(), "acc_B")
	require.NotEqual(t, a.Body.String(), b.Body.String())
	require.EqualValues(t, 2, h.calls.Load())
}

// "Reading the store fails → the handler runs anyway": fail closed. (In depth: TestStoreFailureFailsClosed.)
func TestLesson_StoreFailureFailsClosed(t *testing.T) {
	store := &faultStore{Store: memstore.New(nil)}
	store.fail(&store.claimErr, errDown)
	h := &orders{}
	w := serve(must(idempotency.New(&idempotency.Options{Store: store})).Handler(h), req("POST", "/v1/orders", "k1", authA, order))
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.NotEmpty(t, w.Header().Get("Retry-After"))
	require.Zero(t, h.calls.Load())
}
