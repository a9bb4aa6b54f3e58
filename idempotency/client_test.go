package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"io"
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
)

// scripted is a base RoundTripper that answers each attempt from a script, in process (so that it
// runs inside a synctest bubble), and records what it was sent.
type scripted struct {
	mu       sync.Mutex
	script   []func(r *http.Request) (*http.Response, error)
	keys     []string
	bodies   []string
	times    []time.Time
	attempts atomic.Int64
}

func (s *scripted) RoundTrip(r *http.Request) (*http.Response, error) {
	n := int(s.attempts.Add(1)) - 1
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		_ = r.Body.Close()
	}
	s.mu.Lock()
	s.keys = append(s.keys, r.Header.Get(idempotency.HeaderKey))
	s.bodies = append(s.bodies, string(body))
	s.times = append(s.times, time.Now())
	step := s.script[min(n, len(s.script)-1)]
	s.mu.Unlock()
	return step(r)
}

func respond(status int, header ...string) func(*http.Request) (*http.Response, error) {
	return func(r *http.Request) (*http.Response, error) {
		h := http.Header{}
		for i := 0; i+1 < len(header); i += 2 {
			h.Set(header[i], header[i+1])
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(http.StatusText(status))), Request: r}, nil
	}
}

func netErr(*http.Request) (*http.Response, error) {
	return nil, errors.New("read tcp 10.0.0.1:443: connection reset by peer")
}

func post(t *testing.T, ctx context.Context, body io.Reader) *http.Request {
	r, err := http.NewRequestWithContext(ctx, "POST", "https://api.example/v1/orders", body)
	require.NoError(t, err)
	return r
}

func TestTransportRetries(t *testing.T) {
	cases := []struct {
		name         string
		script       []func(*http.Request) (*http.Response, error)
		wantStatus   int
		wantErr      bool
		wantAttempts int64
	}{
		{"success at once", []func(*http.Request) (*http.Response, error){respond(201)}, 201, false, 1},
		{"network error then success", []func(*http.Request) (*http.Response, error){netErr, respond(201)}, 201, false, 2},
		{"409 in progress then replay", []func(*http.Request) (*http.Response, error){respond(409), respond(201, idempotency.HeaderReplayed, "true")}, 201, false, 2},
		{"5xx then success", []func(*http.Request) (*http.Response, error){respond(502), respond(503), respond(201)}, 201, false, 3},
		{"gives up after MaxAttempts", []func(*http.Request) (*http.Response, error){respond(500)}, 500, false, 4},
		{"network errors to the end", []func(*http.Request) (*http.Response, error){netErr}, 0, true, 4},
		{"a replayed 5xx is final", []func(*http.Request) (*http.Response, error){respond(500, idempotency.HeaderReplayed, "true")}, 500, false, 1},
		{"4xx is not retried", []func(*http.Request) (*http.Response, error){respond(422)}, 422, false, 1},
		{"400 is not retried", []func(*http.Request) (*http.Response, error){respond(400)}, 400, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &scripted{script: tc.script}
				tr := &idempotency.Transport{Base: base}
				resp, err := tr.RoundTrip(post(t, context.Background(), strings.NewReader(order)))
				if tc.wantErr {
					require.Error(t, err)
				} else {
					require.NoError(t, err)
					require.Equal(t, tc.wantStatus, resp.StatusCode)
					resp.Body.Close()
				}
				require.Equal(t, tc.wantAttempts, base.attempts.Load())
				// One key, generated once, on every attempt; the same body every time.
				require.True(t, idempotency.ValidKey(base.keys[0]))
				for i := range base.keys {
					require.Equal(t, base.keys[0], base.keys[i])
					require.Equal(t, order, base.bodies[i])
				}
			})
		})
	}
}

func TestTransportBackoffAndRetryAfter(t *testing.T) {
	t.Run("exponential with jitter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := &scripted{script: []func(*http.Request) (*http.Response, error){respond(503)}}
			tr := &idempotency.Transport{Base: base, MaxAttempts: 6, MinBackoff: 100 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
			resp, err := tr.RoundTrip(post(t, context.Background(), nil))
			require.NoError(t, err)
			resp.Body.Close()
			require.Len(t, base.times, 6)
			for i, ceil := range []time.Duration{100, 200, 400, 500, 500} {
				ceil *= time.Millisecond
				gap := base.times[i+1].Sub(base.times[i])
				require.GreaterOrEqual(t, gap, ceil/2, "wait %d", i)
				require.LessOrEqual(t, gap, ceil, "wait %d", i)
			}
		})
	})
	t.Run("Retry-After seconds", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := &scripted{script: []func(*http.Request) (*http.Response, error){respond(409, "Retry-After", "7"), respond(201)}}
			tr := &idempotency.Transport{Base: base}
			resp, err := tr.RoundTrip(post(t, context.Background(), nil))
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, 7*time.Second, base.times[1].Sub(base.times[0]))
		})
	})
	t.Run("Retry-After date", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			at := time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)
			base := &scripted{script: []func(*http.Request) (*http.Response, error){respond(503, "Retry-After", at), respond(201)}}
			tr := &idempotency.Transport{Base: base}
			resp, err := tr.RoundTrip(post(t, context.Background(), nil))
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, 3*time.Second, base.times[1].Sub(base.times[0]))
		})
	})
	t.Run("Retry-After beyond MaxRetryAfter returns the response", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := &scripted{script: []func(*http.Request) (*http.Response, error){respond(503, "Retry-After", "3600")}}
			tr := &idempotency.Transport{Base: base, MaxRetryAfter: time.Minute}
			resp, err := tr.RoundTrip(post(t, context.Background(), nil))
			require.NoError(t, err)
			require.Equal(t, 503, resp.StatusCode)
			resp.Body.Close()
			require.EqualValues(t, 1, base.attempts.Load())
		})
	})
	t.Run("context ends during the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := &scripted{script: []func(*http.Request) (*http.Response, error){respond(503, "Retry-After", "30")}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				time.Sleep(5 * time.Second)
				cancel()
			}()
			start := time.Now()
			_, err := (&idempotency.Transport{Base: base}).RoundTrip(post(t, ctx, nil))
			require.ErrorIs(t, err, context.Canceled)
			require.Equal(t, 5*time.Second, time.Since(start))
			require.EqualValues(t, 1, base.attempts.Load())
		})
	})
	t.Run("a wait past the context's deadline returns the response at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Waiting could only end in the deadline's error: the caller gets the server's answer
			// (its problem, its Retry-After) instead, without the wait.
			base := &scripted{script: []func(*http.Request) (*http.Response, error){respond(503, "Retry-After", "30")}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			resp, err := (&idempotency.Transport{Base: base}).RoundTrip(post(t, ctx, nil))
			require.NoError(t, err)
			require.Equal(t, 503, resp.StatusCode)
			require.Equal(t, "30", resp.Header.Get("Retry-After"))
			resp.Body.Close()
			require.Zero(t, time.Since(start))
			require.EqualValues(t, 1, base.attempts.Load())
		})
	})
}

// A 429 is retried with the same key and body: after exactly its Retry-After (seconds or an
// HTTP-date), or, without one, after the backoff of a 5xx; within MaxAttempts, MaxRetryAfter and the
// request's context.
func TestTransportRetries429(t *testing.T) {
	type step = func(*http.Request) (*http.Response, error)
	cases := []struct {
		name         string
		script       func() []step // built inside the bubble, where an HTTP-date is relative to its clock
		transport    idempotency.Transport
		ctxTimeout   time.Duration
		wantStatus   int
		wantAttempts int64
		wantGaps     []time.Duration // exact waits; nil: checked by wantGapRange
		wantGapRange [2]time.Duration
	}{
		{name: "Retry-After seconds", script: func() []step { return []step{respond(429, "Retry-After", "2"), respond(201)} },
			wantStatus: 201, wantAttempts: 2, wantGaps: []time.Duration{2 * time.Second}},
		{name: "Retry-After HTTP-date", script: func() []step {
			at := time.Now().Add(5 * time.Second).UTC().Format(http.TimeFormat)
			return []step{respond(429, "Retry-After", at), respond(201)}
		}, wantStatus: 201, wantAttempts: 2, wantGaps: []time.Duration{5 * time.Second}},
		{name: "Retry-After zero", script: func() []step { return []step{respond(429, "Retry-After", "0"), respond(201)} },
			wantStatus: 201, wantAttempts: 2, wantGaps: []time.Duration{0}},
		{name: "without Retry-After: the backoff", script: func() []step { return []step{respond(429), respond(429), respond(201)} },
			transport:  idempotency.Transport{MinBackoff: 100 * time.Millisecond},
			wantStatus: 201, wantAttempts: 3, wantGapRange: [2]time.Duration{50 * time.Millisecond, 200 * time.Millisecond}},
		{name: "unparsable Retry-After: the backoff", script: func() []step { return []step{respond(429, "Retry-After", "soon"), respond(201)} },
			transport:  idempotency.Transport{MinBackoff: 100 * time.Millisecond},
			wantStatus: 201, wantAttempts: 2, wantGapRange: [2]time.Duration{50 * time.Millisecond, 100 * time.Millisecond}},
		{name: "bounded by MaxAttempts", script: func() []step { return []step{respond(429, "Retry-After", "1")} },
			transport:  idempotency.Transport{MaxAttempts: 3},
			wantStatus: 429, wantAttempts: 3, wantGaps: []time.Duration{time.Second, time.Second}},
		{name: "beyond MaxRetryAfter: returned", script: func() []step { return []step{respond(429, "Retry-After", "120"), respond(201)} },
			transport:  idempotency.Transport{MaxRetryAfter: time.Minute},
			wantStatus: 429, wantAttempts: 1},
		{name: "past the context's deadline: returned at once", script: func() []step { return []step{respond(429, "Retry-After", "60"), respond(201)} },
			ctxTimeout: 30 * time.Second, wantStatus: 429, wantAttempts: 1},
		{name: "replayed 429 is final", script: func() []step {
			return []step{respond(429, "Retry-After", "1", idempotency.HeaderReplayed, "true"), respond(201)}
		},
			wantStatus: 429, wantAttempts: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &scripted{script: tc.script()}
				tr := tc.transport
				tr.Base = base
				ctx := context.Background()
				if tc.ctxTimeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.ctxTimeout)
					defer cancel()
				}
				start := time.Now()
				resp, err := tr.RoundTrip(post(t, ctx, strings.NewReader(order)))
				require.NoError(t, err)
				require.Equal(t, tc.wantStatus, resp.StatusCode)
				resp.Body.Close()
				require.Equal(t, tc.wantAttempts, base.attempts.Load())
				if tc.wantAttempts == 1 {
					require.Zero(t, time.Since(start), "no wait before returning the response")
				}
				for i := 1; i < len(base.times); i++ {
					gap := base.times[i].Sub(base.times[i-1])
					if tc.wantGaps != nil {
						require.Equal(t, tc.wantGaps[i-1], gap, "wait %d", i)
					} else {
						require.GreaterOrEqual(t, gap, tc.wantGapRange[0], "wait %d", i)
						require.LessOrEqual(t, gap, tc.wantGapRange[1], "wait %d", i)
					}
				}
				for i := range base.keys {
					require.Equal(t, base.keys[0], base.keys[i], "the same key on every attempt")
					require.Equal(t, order, base.bodies[i], "the same body on every attempt")
				}
			})
		})
	}
}

func TestTransportRequestHandling(t *testing.T) {
	t.Run("keeps the caller's key and does not modify the request", func(t *testing.T) {
		base := &scripted{script: []func(*http.Request) (*http.Response, error){respond(500), respond(201)}}
		tr := &idempotency.Transport{Base: base, MinBackoff: time.Microsecond}
		r := post(t, context.Background(), strings.NewReader(order))
		r.Header.Set(idempotency.HeaderKey, "my-key")
		resp, err := tr.RoundTrip(r)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, []string{"my-key", "my-key"}, base.keys)

		r2 := post(t, context.Background(), nil)
		_, err = tr.RoundTrip(r2)
		require.NoError(t, err)
		require.Empty(t, r2.Header.Get(idempotency.HeaderKey), "RoundTrip must not modify its request")
	})
	t.Run("safe methods pass through", func(t *testing.T) {
		base := &scripted{script: []func(*http.Request) (*http.Response, error){respond(503)}}
		tr := &idempotency.Transport{Base: base, MinBackoff: time.Microsecond}
		r, _ := http.NewRequest("GET", "https://api.example/v1/orders", nil)
		resp, err := tr.RoundTrip(r)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, []string{""}, base.keys)
		require.EqualValues(t, 1, base.attempts.Load())
	})
	t.Run("body without GetBody is buffered and replayed", func(t *testing.T) {
		base := &scripted{script: []func(*http.Request) (*http.Response, error){netErr, respond(201)}}
		tr := &idempotency.Transport{Base: base, MinBackoff: time.Microsecond}
		r := post(t, context.Background(), nil)
		r.Body = io.NopCloser(strings.NewReader(order)) // a stream: no GetBody
		r.ContentLength = -1
		resp, err := tr.RoundTrip(r)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, []string{order, order}, base.bodies)
	})
	t.Run("body too large to buffer is sent once", func(t *testing.T) {
		base := &scripted{script: []func(*http.Request) (*http.Response, error){respond(503), respond(201)}}
		tr := &idempotency.Transport{Base: base, MinBackoff: time.Microsecond, MaxBufferedBody: 8}
		r := post(t, context.Background(), nil)
		big := strings.Repeat("x", 100)
		r.Body = io.NopCloser(strings.NewReader(big))
		resp, err := tr.RoundTrip(r)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 503, resp.StatusCode)
		require.Equal(t, []string{big}, base.bodies, "the whole body, once")
	})
	t.Run("closes bodies of retried responses", func(t *testing.T) {
		var closed atomic.Int64
		first := func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 503, Header: http.Header{}, Body: closeCounter{io.NopCloser(bytes.NewReader(nil)), &closed}}, nil
		}
		base := &scripted{script: []func(*http.Request) (*http.Response, error){first, respond(201)}}
		tr := &idempotency.Transport{Base: base, MinBackoff: time.Microsecond}
		resp, err := tr.RoundTrip(post(t, context.Background(), nil))
		require.NoError(t, err)
		resp.Body.Close()
		require.EqualValues(t, 1, closed.Load())
	})
	t.Run("custom key generator and methods", func(t *testing.T) {
		base := &scripted{script: []func(*http.Request) (*http.Response, error){respond(201)}}
		tr := &idempotency.Transport{Base: base, NewKey: func() string { return "fixed" }, Methods: []string{"PUT"}}
		r, _ := http.NewRequest("PUT", "https://api.example/v1/orders/1", nil)
		resp, err := tr.RoundTrip(r)
		require.NoError(t, err)
		resp.Body.Close()
		r, _ = http.NewRequest("POST", "https://api.example/v1/orders", nil)
		resp, err = tr.RoundTrip(r)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, []string{"fixed", ""}, base.keys)
	})
}

type closeCounter struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c closeCounter) Close() error { c.n.Add(1); return c.ReadCloser.Close() }

// lossy sends each request to the server but loses the first response on the way back, as a
// dropped connection would: the server did the work, the client does not know.
type lossy struct {
	base http.RoundTripper
	lost atomic.Bool
}

func (l *lossy) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	if err == nil && l.lost.CompareAndSwap(false, true) {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, errors.New("read: connection reset by peer")
	}
	return resp, err
}

// End to end: client Transport, a connection that loses a response, the middleware on a real server.
// The retry is answered from the record; the order exists once.
func TestTransportAgainstMiddleware(t *testing.T) {
	h := &orders{}
	srv := httptest.NewServer(must(idempotency.New(nil)).Handler(h))
	defer srv.Close()
	client := &http.Client{Transport: &idempotency.Transport{Base: &lossy{base: srv.Client().Transport}, MinBackoff: time.Millisecond}}
	r, err := http.NewRequest("POST", srv.URL+"/v1/orders", strings.NewReader(order))
	require.NoError(t, err)
	r.Header.Set("Authorization", authA)
	resp, err := client.Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, 201, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get(idempotency.HeaderReplayed))
	require.Equal(t, `{"id":"ord_1","request":`+order+`}`, string(body))
	require.EqualValues(t, 1, h.calls.Load(), "a replay creates no second order")
}
