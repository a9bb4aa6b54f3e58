package idempotency_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

// provider is an outside payment provider that, like Stripe's API, dedupes by its own
// Idempotency-Key header: a repeated key gets the first answer and no second charge.
type provider struct {
	srv     *httptest.Server
	mu      sync.Mutex
	charges map[string]string // idempotency key → charge ID
	calls   atomic.Int64
	effects atomic.Int64
}

func newProvider(t *testing.T) *provider {
	p := &provider{charges: map[string]string{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.calls.Add(1)
		key := r.Header.Get("Idempotency-Key")
		p.mu.Lock()
		defer p.mu.Unlock()
		id, seen := p.charges[key]
		if key == "" || !seen {
			id = "ch_" + itoa(p.effects.Add(1)) // the outside effect: money moves
			if key != "" {
				p.charges[key] = id
			}
		}
		_, _ = w.Write([]byte(id))
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// charge calls the provider with the request's downstream key for "charge".
func (p *provider) charge(t *testing.T, r *http.Request) string {
	key, err := idempotency.DownstreamKey(r.Context(), "charge")
	require.NoError(t, err)
	preq, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), "POST", p.srv.URL+"/v1/charges", nil)
	require.NoError(t, err)
	preq.Header.Set("Idempotency-Key", key)
	resp, err := p.srv.Client().Do(preq)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// The window the package doc names: the handler charged, then its process died before the response
// was stored, and the retry runs the handler again. With the downstream key, the provider charges
// once.
func TestDownstreamKeyOneOutsideEffect(t *testing.T) {
	t.Run("the handler panics after the call", func(t *testing.T) {
		p := newProvider(t)
		var runs atomic.Int64
		mw := must(idempotency.New(nil)).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := p.charge(t, r)
			if runs.Add(1) == 1 {
				panic("crash after the charge, before completion")
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(id))
		}))
		func() {
			defer func() { require.NotNil(t, recover()) }()
			serve(mw, req("POST", "/v1/orders", "k1", authA, order))
		}()
		w := serve(mw, req("POST", "/v1/orders", "k1", authA, order)) // the key was released: it runs again
		require.Equal(t, http.StatusCreated, w.Code)
		require.Equal(t, "ch_1", w.Body.String())
		require.EqualValues(t, 2, runs.Load(), "the handler ran twice")
		require.EqualValues(t, 2, p.calls.Load())
		require.EqualValues(t, 1, p.effects.Load(), "one charge")
	})

	t.Run("the owner dies and another replica takes over", func(t *testing.T) {
		// Two replicas share a store and a clock. Replica A claims, charges, and hangs (its process is
		// gone: it never renews or completes); its lease and the extra lease pass; the retry at replica
		// B takes the key over and runs the handler, which charges again with the same key.
		p := newProvider(t)
		clk := newClock()
		store := memstore.New(nil)
		opts := func() *idempotency.Options {
			// Renewal runs on the runtime's timers every Lease/3: with an hour's lease it never fires
			// here, so the injected clock alone ends the lease, as for a dead process.
			return &idempotency.Options{Store: store, Now: clk.Now, Lease: time.Hour}
		}
		charged, dead := make(chan struct{}), make(chan struct{})
		var keys sync.Map
		replicaA := must(idempotency.New(opts())).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, _ := idempotency.DownstreamKey(r.Context(), "charge")
			keys.Store("a", k)
			p.charge(t, r)
			close(charged)
			<-dead
		}))
		var runsB atomic.Int64
		replicaB := must(idempotency.New(opts())).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runsB.Add(1)
			k, _ := idempotency.DownstreamKey(r.Context(), "charge")
			keys.Store("b", k)
			id := p.charge(t, r)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(id))
		}))
		aDone := make(chan *httptest.ResponseRecorder)
		go func() { aDone <- serve(replicaA, req("POST", "/v1/orders", "k1", authA, order)) }()
		<-charged

		requireProblem(t, serve(replicaB, req("POST", "/v1/orders", "k1", authA, order)), http.StatusConflict, idempotency.CodeKeyInUse)
		clk.Advance(time.Hour)
		requireProblem(t, serve(replicaB, req("POST", "/v1/orders", "k1", authA, order)), http.StatusConflict, idempotency.CodeKeyInUse)
		clk.Advance(time.Hour)
		w := serve(replicaB, req("POST", "/v1/orders", "k1", authA, order))
		require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
		require.Equal(t, "ch_1", w.Body.String(), "the provider answered the first charge")
		require.EqualValues(t, 1, runsB.Load())

		a, _ := keys.Load("a")
		b, _ := keys.Load("b")
		require.Equal(t, a, b, "the same downstream key on both replicas")
		require.EqualValues(t, 2, p.calls.Load())
		require.EqualValues(t, 1, p.effects.Load(), "one charge")

		close(dead) // A's late completion is refused; the record is B's
		<-aDone
		replay := serve(replicaB, req("POST", "/v1/orders", "k1", authA, order))
		require.Equal(t, "true", replay.Header().Get(idempotency.HeaderReplayed))
		require.Equal(t, "ch_1", replay.Body.String())
	})
}

var uuidV8 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// The key is stable for one scope, key and name, on any replica, with Begin as with the middleware;
// it differs for every other scope, key, name or secret; it reveals neither the client's key nor the
// scope.
func TestDownstreamKeyDerivation(t *testing.T) {
	secret := []byte(strings.Repeat("s", 32))
	keyOf := func(opts *idempotency.Options, auth, key, name string) string {
		var got string
		mw := must(idempotency.New(opts)).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var err error
			got, err = idempotency.DownstreamKey(r.Context(), name)
			require.NoError(t, err)
			w.WriteHeader(http.StatusCreated)
		}))
		require.Equal(t, http.StatusCreated, serve(mw, req("POST", "/v1/orders", key, auth, order)).Code)
		return got
	}
	withSecret := func() *idempotency.Options { return &idempotency.Options{DownstreamSecret: secret} }
	base := keyOf(withSecret(), authA, "order-1", "charge")
	require.Regexp(t, uuidV8, base)
	require.Equal(t, base, keyOf(withSecret(), authA, "order-1", "charge"), "another replica, the same key")
	seen := map[string]string{base: "base"}
	for name, k := range map[string]string{
		"another scope":      keyOf(withSecret(), authB, "order-1", "charge"),
		"another key":        keyOf(withSecret(), authA, "order-2", "charge"),
		"another name":       keyOf(withSecret(), authA, "order-1", "refund"),
		"no secret":          keyOf(nil, authA, "order-1", "charge"),
		"another secret":     keyOf(&idempotency.Options{DownstreamSecret: []byte(strings.Repeat("t", 32))}, authA, "order-1", "charge"),
		"parts run together": keyOf(withSecret(), authA, "order-1c", "harge"),
	} {
		require.Regexp(t, uuidV8, k, name)
		require.NotContains(t, seen, k, "%s: the same key as %s", name, seen[k])
		seen[k] = name
		require.NotContains(t, k, "order")
	}
	require.Equal(t, keyOf(nil, authA, "order-1", "charge"), keyOf(nil, authA, "order-1", "charge"), "stable without a secret too")

	t.Run("Begin's Attempt.Context", func(t *testing.T) {
		m := must(idempotency.New(withSecret()))
		a, err := m.Begin(context.Background(), idempotency.Request{Scope: idempotency.CredentialScope(authA), Key: "order-1"})
		require.NoError(t, err)
		require.Equal(t, idempotency.Execute, a.Decision)
		k, err := idempotency.DownstreamKey(a.Context(), "charge")
		require.NoError(t, err)
		require.Equal(t, base, k, "the middleware and Begin derive alike")
		require.NoError(t, a.Release(context.Background()))
	})
	t.Run("FailOpen without a claim", func(t *testing.T) {
		o := withSecret()
		o.Store, o.FailOpen = &faultStore{Store: memstore.New(nil)}, true
		fs := o.Store.(*faultStore)
		fs.fail(&fs.claimErr, errDown)
		require.Equal(t, base, keyOf(o, authA, "order-1", "charge"))
	})
	t.Run("a custom Scope counts", func(t *testing.T) {
		scoped := func(scope string) *idempotency.Options {
			o := withSecret()
			o.Scope = func(*http.Request) (string, error) { return scope, nil }
			return o
		}
		require.NotEqual(t, keyOf(scoped("lic_1/live"), authA, "order-1", "charge"), keyOf(scoped("lic_1/sandbox"), authA, "order-1", "charge"))
		require.Equal(t, keyOf(scoped("lic_1/live"), authA, "order-1", "charge"), keyOf(scoped("lic_1/live"), authB, "order-1", "charge"))
	})
}

func TestDownstreamKeyErrors(t *testing.T) {
	for name, ctx := range map[string]context.Context{
		"background":              context.Background(),
		"nil":                     nil,
		"a request's, ungoverned": httptest.NewRequest("POST", "/", nil).Context(),
	} {
		k, err := idempotency.DownstreamKey(ctx, "charge")
		require.ErrorIs(t, err, idempotency.ErrNoDownstreamKey, name)
		require.Empty(t, k)
	}
	var got error
	mw := must(idempotency.New(nil)).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var k string
		k, got = idempotency.DownstreamKey(r.Context(), "")
		require.Empty(t, k)
	}))
	serve(mw, req("POST", "/v1/orders", "k1", authA, order))
	require.ErrorContains(t, got, "empty name")

	// A safe method passes through the middleware ungoverned: no key.
	mw = must(idempotency.New(nil)).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, got = idempotency.DownstreamKey(r.Context(), "charge")
	}))
	serve(mw, req("GET", "/v1/orders", "", authA, ""))
	require.ErrorIs(t, got, idempotency.ErrNoDownstreamKey)

	for _, s := range [][]byte{{}, []byte("short")} {
		_, err := idempotency.New(&idempotency.Options{DownstreamSecret: s})
		require.ErrorContains(t, err, "DownstreamSecret")
	}
}
