package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/internal/check"
	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/internal/testclock"
)

// The exactly-once test: replicaKeys keys, each sent replicaDups times at once, spread over two
// replicas (two http servers, each with its own middleware) that share one backend.
const (
	replicaKeys = 100
	replicaDups = 50
	// replicaWave keys are in flight at a time: 500 concurrent requests, enough to race every key
	// hard while transactional handlers' connections still leave a pool room for their duplicates.
	replicaWave = 10
	// replicaLease is the lease of the owner-killed test.
	replicaLease = 30 * time.Second
)

// ReplicaConfig describes a real backend to RunReplicas. The zero value is not usable: RunReplicas
// fails the test when Modes is empty.
type ReplicaConfig struct {
	// Modes are the ways a replica's middleware can use the backend (a Store; a Transactor). Every
	// test runs once per mode, as a subtest named after it.
	Modes []ReplicaMode
}

// ReplicaMode is one way replicas use the backend. The zero value is not usable: each test fails
// when Setup is nil, and StoreOutage when Unreachable is.
type ReplicaMode struct {
	// Name names the mode's subtests.
	Name string
	// Setup prepares an empty shared backend for one test (its own schema or key prefix, cleaned up
	// by the test) and returns it.
	Setup func(t *testing.T) ReplicaBackend
	// Unreachable returns one replica's options on a backend that cannot be reached (a closed port),
	// for the store-outage test. It must leave the real server alone.
	Unreachable func(t *testing.T) *idempotency.Options
}

// ReplicaBackend is one test's shared backend. The zero value is not usable: each test fails when
// Options or Store is nil, and a transactional mode when WriteOrder or OrderCounts is.
type ReplicaBackend struct {
	// Options returns a fresh Options for one more replica on the shared backend: Store set, or
	// Transactor for a transactional mode. The tests set Now, Lease and StoreTimeout themselves.
	Options func() *idempotency.Options
	// Store reads and writes the shared records directly: the tests look records up and present a
	// dead owner's token with it.
	Store driver.Store
	// WriteOrder is the handler's own write in a transactional mode: it records one order for key in
	// the request's transaction (found in r's context). Required when Options sets a Transactor.
	WriteOrder func(r *http.Request, key, run string) error
	// OrderCounts returns the committed orders per key. Required with WriteOrder.
	OrderCounts func(t *testing.T) map[string]int
}

// RunReplicas runs the exactly-once tests against a real backend shared by several replicas:
//
//   - ExactlyOnceAcrossReplicas: 100 keys × 50 concurrent requests over two replicas; every key's
//     handler runs exactly once, every answer is the original response or 409 in use, and afterwards
//     every retry at either replica replays the identical body (in a transactional mode, exactly one
//     order per key committed);
//   - OwnerKilled: the replica that owns a key dies mid-request, after its handler called an outside
//     system; duplicates get 409 until its claim is over (the lease, or the rollback), then
//     concurrent retries at the survivors run the handler exactly once, and the dead owner's late
//     completion is refused; the handler's second call to the outside system carries the same
//     idempotency.DownstreamKey as the dead owner's, so the outside effect happens once;
//   - StoreOutage: with the backend unreachable the answer is 503 with Retry-After and the handler
//     does not run.
//
// Replicas share an injected clock, so leases end when the test says so; nothing sleeps. What they
// assert are counts and answers, never speed: no wait in them has a wall-clock deadline of its own
// (the store calls' StoreTimeout lasts until the test binary's -timeout), so a busy machine makes
// them slower, never red, and a hang is reported by go test's -timeout. A backend client's own
// timeouts (a pool's wait, a read deadline) are its Setup's to lift the same way.
func RunReplicas(t *testing.T, cfg ReplicaConfig) {
	t.Helper()
	if len(cfg.Modes) == 0 {
		t.Fatal("storetest: ReplicaConfig.Modes is empty, want at least one mode")
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, mode ReplicaMode)
	}{
		{"ExactlyOnceAcrossReplicas", testExactlyOnceAcrossReplicas},
		{"OwnerKilled", testOwnerKilled},
		{"StoreOutage", testStoreOutage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range cfg.Modes {
				t.Run(mode.Name, func(t *testing.T) { tc.fn(t, mode) })
			}
		})
	}
}

// setup prepares a mode's backend and reports whether it is transactional.
func (mode ReplicaMode) setup(t *testing.T) (ReplicaBackend, bool) {
	t.Helper()
	if mode.Setup == nil {
		t.Fatalf("storetest: mode %q: ReplicaMode.Setup is required", mode.Name)
	}
	b := mode.Setup(t)
	if b.Options == nil || b.Store == nil {
		t.Fatalf("storetest: mode %q: ReplicaBackend.Options and ReplicaBackend.Store are required", mode.Name)
	}
	tx := b.Options().Transactor != nil
	if tx && (b.WriteOrder == nil || b.OrderCounts == nil) {
		t.Fatalf("storetest: mode %q is transactional: ReplicaBackend.WriteOrder and ReplicaBackend.OrderCounts are required", mode.Name)
	}
	return b, tx
}

// replicaResult is what a client saw.
type replicaResult struct {
	status   int
	body     string
	replayed bool
	code     string // problem code
	retry    string // Retry-After
	err      error
}

// replicaAuth is the credential every test request carries.
const replicaAuth = "Bearer sk_sandbox_replicas"

// replicaPost sends the order request for key i to url.
func replicaPost(ctx context.Context, client *http.Client, url string, i int) replicaResult {
	body := fmt.Sprintf(`{"account":"acc_%d","side":"buy"}`, i)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/orders", strings.NewReader(body))
	if err != nil {
		return replicaResult{err: err}
	}
	req.Header.Set("Authorization", replicaAuth)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idempotency.HeaderKey, replicaKeyName(i))
	resp, err := client.Do(req)
	if err != nil {
		return replicaResult{err: err}
	}
	defer resp.Body.Close()
	r := replicaResult{status: resp.StatusCode, replayed: resp.Header.Get(idempotency.HeaderReplayed) == "true", retry: resp.Header.Get("Retry-After")}
	if resp.Header.Get("Content-Type") == apierror.MediaType {
		p, err := apierror.Parse(resp)
		if err != nil {
			return replicaResult{err: err}
		}
		r.code = p.Code
		return r
	}
	b, err := io.ReadAll(resp.Body)
	r.body, r.err = string(b), err
	return r
}

func replicaKeyName(i int) string { return fmt.Sprintf("order-%03d", i) }

func replicaKeyIndex(t *testing.T, r *http.Request) int {
	i, err := strconv.Atoi(strings.TrimPrefix(r.Header.Get(idempotency.HeaderKey), "order-"))
	if err != nil || i < 0 || i >= replicaKeys {
		t.Errorf("unexpected key %q", r.Header.Get(idempotency.HeaderKey))
		return 0
	}
	return i
}

// replicaHTTPClient has no Timeout: an owner's request waits for all its duplicates, which takes as
// long as the machine makes it take; the requests' context (the test's) and go test's -timeout bound it.
func replicaHTTPClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 2 * replicaWave * replicaDups}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// patience is how long a wait may last in a test that asserts what happened, not how fast: most of
// what is left before the test binary's -timeout, or an hour without one. It is the replicas'
// StoreTimeout, so that on a busy machine a slow store call makes the test slower instead of
// answering a 503 that fails a count.
func patience(t *testing.T) time.Duration {
	if deadline, ok := t.Deadline(); ok {
		return max(time.Until(deadline)*9/10, time.Second)
	}
	return time.Hour
}

// replicaScope is the middleware's default scope for an Authorization value.
func replicaScope(auth string) string { return idempotency.CredentialScope(auth) }

func testExactlyOnceAcrossReplicas(t *testing.T, mode ReplicaMode) {
	b, tx := mode.setup(t)
	ctx := t.Context()
	clock := testclock.New(time.Now().UTC())

	var (
		runs     [replicaKeys]atomic.Int32
		original [replicaKeys]atomic.Pointer[string]
		answered [replicaKeys]atomic.Int32
		others   [replicaKeys]chan struct{} // closed when every duplicate but the owner's is answered
	)
	for i := range others {
		others[i] = make(chan struct{})
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := replicaKeyIndex(t, r)
		runs[i].Add(1)
		run := randid.New("run_")
		if tx {
			if err := b.WriteOrder(r, replicaKeyName(i), run); err != nil {
				t.Error(err)
				http.Error(w, "order write failed", http.StatusInternalServerError)
				return
			}
		}
		// Even keys hold the claim until all their duplicates were answered, so every one of them
		// meets it in flight; odd keys finish at once, so duplicates also meet the record completed.
		// No deadline: on a busy machine answering 49 duplicates takes what it takes. A duplicate that
		// is never answered is a hang that go test's -timeout reports; the test's end releases the
		// handler so that the servers can close.
		if i%2 == 0 {
			select {
			case <-others[i]:
			case <-ctx.Done():
				return
			}
		}
		body := fmt.Sprintf(`{"id":"ord_%d","run":%q}`, i, run)
		original[i].Store(&body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/orders/ord_"+strconv.Itoa(i))
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body)
	})
	var servers [2]*httptest.Server
	for n := range servers {
		o := b.Options()
		o.Now, o.StoreTimeout = clock.Now, patience(t)
		servers[n] = httptest.NewServer(newMiddleware(t, o).Handler(handler))
		t.Cleanup(servers[n].Close)
	}
	client := replicaHTTPClient(t)

	results := make([][]replicaResult, replicaKeys)
	for wave := 0; wave < replicaKeys; wave += replicaWave {
		var wg sync.WaitGroup
		for i := wave; i < wave+replicaWave; i++ {
			results[i] = make([]replicaResult, replicaDups)
			for j := range replicaDups {
				wg.Go(func() {
					res := replicaPost(ctx, client, servers[j%2].URL, i)
					results[i][j] = res
					if res.status != http.StatusCreated || res.replayed {
						if answered[i].Add(1) == replicaDups-1 {
							close(others[i])
						}
					}
				})
			}
		}
		wg.Wait()
	}

	for i := range replicaKeys {
		check.Equal(t, 1, runs[i].Load(), "key %d: handler runs", i)
		body := original[i].Load()
		check.NotEqual(t, nil, body, "key %d: the handler stored no original response", i)
		fresh := 0
		for _, res := range results[i] {
			check.NoError(t, res.err)
			switch res.status {
			case http.StatusCreated:
				check.Equal(t, *body, res.body, "key %d: a 201 that is not the original", i)
				if !res.replayed {
					fresh++
				}
			case http.StatusConflict:
				check.Equal(t, idempotency.CodeKeyInUse, res.code)
				check.True(t, res.retry != "", "key %d: a 409 without Retry-After", i)
			default:
				t.Fatalf("key %d: unexpected answer %+v", i, res)
			}
		}
		check.Equal(t, 1, fresh, "key %d: exactly one fresh answer", i)
		if i%2 == 0 {
			check.Equal(t, replicaDups-1, answered[i].Load(), "key %d: all duplicates met the claim in flight", i)
		}
	}
	// After completion every retry, at either replica, replays the identical body.
	for i := range replicaKeys {
		for _, srv := range servers {
			res := replicaPost(ctx, client, srv.URL, i)
			check.NoError(t, res.err, "key %d: a retry after completion", i)
			check.Equal(t, http.StatusCreated, res.status, "key %d: a retry after completion", i)
			check.True(t, res.replayed, "key %d: a retry after completion is not marked %s", i, idempotency.HeaderReplayed)
			check.Equal(t, *original[i].Load(), res.body, "key %d: a retry after completion", i)
		}
		check.Equal(t, 1, runs[i].Load(), "key %d: handler runs after the retries", i)
	}
	if tx {
		counts := b.OrderCounts(t)
		check.Equal(t, replicaKeys, len(counts), "keys with committed orders")
		for k, n := range counts {
			check.Equal(t, 1, n, "orders committed for %s", k)
		}
	}
}

// killStore stands for a replica that dies after claiming: once killed, nothing it does reaches the
// backend any more.
type killStore struct {
	driver.Store
	killed  atomic.Bool
	token   atomic.Uint64
	stopped chan struct{} // closed at the first store call after the kill
	once    sync.Once
}

var errKilled = errors.New("replica killed")

func (k *killStore) dead() bool {
	if !k.killed.Load() {
		return false
	}
	k.once.Do(func() { close(k.stopped) })
	return true
}

func (k *killStore) Claim(ctx context.Context, key driver.Key, fp driver.Fingerprint, now, leaseUntil, expiresAt time.Time) (driver.Claim, error) {
	c, err := k.Store.Claim(ctx, key, fp, now, leaseUntil, expiresAt)
	if c.Status == driver.Claimed {
		k.token.Store(c.Token)
	}
	return c, err
}

func (k *killStore) Renew(ctx context.Context, key driver.Key, token uint64, leaseUntil time.Time) error {
	if k.dead() {
		return errKilled
	}
	return k.Store.Renew(ctx, key, token, leaseUntil)
}

func (k *killStore) Complete(ctx context.Context, key driver.Key, token uint64, resp driver.Response, expiresAt time.Time) error {
	if k.dead() {
		return errKilled
	}
	return k.Store.Complete(ctx, key, token, resp, expiresAt)
}

func (k *killStore) Release(ctx context.Context, key driver.Key, token uint64) error {
	if k.dead() {
		return errKilled
	}
	return k.Store.Release(ctx, key, token)
}

// killTx stands for a replica that dies before its transaction commits.
type killTx struct {
	driver.Transactor
	killed  atomic.Bool
	stopped chan struct{} // closed when a killed transaction has rolled back
	once    sync.Once
}

func (k *killTx) InTx(ctx context.Context, fn func(context.Context, driver.Store) error) error {
	err := k.Transactor.InTx(ctx, func(ctx context.Context, s driver.Store) error {
		if err := fn(ctx, s); err != nil {
			return err
		}
		if k.killed.Load() {
			return errKilled
		}
		return nil
	})
	if k.killed.Load() {
		k.once.Do(func() { close(k.stopped) })
	}
	return err
}

func testOwnerKilled(t *testing.T, mode ReplicaMode) {
	b, tx := mode.setup(t)
	ctx := context.Background()
	clock := testclock.New(time.Now().UTC())

	started, dying := make(chan struct{}), make(chan struct{})
	var doomedRuns, runs atomic.Int32
	charges := &outside{effects: map[string]int{}}
	doomed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doomedRuns.Add(1)
		if err := charges.call(r); err != nil {
			t.Error(err)
		}
		if tx {
			if err := b.WriteOrder(r, "order-000", "doomed"); err != nil {
				t.Error(err)
			}
		}
		close(started)
		// The replica is going down; it never answers. (In a transactional mode the client's
		// disconnect alone does not end the handler, which would finish and commit: the replica's
		// death does.)
		select {
		case <-r.Context().Done():
		case <-dying:
		}
	})
	var original atomic.Pointer[string]
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		run := randid.New("run_")
		if err := charges.call(r); err != nil {
			t.Error(err)
			return
		}
		if tx {
			if err := b.WriteOrder(r, "order-000", run); err != nil {
				t.Error(err)
				return
			}
		}
		body := `{"id":"ord_0","run":"` + run + `"}`
		original.Store(&body)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body)
	})
	newServer := func(o *idempotency.Options, h http.Handler) *httptest.Server {
		o.Now, o.Lease, o.StoreTimeout = clock.Now, replicaLease, patience(t)
		srv := httptest.NewServer(newMiddleware(t, o).Handler(h))
		t.Cleanup(srv.Close)
		return srv
	}

	// Replica A claims and dies.
	var (
		kStore  *killStore
		kTx     *killTx
		stopped chan struct{}
	)
	aOpts := b.Options()
	if tx {
		kTx = &killTx{Transactor: aOpts.Transactor, stopped: make(chan struct{})}
		aOpts.Transactor, stopped = kTx, kTx.stopped
	} else {
		kStore = &killStore{Store: aOpts.Store, stopped: make(chan struct{})}
		aOpts.Store, stopped = kStore, kStore.stopped
	}
	a := newServer(aOpts, doomed)
	bSrv := newServer(b.Options(), handler)
	client := replicaHTTPClient(t)

	actx, kill := context.WithCancel(ctx)
	aDone := make(chan replicaResult, 1)
	go func() { aDone <- replicaPost(actx, client, a.URL, 0) }()
	<-started
	res := replicaPost(ctx, client, bSrv.URL, 0)
	check.Equal(t, http.StatusConflict, res.status, "%+v", res)
	check.Equal(t, idempotency.CodeKeyInUse, res.code)

	if tx {
		kTx.killed.Store(true)
	} else {
		kStore.killed.Store(true)
	}
	// The client gives up first, and only then does the replica die: were the handler released
	// before the client saw its cancellation, the answer could reach it first.
	kill()
	check.Error(t, (<-aDone).err)
	close(dying)
	<-stopped

	if !tx {
		// The dead owner's claim holds until its lease ends; the first retry after that only marks it
		// (the owner might merely be cut off from the store) and gives it one more lease, never longer.
		res = replicaPost(ctx, client, bSrv.URL, 0)
		check.Equal(t, http.StatusConflict, res.status, "%+v", res)
		clock.Advance(replicaLease)
		res = replicaPost(ctx, client, bSrv.URL, 0)
		check.Equal(t, http.StatusConflict, res.status, "the first retry after the lease marks the key: %+v", res)
		clock.Advance(replicaLease)
	}
	// Concurrent retries at two surviving replicas (B and a restarted A): one execution.
	c := newServer(b.Options(), handler)
	var wg sync.WaitGroup
	retries := make([]replicaResult, 20)
	for j := range retries {
		wg.Go(func() { retries[j] = replicaPost(ctx, client, []string{bSrv.URL, c.URL}[j%2], 0) })
	}
	wg.Wait()
	check.Equal(t, 1, runs.Load(), "handler runs after the owner died")
	check.Equal(t, 1, doomedRuns.Load())
	for _, r := range retries {
		check.NoError(t, r.err)
		if r.status == http.StatusConflict {
			continue
		}
		check.Equal(t, http.StatusCreated, r.status)
		check.Equal(t, *original.Load(), r.body)
	}
	for _, url := range []string{bSrv.URL, c.URL} {
		r := replicaPost(ctx, client, url, 0)
		check.Equal(t, http.StatusCreated, r.status, "a retry after completion")
		check.True(t, r.replayed, "a retry after completion is not marked %s", idempotency.HeaderReplayed)
		check.Equal(t, *original.Load(), r.body, "a retry after completion")
	}
	check.Equal(t, 1, runs.Load())
	// The outside system was called by the dead owner and by the retry, with one downstream key: it
	// did its work once, though no transaction can roll it back.
	check.Equal(t, 2, charges.calls(), "calls to the outside system")
	check.Equal(t, 1, len(charges.effects), "outside effects (downstream keys seen)")
	key := driver.Key{Scope: replicaScope(replicaAuth), Key: "order-000"}
	if tx {
		// The dead owner's order rolled back with its claim: one order exists.
		check.Equal(t, map[string]int{"order-000": 1}, b.OrderCounts(t))
	} else {
		// Had the dead owner come back, its completion would be refused.
		err := b.Store.Complete(ctx, key, kStore.token.Load(), driver.Response{Status: 500}, clock.Now().Add(time.Hour))
		check.ErrorIs(t, err, driver.ErrLeaseLost)
	}
	rec, err := b.Store.Lookup(ctx, key, clock.Now())
	check.NoError(t, err)
	check.Equal(t, driver.Completed, rec.Status)
	check.Equal(t, *original.Load(), string(rec.Response.Body))
}

// outside is an outside system that dedupes by the idempotency key it is sent, as payment providers
// do: effects counts the calls per key, and one key is one effect.
type outside struct {
	mu      sync.Mutex
	effects map[string]int
}

// call makes the handler's call, with its request's downstream key for "charge".
func (o *outside) call(r *http.Request) error {
	k, err := idempotency.DownstreamKey(r.Context(), "charge")
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.effects[k]++
	return nil
}

func (o *outside) calls() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.effects {
		n += c
	}
	return n
}

func testStoreOutage(t *testing.T, mode ReplicaMode) {
	if mode.Unreachable == nil {
		t.Fatalf("storetest: mode %q: ReplicaMode.Unreachable is required", mode.Name)
	}
	var runs atomic.Int32
	h := newMiddleware(t, mode.Unreachable(t)).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	res := replicaPost(context.Background(), replicaHTTPClient(t), srv.URL, 1)
	check.NoError(t, res.err)
	check.Equal(t, http.StatusServiceUnavailable, res.status)
	check.Equal(t, apierror.CodeUnavailable, res.code)
	check.True(t, res.retry != "", "a 503 without Retry-After")
	check.Equal(t, 0, runs.Load())
}
