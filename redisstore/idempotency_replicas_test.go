package redisstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/redisstore"
)

// The exactly-once test: idemKeys keys, each sent idemDups times at once, spread over two replicas
// (two http servers, each with its own middleware) that share one Redis.
const (
	idemKeys = 100
	idemDups = 50
	// idemWave keys are in flight at a time: 500 concurrent requests, enough to race every key hard.
	idemWave = 10
)

// idemClock is the replicas' shared, injected clock: leases end when the test says so.
type idemClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *idemClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *idemClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// idemResult is what a client saw.
type idemResult struct {
	status   int
	body     string
	replayed bool
	code     string // problem code
	retry    string // Retry-After
	err      error
}

// idemPost sends the order request for key i to url.
func idemPost(ctx context.Context, client *http.Client, url string, i int) idemResult {
	body := fmt.Sprintf(`{"account":"acc_%d","side":"buy"}`, i)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/orders", strings.NewReader(body))
	if err != nil {
		return idemResult{err: err}
	}
	req.Header.Set("Authorization", "Bearer sk_sandbox_replicas")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idempotency.HeaderKey, idemKeyName(i))
	resp, err := client.Do(req)
	if err != nil {
		return idemResult{err: err}
	}
	defer resp.Body.Close()
	r := idemResult{status: resp.StatusCode, replayed: resp.Header.Get(idempotency.HeaderReplayed) == "true", retry: resp.Header.Get("Retry-After")}
	if resp.Header.Get("Content-Type") == apierror.MediaType {
		p, err := apierror.Parse(resp)
		if err != nil {
			return idemResult{err: err}
		}
		r.code = p.Code
		return r
	}
	b, err := io.ReadAll(resp.Body)
	r.body, r.err = string(b), err
	return r
}

func idemKeyName(i int) string { return fmt.Sprintf("order-%03d", i) }

func idemKeyIndex(t *testing.T, r *http.Request) int {
	i, err := strconv.Atoi(strings.TrimPrefix(r.Header.Get(idempotency.HeaderKey), "order-"))
	if err != nil || i < 0 || i >= idemKeys {
		t.Errorf("unexpected key %q", r.Header.Get(idempotency.HeaderKey))
		return 0
	}
	return i
}

func idemHTTPClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 2 * idemWave * idemDups}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// TestIdempotencyExactlyOnceAcrossReplicas: every key's handler runs once although its duplicates
// arrive together at two replicas; every answer is the original response or 409 in use; afterwards
// every retry, at either replica, replays the identical body.
func TestIdempotencyExactlyOnceAcrossReplicas(t *testing.T) {
	store, _ := newIdemStore(t)
	ctx := context.Background()
	clock := &idemClock{t: time.Now().UTC()}

	var (
		runs     [idemKeys]atomic.Int32
		original [idemKeys]atomic.Pointer[string]
		answered [idemKeys]atomic.Int32
		others   [idemKeys]chan struct{} // closed when every duplicate but the owner's is answered
	)
	for i := range others {
		others[i] = make(chan struct{})
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := idemKeyIndex(t, r)
		runs[i].Add(1)
		// Even keys hold the claim until all their duplicates were answered, so every one of them
		// meets it in flight; odd keys finish at once, so duplicates also meet the record completed.
		// The timeout only turns a bug into a failure instead of a hang.
		if i%2 == 0 {
			select {
			case <-others[i]:
			case <-time.After(20 * time.Second):
				t.Errorf("key %d: duplicates were not all answered while the owner held the claim", i)
			}
		}
		body := fmt.Sprintf(`{"id":"ord_%d","run":%q}`, i, randid.New("run_"))
		original[i].Store(&body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/orders/ord_"+strconv.Itoa(i))
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body)
	})
	var servers [2]*httptest.Server
	for n := range servers {
		servers[n] = httptest.NewServer(idempotency.New(&idempotency.Options{Store: store, Now: clock.Now}).Handler(handler))
		t.Cleanup(servers[n].Close)
	}
	client := idemHTTPClient(t)

	results := make([][]idemResult, idemKeys)
	for wave := 0; wave < idemKeys; wave += idemWave {
		var wg sync.WaitGroup
		for i := wave; i < wave+idemWave; i++ {
			results[i] = make([]idemResult, idemDups)
			for j := range idemDups {
				wg.Go(func() {
					res := idemPost(ctx, client, servers[j%2].URL, i)
					results[i][j] = res
					if res.status != http.StatusCreated || res.replayed {
						if answered[i].Add(1) == idemDups-1 {
							close(others[i])
						}
					}
				})
			}
		}
		wg.Wait()
	}

	for i := range idemKeys {
		require.EqualValues(t, 1, runs[i].Load(), "key %d: handler runs", i)
		body := original[i].Load()
		require.NotNil(t, body)
		fresh := 0
		for _, res := range results[i] {
			require.NoError(t, res.err)
			switch res.status {
			case http.StatusCreated:
				require.Equal(t, *body, res.body, "key %d: a 201 that is not the original", i)
				if !res.replayed {
					fresh++
				}
			case http.StatusConflict:
				require.Equal(t, idempotency.CodeKeyInUse, res.code)
				require.NotEmpty(t, res.retry)
			default:
				t.Fatalf("key %d: unexpected answer %+v", i, res)
			}
		}
		require.Equal(t, 1, fresh, "key %d: exactly one fresh answer", i)
		if i%2 == 0 {
			require.EqualValues(t, idemDups-1, answered[i].Load(), "key %d: all duplicates met the claim in flight", i)
		}
	}
	// After completion every retry, at either replica, replays the identical body.
	for i := range idemKeys {
		for _, srv := range servers {
			res := idemPost(ctx, client, srv.URL, i)
			require.NoError(t, res.err)
			require.Equal(t, http.StatusCreated, res.status)
			require.True(t, res.replayed)
			require.Equal(t, *original[i].Load(), res.body)
		}
		require.EqualValues(t, 1, runs[i].Load())
	}
}

// idemKillStore stands for a replica that dies after claiming: once killed, nothing it does reaches
// Redis any more.
type idemKillStore struct {
	idempotency.Store
	killed  atomic.Bool
	token   atomic.Uint64
	stopped chan struct{} // closed at the first store call after the kill
	once    sync.Once
}

var errIdemKilled = errors.New("replica killed")

func (k *idemKillStore) dead() bool {
	if !k.killed.Load() {
		return false
	}
	k.once.Do(func() { close(k.stopped) })
	return true
}

func (k *idemKillStore) Claim(ctx context.Context, key idempotency.Key, fp idempotency.Fingerprint, now, leaseUntil, expiresAt time.Time) (idempotency.Claim, error) {
	c, err := k.Store.Claim(ctx, key, fp, now, leaseUntil, expiresAt)
	if c.Status == idempotency.Claimed {
		k.token.Store(c.Token)
	}
	return c, err
}

func (k *idemKillStore) Renew(ctx context.Context, key idempotency.Key, token uint64, leaseUntil time.Time) error {
	if k.dead() {
		return errIdemKilled
	}
	return k.Store.Renew(ctx, key, token, leaseUntil)
}

func (k *idemKillStore) Complete(ctx context.Context, key idempotency.Key, token uint64, resp idempotency.Response, expiresAt time.Time) error {
	if k.dead() {
		return errIdemKilled
	}
	return k.Store.Complete(ctx, key, token, resp, expiresAt)
}

func (k *idemKillStore) Release(ctx context.Context, key idempotency.Key, token uint64) error {
	if k.dead() {
		return errIdemKilled
	}
	return k.Store.Release(ctx, key, token)
}

// TestIdempotencyOwnerKilled: the replica that owns a key dies mid-request, without completing. Until
// its lease ends duplicates get 409; then concurrent retries at the surviving replicas run the
// handler exactly once, and everybody gets that response. The dead owner's late completion is refused.
func TestIdempotencyOwnerKilled(t *testing.T) {
	const lease = 30 * time.Second
	store, _ := newIdemStore(t)
	ctx := context.Background()
	clock := &idemClock{t: time.Now().UTC()}

	started := make(chan struct{})
	var doomedRuns, runs atomic.Int32
	doomed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doomedRuns.Add(1)
		close(started)
		<-r.Context().Done() // the replica is going down; it never answers
	})
	var original atomic.Pointer[string]
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		body := `{"id":"ord_0","run":"` + randid.New("run_") + `"}`
		original.Store(&body)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body)
	})
	newServer := func(s idempotency.Store, h http.Handler) *httptest.Server {
		srv := httptest.NewServer(idempotency.New(&idempotency.Options{Store: s, Now: clock.Now, Lease: lease}).Handler(h))
		t.Cleanup(srv.Close)
		return srv
	}
	killStore := &idemKillStore{Store: store, stopped: make(chan struct{})}
	a := newServer(killStore, doomed)
	b := newServer(store, handler)
	client := idemHTTPClient(t)

	actx, kill := context.WithCancel(ctx)
	aDone := make(chan idemResult, 1)
	go func() { aDone <- idemPost(actx, client, a.URL, 0) }()
	<-started
	res := idemPost(ctx, client, b.URL, 0)
	require.Equal(t, http.StatusConflict, res.status, "%+v", res)
	require.Equal(t, idempotency.CodeKeyInUse, res.code)

	killStore.killed.Store(true)
	kill()
	require.Error(t, (<-aDone).err)
	<-killStore.stopped

	// The dead owner's claim holds until its lease ends, never longer: advance the shared clock.
	res = idemPost(ctx, client, b.URL, 0)
	require.Equal(t, http.StatusConflict, res.status, "%+v", res)
	clock.Advance(lease)

	// Concurrent retries at two surviving replicas (B and a restarted A): one execution.
	c := newServer(store, handler)
	var wg sync.WaitGroup
	retries := make([]idemResult, 20)
	for j := range retries {
		wg.Go(func() { retries[j] = idemPost(ctx, client, []string{b.URL, c.URL}[j%2], 0) })
	}
	wg.Wait()
	require.EqualValues(t, 1, runs.Load(), "handler runs after the owner died")
	require.EqualValues(t, 1, doomedRuns.Load())
	for _, r := range retries {
		require.NoError(t, r.err)
		if r.status == http.StatusConflict {
			continue
		}
		require.Equal(t, http.StatusCreated, r.status)
		require.Equal(t, *original.Load(), r.body)
	}
	for _, url := range []string{b.URL, c.URL} {
		r := idemPost(ctx, client, url, 0)
		require.Equal(t, http.StatusCreated, r.status)
		require.True(t, r.replayed)
		require.Equal(t, *original.Load(), r.body)
	}
	require.EqualValues(t, 1, runs.Load())
	// Had the dead owner come back, its completion would be refused.
	key := idempotency.Key{Scope: idemScope("Bearer sk_sandbox_replicas"), Key: "order-000"}
	err := store.Complete(ctx, key, killStore.token.Load(), idempotency.Response{Status: 500}, clock.Now().Add(time.Hour))
	require.ErrorIs(t, err, idempotency.ErrLeaseLost)
	rec, err := store.Lookup(ctx, key, clock.Now())
	require.NoError(t, err)
	require.Equal(t, idempotency.Completed, rec.Status)
	require.Equal(t, *original.Load(), string(rec.Response.Body))
}

// idemScope is the middleware's default scope for an Authorization value.
func idemScope(auth string) string {
	sum := sha256.Sum256([]byte(auth))
	return hex.EncodeToString(sum[:])
}

// TestIdempotencyStoreOutage: with Redis unreachable the answer is 503 with Retry-After, and the
// handler does not run. The shared server is left alone: the client points at a closed port.
func TestIdempotencyStoreOutage(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second,
		DialerRetries: 1, DialerRetryTimeout: time.Microsecond})
	t.Cleanup(func() { _ = client.Close() })
	var runs atomic.Int32
	h := idempotency.New(&idempotency.Options{Store: redisstore.NewIdempotencyStore(client, nil)}).
		Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs.Add(1) }))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	res := idemPost(context.Background(), idemHTTPClient(t), srv.URL, 1)
	require.NoError(t, res.err)
	require.Equal(t, http.StatusServiceUnavailable, res.status)
	require.Equal(t, apierror.CodeUnavailable, res.code)
	require.NotEmpty(t, res.retry)
	require.Zero(t, runs.Load())
}
