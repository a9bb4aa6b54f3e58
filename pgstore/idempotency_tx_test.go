package pgstore_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/internal/testkit/testid"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
)

// idemTxEnv is one transactional-mode test: a schema with the idempotency table and the handler's
// orders table (with a deferred unique constraint, to make commits fail on demand).
type idemTxEnv struct {
	t      *testing.T
	pool   *pgxpool.Pool
	opts   *pgstore.IdempotencyStoreOptions
	clock  *idemClock
	runs   atomic.Int32
	status int // what the handler answers
	body   string
}

// idemClock is pgtest's injectable test clock.
type idemClock = pgtest.Clock

func newIdemTxEnv(t *testing.T) *idemTxEnv {
	pool, schema := pgtest.Pool(t)
	ctx := context.Background()
	opts := &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}
	require.NoError(t, pgstore.Migrate(ctx, pool, opts))
	_, err := pool.Exec(ctx, `CREATE TABLE orders (key text NOT NULL, run text NOT NULL,
		CONSTRAINT orders_key_unique UNIQUE (key) DEFERRABLE INITIALLY DEFERRED)`)
	require.NoError(t, err)
	return &idemTxEnv{t: t, pool: pool, opts: opts, clock: pgtest.NewClock(time.Now().UTC()), status: http.StatusCreated, body: `{"id":"ord_1"}`}
}

// middleware returns a transactional middleware on the env's pool; tweak adjusts its options.
func (e *idemTxEnv) middleware(tweak func(*idempotency.Options)) *idempotency.Middleware {
	o := &idempotency.Options{Transactor: must(pgstore.NewTransactor(e.pool, e.opts)), Now: e.clock.Now}
	if tweak != nil {
		tweak(o)
	}
	return must(idempotency.New(o))
}

// orderHandler writes an order in the request's transaction, then runs then (if set) and answers.
func (e *idemTxEnv) orderHandler(then func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.runs.Add(1)
		tx, ok := pgstore.TxFromContext(r.Context())
		if !ok {
			e.t.Error("no transaction in the handler's context")
			return
		}
		if _, err := tx.Exec(r.Context(), `INSERT INTO orders (key, run) VALUES ($1, $2)`,
			r.Header.Get(idempotency.HeaderKey), fmt.Sprint(e.runs.Load())); err != nil {
			e.t.Error(err)
			return
		}
		if then != nil && !then(w, r, tx) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.status)
		_, _ = io.WriteString(w, e.body)
	})
}

// idemTxBody is the body of the env's requests.
const idemTxBody = `{"account":"acc_1","side":"buy"}`

func (e *idemTxEnv) do(h http.Handler, key string) *httptest.ResponseRecorder {
	return e.doBody(h, key, idemTxBody)
}

func (e *idemTxEnv) doBody(h http.Handler, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk_sandbox_tx")
	req.Header.Set(idempotency.HeaderKey, key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func (e *idemTxEnv) orders(key string) int {
	var n int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM orders WHERE key = $1`, key).Scan(&n))
	return n
}

func (e *idemTxEnv) record(key string) (driver.Record, error) {
	return must(pgstore.NewIdempotencyStore(e.pool, e.opts)).Lookup(context.Background(),
		driver.Key{Scope: idemScope("Bearer sk_sandbox_tx"), Key: key}, e.clock.Now())
}

// requireOpaqueInternal: the answer is the opaque 500 problem, with the request_id and nothing of
// what failed inside.
func requireOpaqueInternal(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	require.Equal(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
	p, err := apierror.Parse(rec.Result())
	require.NoError(t, err)
	require.Equal(t, apierror.CodeInternal, p.Code)
	require.Equal(t, apierror.Internal().Detail, p.Detail)
	require.Empty(t, p.Errors)
	require.NotEmpty(t, p.RequestID)
	require.Empty(t, rec.Header().Get("Retry-After"))
	for _, leak := range []string{"orders", "SQLSTATE", "23505", "division", "syntax"} {
		require.NotContains(t, rec.Body.String(), leak)
	}
}

func requireProblem(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	require.Equal(t, status, rec.Code, rec.Body.String())
	p, err := apierror.Parse(rec.Result())
	require.NoError(t, err)
	require.Equal(t, code, p.Code)
}

func TestTransactorCommitStoresResponseWithWrites(t *testing.T) {
	e := newIdemTxEnv(t)
	h := e.middleware(nil).Handler(e.orderHandler(nil))
	rec := e.do(h, "k1")
	require.Equal(t, http.StatusCreated, rec.Code)
	require.Equal(t, e.body, rec.Body.String())
	require.Equal(t, 1, e.orders("k1"))
	stored, err := e.record("k1")
	require.NoError(t, err)
	require.Equal(t, driver.Completed, stored.Status)
	require.Equal(t, e.body, string(stored.Response.Body))
	// Retries replay without running the handler or writing again.
	for range 3 {
		rec = e.do(h, "k1")
		require.Equal(t, http.StatusCreated, rec.Code)
		require.Equal(t, "true", rec.Header().Get(idempotency.HeaderReplayed))
		require.Equal(t, e.body, rec.Body.String())
	}
	require.EqualValues(t, 1, e.runs.Load())
	require.Equal(t, 1, e.orders("k1"))
}

// TestTransactorRollbackLeavesNothing: every way a request can end without a commit leaves no order
// and no record, and the retry runs at once (no lease to wait for) and commits.
func TestTransactorRollbackLeavesNothing(t *testing.T) {
	cases := []struct {
		name  string
		tweak func(*idempotency.Options)
		// fail makes the first attempt fail after its order was written; check inspects its answer.
		fail  func(e *idemTxEnv, w http.ResponseWriter, r *http.Request, tx pgx.Tx) bool
		check func(t *testing.T, rec *httptest.ResponseRecorder)
		// panics: the first attempt's handler panics through the middleware.
		panics bool
	}{
		{
			name: "handler panics",
			fail: func(*idemTxEnv, http.ResponseWriter, *http.Request, pgx.Tx) bool {
				panic("handler bug")
			},
			panics: true,
		},
		{
			name: "handler's writes fail a deferred constraint at commit",
			fail: func(e *idemTxEnv, _ http.ResponseWriter, r *http.Request, tx pgx.Tx) bool {
				// A second order for the key: the deferred unique constraint fails at COMMIT.
				_, err := tx.Exec(r.Context(), `INSERT INTO orders (key, run) VALUES ($1, 'dup')`, r.Header.Get(idempotency.HeaderKey))
				require.NoError(e.t, err)
				return true
			},
			check: requireOpaqueInternal,
		},
		{
			name: "handler statement aborts the transaction",
			fail: func(e *idemTxEnv, _ http.ResponseWriter, r *http.Request, tx pgx.Tx) bool {
				_, err := tx.Exec(r.Context(), `SELECT 1/0`)
				require.Error(e.t, err)
				return true // and answers 201 anyway: the completion cannot be stored, so nothing is
			},
			check: requireOpaqueInternal,
		},
		{
			name: "handler statement violates a constraint and the handler answers 500",
			fail: func(e *idemTxEnv, w http.ResponseWriter, r *http.Request, tx pgx.Tx) bool {
				_, err := tx.Exec(r.Context(), `SET CONSTRAINTS orders_key_unique IMMEDIATE`)
				require.NoError(e.t, err)
				_, err = tx.Exec(r.Context(), `INSERT INTO orders (key, run) VALUES ($1, 'dup')`, r.Header.Get(idempotency.HeaderKey))
				var pe *pgconn.PgError
				require.ErrorAs(e.t, err, &pe)
				require.Equal(e.t, "23505", pe.Code)
				http.Error(w, "orders: "+err.Error(), http.StatusInternalServerError) // internal detail
				return false
			},
			check: requireOpaqueInternal,
		},
		{
			name: "handler statement has a syntax error",
			fail: func(e *idemTxEnv, w http.ResponseWriter, r *http.Request, tx pgx.Tx) bool {
				_, err := tx.Exec(r.Context(), `INSERT INTO orders (key, run) VALUSE ('x', 'y')`)
				require.Error(e.t, err)
				return true
			},
			check: requireOpaqueInternal,
		},
		{
			name:  "server error released",
			tweak: func(o *idempotency.Options) { o.ReleaseServerErrors = true },
			fail: func(_ *idemTxEnv, w http.ResponseWriter, _ *http.Request, _ pgx.Tx) bool {
				http.Error(w, "downstream failed", http.StatusBadGateway)
				return false
			},
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				require.Equal(t, http.StatusBadGateway, rec.Code)
			},
		},
		{
			name:  "response too large",
			tweak: func(o *idempotency.Options) { o.MaxResponseBytes = 8 },
			fail:  func(*idemTxEnv, http.ResponseWriter, *http.Request, pgx.Tx) bool { return true },
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				requireProblem(t, rec, http.StatusInternalServerError, idempotency.CodeResponseTooLarge)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newIdemTxEnv(t)
			e.t = t
			var failing atomic.Bool
			failing.Store(true)
			h := e.middleware(tc.tweak).Handler(e.orderHandler(func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) bool {
				if failing.Load() {
					return tc.fail(e, w, r, tx)
				}
				return true
			}))
			if tc.panics {
				require.Panics(t, func() { e.do(h, "k") })
			} else {
				tc.check(t, e.do(h, "k"))
			}
			require.Zero(t, e.orders("k"), "the first attempt's order must have rolled back")
			_, err := e.record("k")
			require.ErrorIs(t, err, driver.ErrNotFound, "the key must be free")

			failing.Store(false)
			e.body = `{"id":"o"}` // fits every case's response cap
			if tc.tweak != nil {
				h = e.middleware(nil).Handler(e.orderHandler(nil))
			}
			rec := e.do(h, "k")
			require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
			require.EqualValues(t, 2, e.runs.Load())
			require.Equal(t, 1, e.orders("k"))
			rec = e.do(h, "k")
			require.Equal(t, "true", rec.Header().Get(idempotency.HeaderReplayed))
			require.EqualValues(t, 2, e.runs.Load())
		})
	}
}

// TestTransactorSavepointRecovers: a handler that guards a statement that may fail with a savepoint
// keeps the transaction, and its answer (here a 409 of its own) is stored with its other writes.
func TestTransactorSavepointRecovers(t *testing.T) {
	e := newIdemTxEnv(t)
	h := e.middleware(nil).Handler(e.orderHandler(func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) bool {
		sp, err := tx.Begin(r.Context())
		require.NoError(t, err)
		_, err = sp.Exec(r.Context(), `SELECT 1/0`)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.NoError(t, sp.Rollback(r.Context()))
		http.Error(w, "account frozen", http.StatusConflict)
		return false
	}))
	rec := e.do(h, "k")
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Equal(t, 1, e.orders("k"))
	rec = e.do(h, "k")
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Equal(t, "true", rec.Header().Get(idempotency.HeaderReplayed))
	require.EqualValues(t, 1, e.runs.Load())
}

// TestTransactorClientGoneFinishes: a client that disconnects while its handler is inside the
// transaction does not stop the request. The handler's context is not cancelled, it finishes, its
// writes and its response commit together, and the client's retry with the same key replays that
// response without running the handler again (Stripe's rule).
func TestTransactorClientGoneFinishes(t *testing.T) {
	e := newIdemTxEnv(t)
	inside, release := make(chan struct{}), make(chan struct{})
	var afterErr error
	h := e.middleware(nil).Handler(e.orderHandler(func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) bool {
		close(inside)
		<-release
		// The client is gone by now; the handler's next statements still run in its transaction.
		if _, afterErr = tx.Exec(r.Context(), `INSERT INTO orders (key, run) VALUES ('after', 'gone')`); afterErr != nil {
			http.Error(w, "failed", http.StatusInternalServerError)
			return false
		}
		afterErr = r.Context().Err()
		return true
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/orders", strings.NewReader(idemTxBody))
	req.Header.Set("Authorization", "Bearer sk_sandbox_tx")
	req.Header.Set(idempotency.HeaderKey, "k")
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}()
	<-inside
	cancel() // the client disconnects mid-handler
	close(release)
	<-done
	require.NoError(t, afterErr, "the handler's context must not end with the client")
	require.Equal(t, 1, e.orders("k"))
	require.Equal(t, 1, e.orders("after"))
	stored, err := e.record("k")
	require.NoError(t, err)
	require.Equal(t, driver.Completed, stored.Status)
	require.Equal(t, http.StatusCreated, stored.Response.Status)

	rec := e.do(h, "k")
	require.Equal(t, http.StatusCreated, rec.Code)
	require.Equal(t, "true", rec.Header().Get(idempotency.HeaderReplayed))
	require.Equal(t, e.body, rec.Body.String())
	require.EqualValues(t, 1, e.runs.Load())
	require.Equal(t, 1, e.orders("k"))
}

// TestTransactorDuplicateDoesNotWait: while a request's transaction is open, a duplicate (on another
// replica, another connection) answers 409 at once instead of queueing behind the uncommitted row.
func TestTransactorDuplicateDoesNotWait(t *testing.T) {
	e := newIdemTxEnv(t)
	inside, release := make(chan struct{}), make(chan struct{})
	first := e.middleware(nil).Handler(e.orderHandler(func(http.ResponseWriter, *http.Request, pgx.Tx) bool {
		close(inside)
		<-release
		return true
	}))
	second := e.middleware(nil).Handler(e.orderHandler(nil))
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- e.do(first, "k") }()
	<-inside
	rec := e.do(second, "k")
	requireProblem(t, rec, http.StatusConflict, idempotency.CodeKeyInUse)
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	close(release)
	require.Equal(t, http.StatusCreated, (<-done).Code)
	rec = e.do(second, "k")
	require.Equal(t, "true", rec.Header().Get(idempotency.HeaderReplayed))
	require.EqualValues(t, 1, e.runs.Load())
}

// TestTransactorAnotherPayloadWhileInFlight: while a request's transaction is open, a duplicate with
// the same payload gets 409 and one with another payload gets 422, the answer it keeps getting after
// the commit; the record is not visible before the commit, so the claim tells the two apart by the
// advisory lock on the key and the fingerprint.
func TestTransactorAnotherPayloadWhileInFlight(t *testing.T) {
	e := newIdemTxEnv(t)
	const otherBody = `{"account":"acc_1","side":"sell"}`
	inside, release := make(chan struct{}), make(chan struct{})
	first := e.middleware(nil).Handler(e.orderHandler(func(http.ResponseWriter, *http.Request, pgx.Tx) bool {
		close(inside)
		<-release
		return true
	}))
	dup := e.middleware(nil).Handler(e.orderHandler(nil))
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- e.do(first, "k") }()
	<-inside
	defer func() {
		select {
		case <-release:
		default:
			close(release) // a failed assertion must not leave the first request blocked
		}
	}()
	// Twice each, interleaved: a duplicate's own locks end with its transaction and never turn a later
	// duplicate's answer.
	for range 2 {
		rec := e.doBody(dup, "k", idemTxBody)
		requireProblem(t, rec, http.StatusConflict, idempotency.CodeKeyInUse)
		require.NotEmpty(t, rec.Header().Get("Retry-After"))
		requireProblem(t, e.doBody(dup, "k", otherBody), http.StatusUnprocessableEntity, idempotency.CodeKeyReused)
	}
	close(release)
	require.Equal(t, http.StatusCreated, (<-done).Code)
	rec := e.doBody(dup, "k", idemTxBody)
	require.Equal(t, http.StatusCreated, rec.Code)
	require.Equal(t, "true", rec.Header().Get(idempotency.HeaderReplayed))
	requireProblem(t, e.doBody(dup, "k", otherBody), http.StatusUnprocessableEntity, idempotency.CodeKeyReused)
	require.EqualValues(t, 1, e.runs.Load())
	require.Equal(t, 1, e.orders("k"))
}

// TestTransactorClaimReportsOtherFingerprint pins what the transactional Claim reports to a duplicate
// while the owner's transaction is open: InFlight with the caller's own fingerprint for the same
// request, InFlight with a fingerprint that differs from the caller's for another one; and once the
// owner committed, the record's real fingerprint.
func TestTransactorClaimReportsOtherFingerprint(t *testing.T) {
	e := newIdemTxEnv(t)
	ctx := context.Background()
	tr := must(pgstore.NewTransactor(e.pool, e.opts))
	k := driver.Key{Scope: "s", Key: "k"}
	fpB := driver.Fingerprint(sha256.Sum256([]byte("POST /v1/orders {2}")))
	now := e.clock.Now()
	claimInTx := func(fp driver.Fingerprint) driver.Claim {
		var c driver.Claim
		require.NoError(t, tr.InTx(ctx, func(ctx context.Context, s driver.Store) error {
			var err error
			c, err = s.Claim(ctx, k, fp, now, now.Add(idemLease), now.Add(idemRetention))
			return err
		}))
		return c
	}
	claimed, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo) // before the pool closes: a failed assertion must not leave the owner blocked
	owner := make(chan error, 1)
	go func() {
		owner <- tr.InTx(ctx, func(ctx context.Context, s driver.Store) error {
			c, err := s.Claim(ctx, k, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
			if err != nil {
				close(claimed)
				return err
			}
			close(claimed)
			<-release
			return s.Complete(ctx, k, c.Token, driver.Response{Status: http.StatusCreated}, now.Add(idemRetention))
		})
	}()
	<-claimed
	same := claimInTx(idemFP1)
	require.Equal(t, driver.InFlight, same.Status)
	require.Equal(t, idemFP1, same.Fingerprint)
	other := claimInTx(fpB)
	require.Equal(t, driver.InFlight, other.Status)
	require.NotEqual(t, fpB, other.Fingerprint, "the caller must see a fingerprint other than its own")
	require.Zero(t, other.Token)
	letGo()
	require.NoError(t, <-owner)
	after := claimInTx(fpB)
	require.Equal(t, driver.Completed, after.Status)
	require.Equal(t, idemFP1, after.Fingerprint, "a committed record reports its own fingerprint")
	require.Nil(t, after.Response, "another request never gets the stored response")
}

// TestTransactorTakesOverDeadStoreModeOwner: replicas in transactional mode meet a record that a
// replica in store mode claimed and then died with. The first request after the lease only marks the
// record (409); the middleware rolls that request's transaction back, and the mark must survive it, so
// that a request after the extra lease takes the key over and runs, and the dead owner is fenced.
func TestTransactorTakesOverDeadStoreModeOwner(t *testing.T) {
	e := newIdemTxEnv(t)
	ctx := context.Background()
	store := must(pgstore.NewIdempotencyStore(e.pool, e.opts))
	k := driver.Key{Scope: idemScope("Bearer sk_sandbox_tx"), Key: "k"}
	fp := idempotency.NewFingerprint(http.MethodPost, "/v1/orders", "", sha256.Sum256([]byte(idemTxBody)))
	start := e.clock.Now()
	dead, err := store.Claim(ctx, k, fp, start, start.Add(idemLease), start.Add(idemRetention))
	require.NoError(t, err)
	require.Equal(t, driver.Claimed, dead.Status)

	h := e.middleware(func(o *idempotency.Options) { o.Lease = idemLease }).Handler(e.orderHandler(nil))
	e.clock.Advance(idemLease)
	requireProblem(t, e.do(h, "k"), http.StatusConflict, idempotency.CodeKeyInUse)
	var suspected bool
	var leaseUntil time.Time
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT suspected, lease_until FROM idem WHERE scope = $1 AND key = $2`,
		k.Scope, k.Key).Scan(&suspected, &leaseUntil))
	require.True(t, suspected, "the mark survives the rolled-back request")
	require.WithinDuration(t, start.Add(2*idemLease), leaseUntil, time.Microsecond)
	require.Zero(t, e.runs.Load())

	// Within the extra lease: still in flight, and the mark is not made twice.
	e.clock.Advance(idemLease / 2)
	requireProblem(t, e.do(h, "k"), http.StatusConflict, idempotency.CodeKeyInUse)
	e.clock.Advance(idemLease / 2)
	rec := e.do(h, "k")
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	require.EqualValues(t, 1, e.runs.Load())
	require.ErrorIs(t, store.Complete(ctx, k, dead.Token, driver.Response{Status: 500}, start.Add(idemRetention)), driver.ErrLeaseLost)
	rec = e.do(h, "k")
	require.Equal(t, "true", rec.Header().Get(idempotency.HeaderReplayed))
	require.EqualValues(t, 1, e.runs.Load())
}

// TestTransactorSharesRecordsWithStoreMode: both modes use the same rows, so replicas may mix them.
func TestTransactorSharesRecordsWithStoreMode(t *testing.T) {
	e := newIdemTxEnv(t)
	plain := must(idempotency.New(&idempotency.Options{Store: must(pgstore.NewIdempotencyStore(e.pool, e.opts)), Now: e.clock.Now}))
	txm := e.middleware(nil)
	inside, release := make(chan struct{}), make(chan struct{})
	var plainRuns atomic.Int32
	hPlain := plain.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plainRuns.Add(1)
		close(inside)
		<-release
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"from":"store mode"}`)
	}))
	hTx := txm.Handler(e.orderHandler(nil))
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- e.do(hPlain, "k") }()
	<-inside
	requireProblem(t, e.do(hTx, "k"), http.StatusConflict, idempotency.CodeKeyInUse)
	close(release)
	require.Equal(t, http.StatusCreated, (<-done).Code)
	rec := e.do(hTx, "k")
	require.Equal(t, `{"from":"store mode"}`, rec.Body.String())
	require.Equal(t, "true", rec.Header().Get(idempotency.HeaderReplayed))
	require.Zero(t, e.runs.Load())

	// And the other way round.
	require.Equal(t, http.StatusCreated, e.do(hTx, "k2").Code)
	rec = e.do(hPlain, "k2")
	require.Equal(t, e.body, rec.Body.String())
	require.EqualValues(t, 1, plainRuns.Load())
}

// TestTransactorIsolation: the transaction is READ COMMITTED even where the server defaults to a
// stricter level, since the claim's re-read needs each statement's fresh snapshot.
func TestTransactorIsolation(t *testing.T) {
	e := newIdemTxEnv(t)
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "serializable"
	cfg.ConnConfig.RuntimeParams["search_path"] = e.opts.Schema
	strict, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(strict.Close)
	var level string
	m := must(idempotency.New(&idempotency.Options{Transactor: must(pgstore.NewTransactor(strict, e.opts))}))
	rec := e.do(m.Handler(e.orderHandler(func(_ http.ResponseWriter, r *http.Request, tx pgx.Tx) bool {
		require.NoError(t, tx.QueryRow(r.Context(), `SHOW transaction_isolation`).Scan(&level))
		return true
	})), "k")
	require.Equal(t, http.StatusCreated, rec.Code)
	require.Equal(t, "read committed", level)
}

// TestTransactorInsideCallerTx: on a pgx.Tx the Transactor works in a savepoint of the caller's
// transaction, which decides in the end.
func TestTransactorInsideCallerTx(t *testing.T) {
	e := newIdemTxEnv(t)
	ctx := context.Background()
	outer, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	tr := must(pgstore.NewTransactor(outer, e.opts))
	err = tr.InTx(ctx, func(ctx context.Context, s driver.Store) error {
		tx, ok := pgstore.TxFromContext(ctx)
		require.True(t, ok)
		_, err := tx.Exec(ctx, `INSERT INTO orders (key, run) VALUES ('k', 'nested')`)
		require.NoError(t, err)
		return nil
	})
	require.NoError(t, err)
	require.Zero(t, e.orders("k"), "not visible before the caller commits")
	require.NoError(t, outer.Rollback(ctx))
	require.Zero(t, e.orders("k"))
	_, ok := pgstore.TxFromContext(ctx)
	require.False(t, ok)
}

// TestTransactorFnError: InTx returns fn's error and rolls back; Begin failing is wrapped.
func TestTransactorFnError(t *testing.T) {
	e := newIdemTxEnv(t)
	ctx := context.Background()
	boom := errors.New("boom")
	err := must(pgstore.NewTransactor(e.pool, e.opts)).InTx(ctx, func(ctx context.Context, s driver.Store) error {
		c, err := s.Claim(ctx, driver.Key{Scope: "s", Key: "k"}, idemFP1, e.clock.Now(), e.clock.Now().Add(time.Minute), e.clock.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, driver.Claimed, c.Status)
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = must(pgstore.NewIdempotencyStore(e.pool, e.opts)).Lookup(ctx, driver.Key{Scope: "s", Key: "k"}, e.clock.Now())
	require.ErrorIs(t, err, driver.ErrNotFound)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	err = must(pgstore.NewTransactor(e.pool, e.opts)).InTx(cancelled, func(context.Context, driver.Store) error {
		t.Error("fn must not run without a transaction")
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Contains(t, err.Error(), "pgstore:")
	require.Panics(t, func() { must(pgstore.NewTransactor(nil, nil)) })
}

// BenchmarkIdempotencyTransactor measures the transactional mode's own cost per request, in
// parallel: BEGIN, claim, complete, COMMIT on distinct keys (ClaimComplete), and BEGIN, a claim that
// finds the stored response, ROLLBACK on a few hot keys (Replay).
func BenchmarkIdempotencyTransactor(b *testing.B) {
	pool, schema := pgtest.Pool(b)
	ctx := context.Background()
	opts := &pgstore.IdempotencyStoreOptions{Schema: schema, Table: "idem"}
	require.NoError(b, pgstore.Migrate(ctx, pool, opts))
	tr := must(pgstore.NewTransactor(pool, opts))
	resp := driver.Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: make([]byte, 256)}
	now := time.Now()
	errReplay := errors.New("replayed: roll back")
	// once runs one request in a transaction and reports what its claim found.
	once := func(k driver.Key) (driver.Status, error) {
		var st driver.Status
		err := tr.InTx(ctx, func(ctx context.Context, s driver.Store) error {
			c, err := s.Claim(ctx, k, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
			if err != nil {
				return err
			}
			if st = c.Status; st != driver.Claimed {
				return errReplay
			}
			return s.Complete(ctx, k, c.Token, resp, now.Add(idemRetention))
		})
		if errors.Is(err, errReplay) {
			err = nil
		}
		return st, err
	}
	run := func(b *testing.B, want driver.Status, key func(i int64) driver.Key) {
		var seq atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				st, err := once(key(seq.Add(1)))
				if err != nil || st != want {
					b.Errorf("%v %v", st, err)
					return
				}
			}
		})
	}
	b.Run("ClaimCompleteParallel", func(b *testing.B) {
		scope := testid.New("bench_")
		run(b, driver.Claimed, func(i int64) driver.Key { return driver.Key{Scope: scope, Key: fmt.Sprint(i)} })
	})
	b.Run("ReplayParallel", func(b *testing.B) {
		scope := testid.New("bench_")
		for i := range 16 {
			st, err := once(driver.Key{Scope: scope, Key: fmt.Sprint(i)})
			require.NoError(b, err)
			require.Equal(b, driver.Claimed, st)
		}
		run(b, driver.Completed, func(i int64) driver.Key { return driver.Key{Scope: scope, Key: fmt.Sprint(i % 16)} })
	})
}

// TestTransactorConcurrentReplays: replays of a completed key in transactional mode all replay,
// although they contend for the key's advisory lock: a committed answer wins over "lock busy".
func TestTransactorConcurrentReplays(t *testing.T) {
	e := newIdemTxEnv(t)
	h := e.middleware(nil).Handler(e.orderHandler(nil))
	require.Equal(t, http.StatusCreated, e.do(h, "k").Code)
	var wg sync.WaitGroup
	codes := make([]int, 48)
	replayed := make([]string, len(codes))
	for i := range codes {
		wg.Go(func() {
			rec := e.do(h, "k")
			codes[i], replayed[i] = rec.Code, rec.Header().Get(idempotency.HeaderReplayed)
		})
	}
	wg.Wait()
	for i := range codes {
		require.Equal(t, http.StatusCreated, codes[i])
		require.Equal(t, "true", replayed[i])
	}
	require.EqualValues(t, 1, e.runs.Load())
}

// idemScope is the middleware's default scope for an Authorization value.
func idemScope(auth string) string { return idempotency.CredentialScope(auth) }
