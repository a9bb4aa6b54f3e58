package idempotency_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"

	"github.com/svcplatform/conventions/internal/testclock"
)

// clock is the shared injectable test clock.
type clock = testclock.Clock

func newClock() *clock { return testclock.New(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)) }

// logBuffer collects log output safely across goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// faultStore wraps a Store and fails the operations it is told to.
type faultStore struct {
	driver.Store
	claimErr, renewErr, completeErr, releaseErr atomic.Pointer[error]
	completes                                   atomic.Int64
}

func (f *faultStore) fail(p *atomic.Pointer[error], err error) { p.Store(&err) }

func load(p *atomic.Pointer[error]) error {
	if e := p.Load(); e != nil {
		return *e
	}
	return nil
}

func (f *faultStore) Claim(ctx context.Context, key driver.Key, fp driver.Fingerprint, now, leaseUntil, expiresAt time.Time) (driver.Claim, error) {
	if err := load(&f.claimErr); err != nil {
		return driver.Claim{}, err
	}
	return f.Store.Claim(ctx, key, fp, now, leaseUntil, expiresAt)
}

func (f *faultStore) Renew(ctx context.Context, key driver.Key, token uint64, leaseUntil time.Time) error {
	if err := load(&f.renewErr); err != nil {
		return err
	}
	return f.Store.Renew(ctx, key, token, leaseUntil)
}

func (f *faultStore) Complete(ctx context.Context, key driver.Key, token uint64, resp driver.Response, expiresAt time.Time) error {
	f.completes.Add(1)
	if err := load(&f.completeErr); err != nil {
		return err
	}
	return f.Store.Complete(ctx, key, token, resp, expiresAt)
}

func (f *faultStore) Release(ctx context.Context, key driver.Key, token uint64) error {
	if err := load(&f.releaseErr); err != nil {
		return err
	}
	return f.Store.Release(ctx, key, token)
}

var errDown = errors.New("store: connection refused")

// orders is a handler that creates an order per execution and counts executions.
type orders struct {
	calls atomic.Int64
}

func (o *orders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := o.calls.Add(1)
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/v1/orders/ord_"+itoa(n))
	w.Header().Set("X-Not-Replayed", "per-request")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"id":"ord_` + itoa(n) + `","request":` + string(body) + `}`))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// req builds a request; empty key and auth leave the headers out.
func req(method, target, key, auth, body string) *http.Request {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, target, nil)
	} else {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
	}
	if key != "" {
		r.Header.Set(idempotency.HeaderKey, key)
	}
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

const (
	authA = "Bearer sk_sandbox_aaaaaaaaaaaaaaaa"
	authB = "Bearer sk_sandbox_bbbbbbbbbbbbbbbb"
	order = `{"account":"acc_1","side":"buy"}`
)

// problem decodes a problem response and checks the common members.
type problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	Code      string `json:"code"`
	RequestID string `json:"request_id"`
	Errors    []struct {
		Location string `json:"location"`
		Name     string `json:"name"`
		Code     string `json:"code"`
		Detail   string `json:"detail"`
	} `json:"errors"`
}

func requireProblem(t *testing.T, w *httptest.ResponseRecorder, status int, code string) problem {
	t.Helper()
	require.Equal(t, status, w.Code, "body: %s", w.Body.String())
	require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	var p problem
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
	require.Equal(t, status, p.Status)
	require.Equal(t, code, p.Code)
	require.NotEmpty(t, p.RequestID)
	require.NotEmpty(t, p.Detail)
	require.Empty(t, w.Header().Get(idempotency.HeaderReplayed))
	return p
}
