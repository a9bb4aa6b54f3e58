package idempotency_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

func TestBeginDecisions(t *testing.T) {
	ctx := context.Background()
	m := must(idempotency.New(nil))
	fp := idempotency.NewFingerprint("/orders.v1.Orders/Create", "", "", sha256.Sum256([]byte("msg")))
	other := idempotency.NewFingerprint("/orders.v1.Orders/Create", "", "", sha256.Sum256([]byte("other")))
	r := idempotency.Request{Scope: "tenant-1", Key: "k1", Fingerprint: fp}

	a, err := m.Begin(ctx, r)
	require.NoError(t, err)
	require.Equal(t, idempotency.Execute, a.Decision)
	require.Equal(t, driver.Key{Scope: "tenant-1", Key: "k1"}, a.Key)
	require.Equal(t, fp, a.Fingerprint)
	require.NotZero(t, a.Token)
	require.Nil(t, a.Problem())
	require.NoError(t, a.Context().Err())

	again, err := m.Begin(ctx, r)
	require.NoError(t, err)
	require.Equal(t, idempotency.InUse, again.Decision)
	require.Equal(t, http.StatusConflict, again.Problem().Status)
	require.Equal(t, idempotency.CodeKeyInUse, again.Problem().Code)
	require.Equal(t, context.Background(), again.Context())

	reused, err := m.Begin(ctx, idempotency.Request{Scope: "tenant-1", Key: "k1", Fingerprint: other})
	require.NoError(t, err)
	require.Equal(t, idempotency.Reused, reused.Decision)
	require.Equal(t, http.StatusUnprocessableEntity, reused.Problem().Status)
	require.Equal(t, idempotency.CodeKeyReused, reused.Problem().Code)

	require.NoError(t, a.Complete(ctx, idempotency.Response{Status: 200, Body: []byte("created")}))
	require.ErrorIs(t, a.Context().Err(), context.Canceled, "the attempt's context ends with it")
	require.ErrorIs(t, a.Complete(ctx, idempotency.Response{Status: 500}), idempotency.ErrLeaseLost, "completing twice is refused")

	replay, err := m.Begin(ctx, r)
	require.NoError(t, err)
	require.Equal(t, idempotency.Replay, replay.Decision)
	require.Equal(t, "created", string(replay.Response.Body))
	require.Error(t, replay.Complete(ctx, idempotency.Response{Status: 200}), "only an Execute attempt owns the key")
	require.Error(t, replay.Release(ctx))

	// Scopes apart.
	b, err := m.Begin(ctx, idempotency.Request{Scope: "tenant-2", Key: "k1", Fingerprint: other})
	require.NoError(t, err)
	require.Equal(t, idempotency.Execute, b.Decision)
	require.NoError(t, b.Release(ctx))
	b2, err := m.Begin(ctx, idempotency.Request{Scope: "tenant-2", Key: "k1", Fingerprint: fp})
	require.NoError(t, err)
	require.Equal(t, idempotency.Execute, b2.Decision, "a released key is free at once")
	require.NoError(t, b2.Release(ctx))

	require.Equal(t, idempotency.Stats{Executed: 3, Replayed: 1, Conflicts: 1, Reused: 1, Released: 2, LeaseLost: 1}, m.Stats())
}

func TestBeginErrors(t *testing.T) {
	ctx := context.Background()
	store := &faultStore{Store: memstore.New(nil)}
	m := must(idempotency.New(&idempotency.Options{Store: store}))
	_, err := m.Begin(ctx, idempotency.Request{Scope: "s", Key: "bad key"})
	require.ErrorIs(t, err, idempotency.ErrKeyInvalid)
	_, err = m.Begin(ctx, idempotency.Request{Scope: "s", Key: ""})
	require.ErrorIs(t, err, idempotency.ErrKeyInvalid)
	_, err = m.Begin(ctx, idempotency.Request{Key: "k"})
	require.ErrorIs(t, err, idempotency.ErrScopeEmpty)
	store.fail(&store.claimErr, errDown)
	_, err = m.Begin(ctx, idempotency.Request{Scope: "s", Key: "k"})
	require.ErrorIs(t, err, idempotency.ErrStore)
	require.ErrorIs(t, err, errDown)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	store.claimErr.Store(nil)
	_, err = m.Begin(cctx, idempotency.Request{Scope: "s", Key: "k"})
	require.ErrorIs(t, err, idempotency.ErrStore)
	require.ErrorIs(t, err, context.Canceled)
}

func TestBeginRenewsUntilComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := must(idempotency.New(&idempotency.Options{Lease: 3 * time.Second}))
		r := idempotency.Request{Scope: "s", Key: "k"}
		a, err := m.Begin(ctx, r)
		require.NoError(t, err)
		time.Sleep(time.Minute)
		b, err := m.Begin(ctx, r)
		require.NoError(t, err)
		require.Equal(t, idempotency.InUse, b.Decision, "renewed for a minute")
		require.NoError(t, a.Complete(ctx, idempotency.Response{Status: 204}))
		idle(t, m)

		// NoRenew: the lease lapses on its own.
		r2 := idempotency.Request{Scope: "s", Key: "k2", NoRenew: true}
		_, err = m.Begin(ctx, r2)
		require.NoError(t, err)
		time.Sleep(4 * time.Second)
		c, err := m.Begin(ctx, r2)
		require.NoError(t, err)
		require.Equal(t, idempotency.InUse, c.Decision, "the first claim after the lease only marks it")
		time.Sleep(3 * time.Second)
		c, err = m.Begin(ctx, r2)
		require.NoError(t, err)
		require.Equal(t, idempotency.Execute, c.Decision, "taken over after the extra lease")
		require.NoError(t, c.Release(ctx))
		idle(t, m)
	})
}

func TestFingerprint(t *testing.T) {
	body := sha256.Sum256([]byte(order))
	base := idempotency.NewFingerprint("POST", "/v1/orders", "a=1&b=2", body)
	same := []struct{ name, method, path, query string }{
		{"reordered query", "POST", "/v1/orders", "b=2&a=1"},
		{"escaping differs", "POST", "/v1/orders", "a=%31&b=2"},
	}
	for _, tc := range same {
		t.Run("same/"+tc.name, func(t *testing.T) {
			require.Equal(t, base, idempotency.NewFingerprint(tc.method, tc.path, tc.query, body))
		})
	}
	different := []struct{ name, method, path, query string }{
		{"method", "PUT", "/v1/orders", "a=1&b=2"},
		{"path", "POST", "/v1/orders/", "a=1&b=2"},
		{"query value", "POST", "/v1/orders", "a=1&b=3"},
		{"value order of one name", "POST", "/v1/orders", "a=1&a=2&b=2"},
		{"no query", "POST", "/v1/orders", ""},
		{"boundary shift", "POS", "T/v1/orders", "a=1&b=2"},
		{"unparsable query", "POST", "/v1/orders", "a=%zz"},
	}
	for _, tc := range different {
		t.Run("different/"+tc.name, func(t *testing.T) {
			require.NotEqual(t, base, idempotency.NewFingerprint(tc.method, tc.path, tc.query, body))
		})
	}
	require.NotEqual(t, base, idempotency.NewFingerprint("POST", "/v1/orders", "a=1&b=2", sha256.Sum256([]byte(order+" "))))
	require.NotEqual(t,
		idempotency.NewFingerprint("POST", "/p", "a=1&a=2", body),
		idempotency.NewFingerprint("POST", "/p", "a=2&a=1", body))
}

// txStore is a transactional fake: InTx holds one lock for the whole transaction (as a row lock
// would for one key), works on a copy of the records, and installs the copy only on commit.
type txStore struct {
	mu        sync.Mutex
	records   map[driver.Key]driver.Record
	tokens    uint64
	failNext  error // the next commit fails with this
	commits   int
	rollbacks int
}

type txCtxKey struct{}

func (s *txStore) InTx(ctx context.Context, fn func(ctx context.Context, store driver.Store) error) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := &txView{s: s, records: maps.Clone(s.records)}
	committed := false
	defer func() {
		if !committed {
			s.rollbacks++
		}
	}()
	if err := fn(context.WithValue(ctx, txCtxKey{}, tx), tx); err != nil {
		return err
	}
	if s.failNext != nil {
		err, s.failNext = s.failNext, nil
		return err
	}
	s.records = tx.records
	s.commits++
	committed = true
	return nil
}

// txView is the Store bound to one transaction; it is used by one goroutine.
type txView struct {
	s       *txStore
	records map[driver.Key]driver.Record
	writes  []string // the handler's own writes, in the same transaction
}

func (v *txView) Claim(ctx context.Context, key driver.Key, fp driver.Fingerprint, now, leaseUntil, expiresAt time.Time) (driver.Claim, error) {
	if rec, ok := v.records[key]; ok && rec.ExpiresAt.After(now) {
		if rec.Fingerprint != fp {
			return driver.Claim{Status: rec.Status, Fingerprint: rec.Fingerprint}, nil
		}
		if rec.Status == driver.Completed {
			return driver.Claim{Status: driver.Completed, Fingerprint: fp, Response: rec.Response}, nil
		}
		return driver.Claim{Status: driver.InFlight, Fingerprint: fp, LeaseUntil: rec.LeaseUntil}, nil
	}
	v.s.tokens++
	v.records[key] = driver.Record{Fingerprint: fp, Status: driver.InFlight, Token: v.s.tokens, LeaseUntil: leaseUntil, ExpiresAt: expiresAt}
	return driver.Claim{Status: driver.Claimed, Token: v.s.tokens, Fingerprint: fp, LeaseUntil: leaseUntil}, nil
}

func (v *txView) Renew(context.Context, driver.Key, uint64, time.Time) error {
	panic("txView: Renew must not be called in transactional mode")
}

func (v *txView) Complete(_ context.Context, key driver.Key, token uint64, resp driver.Response, expiresAt time.Time) error {
	rec, ok := v.records[key]
	if !ok || rec.Token != token || rec.Status != driver.InFlight {
		return idempotency.ErrLeaseLost
	}
	body := append([]byte(nil), resp.Body...)
	rec.Status, rec.ExpiresAt = driver.Completed, expiresAt
	rec.Response = &idempotency.Response{Status: resp.Status, Header: resp.Header.Clone(), Body: body}
	v.records[key] = rec
	return nil
}

func (v *txView) Release(_ context.Context, key driver.Key, token uint64) error {
	rec, ok := v.records[key]
	if !ok || rec.Token != token || rec.Status != driver.InFlight {
		return idempotency.ErrLeaseLost
	}
	delete(v.records, key)
	return nil
}

func (v *txView) Lookup(_ context.Context, key driver.Key, now time.Time) (driver.Record, error) {
	rec, ok := v.records[key]
	if !ok || !rec.ExpiresAt.After(now) {
		return driver.Record{}, driver.ErrNotFound
	}
	return rec, nil
}

func TestTransactionalMode(t *testing.T) {
	newTx := func() (*txStore, *[]string, http.Handler, *idempotency.Middleware) {
		s := &txStore{records: map[driver.Key]driver.Record{}}
		var committed []string
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tx := r.Context().Value(txCtxKey{}).(*txView)
			tx.writes = append(tx.writes, "order")
			committed = append(committed, "order") // what the handler believes it did
			switch r.URL.Path {
			case "/fail":
				w.WriteHeader(http.StatusInternalServerError)
			case "/big":
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write(make([]byte, 2048))
			case "/panic":
				panic("boom")
			default:
				w.Header().Set("Location", "/v1/orders/1")
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte("created"))
				w.(http.Flusher).Flush() // must not reach the client before the commit
			}
		})
		m := must(idempotency.New(&idempotency.Options{Transactor: s, MaxResponseBytes: 1024, ReleaseServerErrors: true}))
		return s, &committed, m.Handler(h), m
	}

	t.Run("commit then replay", func(t *testing.T) {
		s, _, mw, _ := newTx()
		w := serve(mw, req("POST", "/orders", "k1", authA, order))
		require.Equal(t, 201, w.Code)
		require.Equal(t, "created", w.Body.String())
		require.Equal(t, "/v1/orders/1", w.Header().Get("Location"))
		require.Equal(t, 1, s.commits)
		w = serve(mw, req("POST", "/orders", "k1", authA, order))
		require.Equal(t, "true", w.Header().Get(idempotency.HeaderReplayed))
		require.Equal(t, "created", w.Body.String())
		require.Equal(t, 1, s.commits, "a replay commits nothing")
		requireProblem(t, serve(mw, req("POST", "/orders", "k1", authA, "{}")), 422, idempotency.CodeKeyReused)
	})

	t.Run("commit failure: nothing carried out, 503, retry runs", func(t *testing.T) {
		s, _, mw, _ := newTx()
		s.failNext = errors.New("serialization failure")
		w := serve(mw, req("POST", "/orders", "k1", authA, order))
		requireProblem(t, w, 503, "service_unavailable")
		require.NotContains(t, w.Body.String(), "created", "the uncommitted response never reaches the client")
		require.Empty(t, s.records)
		w = serve(mw, req("POST", "/orders", "k1", authA, order))
		require.Equal(t, 201, w.Code)
		require.Empty(t, w.Header().Get(idempotency.HeaderReplayed))
	})

	t.Run("the handler's own SQL failure: opaque 500, nothing carried out, retry runs", func(t *testing.T) {
		s, _, mw, m := newTx()
		s.failNext = fmt.Errorf("commit: %w: %w", driver.ErrTxAborted, errors.New(`ERROR: duplicate key value violates unique constraint "orders_pkey"`))
		w := serve(mw, req("POST", "/orders", "k1", authA, order))
		requireProblem(t, w, 500, "internal_error")
		require.Empty(t, w.Header().Get("Retry-After"))
		require.NotContains(t, w.Body.String(), "created")
		require.NotContains(t, w.Body.String(), "orders_pkey")
		require.Empty(t, s.records)
		require.EqualValues(t, 1, m.Stats().Released)
		require.Zero(t, m.Stats().StoreErrors)
		w = serve(mw, req("POST", "/orders", "k1", authA, order))
		require.Equal(t, 201, w.Code)
		require.Empty(t, w.Header().Get(idempotency.HeaderReplayed))
	})

	t.Run("a client that disconnects does not cancel the handler", func(t *testing.T) {
		s := &txStore{records: map[driver.Key]driver.Record{}}
		var seen error
		m := must(idempotency.New(&idempotency.Options{Transactor: s}))
		mw := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = r.Context().Err()
			w.WriteHeader(http.StatusCreated)
		}))
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // gone before the handler even runs
		serve(mw, req("POST", "/orders", "k1", authA, order).WithContext(ctx))
		require.NoError(t, seen)
		require.Equal(t, 1, s.commits)
		w := serve(mw, req("POST", "/orders", "k1", authA, order))
		require.Equal(t, "true", w.Header().Get(idempotency.HeaderReplayed))
	})

	t.Run("5xx under ReleaseServerErrors rolls back", func(t *testing.T) {
		s, _, mw, _ := newTx()
		require.Equal(t, 500, serve(mw, req("POST", "/fail", "k1", authA, order)).Code)
		require.Empty(t, s.records)
		require.Equal(t, 1, s.rollbacks)
	})

	t.Run("response over the cap rolls back", func(t *testing.T) {
		s, _, mw, _ := newTx()
		requireProblem(t, serve(mw, req("POST", "/big", "k1", authA, order)), 500, idempotency.CodeResponseTooLarge)
		require.Empty(t, s.records)
	})

	t.Run("panic rolls back", func(t *testing.T) {
		s, _, mw, m := newTx()
		require.PanicsWithValue(t, "boom", func() { serve(mw, req("POST", "/panic", "k1", authA, order)) })
		require.Empty(t, s.records)
		require.Equal(t, 1, s.rollbacks)
		require.EqualValues(t, 1, m.Stats().Panics)
	})

	t.Run("concurrent same key: one execution", func(t *testing.T) {
		_, committed, mw, _ := newTx()
		var wg sync.WaitGroup
		codes := make([]int, 50)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i] = serve(mw, req("POST", "/orders", "k1", authA, order)).Code
			}()
		}
		wg.Wait()
		require.Len(t, *committed, 1)
		for _, c := range codes {
			require.Equal(t, 201, c)
		}
	})

	t.Run("claim failure", func(t *testing.T) {
		m := must(idempotency.New(&idempotency.Options{Transactor: failingTx{}}))
		h := &orders{}
		requireProblem(t, serve(m.Handler(h), req("POST", "/orders", "k1", authA, order)), 503, "service_unavailable")
		require.Zero(t, h.calls.Load())
	})
}

type failingTx struct{}

func (failingTx) InTx(context.Context, func(context.Context, driver.Store) error) error {
	return errors.New("begin: too many connections")
}

func TestKeyFromHeader(t *testing.T) {
	cases := []struct {
		name   string
		header map[string][]string
		want   string
		err    error
	}{
		{"present", map[string][]string{"Idempotency-Key": {"abc"}}, "abc", nil},
		{"missing", map[string][]string{}, "", idempotency.ErrKeyMissing},
		{"empty value", map[string][]string{"Idempotency-Key": {""}}, "", idempotency.ErrKeyInvalid},
		{"twice", map[string][]string{"Idempotency-Key": {"a", "b"}}, "", idempotency.ErrKeyInvalid},
		{"non-canonical name is not looked up", map[string][]string{"idempotency-key": {"abc"}}, "", idempotency.ErrKeyMissing},
		{"quoted (sf-string form) is taken as sent", map[string][]string{"Idempotency-Key": {`"abc"`}}, `"abc"`, nil},
		{"leading space", map[string][]string{"Idempotency-Key": {" abc"}}, "", idempotency.ErrKeyInvalid},
		{"tab", map[string][]string{"Idempotency-Key": {"a\tb"}}, "", idempotency.ErrKeyInvalid},
		{"DEL", map[string][]string{"Idempotency-Key": {"a\x7f"}}, "", idempotency.ErrKeyInvalid},
		{"255 bytes", map[string][]string{"Idempotency-Key": {strings.Repeat("~", 255)}}, strings.Repeat("~", 255), nil},
		{"256 bytes", map[string][]string{"Idempotency-Key": {strings.Repeat("!", 256)}}, "", idempotency.ErrKeyInvalid},
		{"85 euro signs: 85 characters, 255 bytes, not ASCII", map[string][]string{"Idempotency-Key": {strings.Repeat("€", 85)}}, "", idempotency.ErrKeyInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := idempotency.KeyFromHeader(tc.header)
			require.ErrorIs(t, err, tc.err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestNewKey(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		k := idempotency.NewKey()
		require.True(t, idempotency.ValidKey(k))
		require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, k)
		require.False(t, seen[k])
		seen[k] = true
	}
}
