package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/svcplatform/conventions/internal/retryafter"
)

// Defaults of Transport.
const (
	DefaultMaxAttempts     = 4
	DefaultMinBackoff      = 200 * time.Millisecond
	DefaultMaxBackoff      = 10 * time.Second
	DefaultMaxRetryAfter   = time.Minute
	DefaultMaxBufferedBody = 1 << 20
)

// Transport is the client side of the protocol, an http.RoundTripper for calling idempotent APIs. On
// a mutating request (POST, PUT, PATCH, DELETE by default) it adds an Idempotency-Key when the request
// has none (NewKey), and retries with the same key and the same body when the attempt failed in a way
// a retry can fix: a network error, 409 (the first attempt is still running), 429 (a rate limit or a
// quota: the request was refused, not carried out) or 5xx. Because the key is the same, the server
// runs the operation at most once, and a retry that comes after the first attempt completed gets its
// response replayed.
//
// Retries wait exactly Retry-After when the response has one (delay-seconds or an HTTP-date, RFC
// 9110 §10.2.3), and otherwise — a network error, or a 409, 429 or 5xx without a Retry-After it can
// read — with exponential backoff and jitter (MinBackoff doubling up to MaxBackoff, each wait drawn
// from its upper half). A Retry-After longer than MaxRetryAfter is not waited for: the response is
// returned. A response with Idempotent-Replayed: true is final and returned as it is, whatever its
// status: retrying could only replay it again. The request's context bounds everything: a wait that
// would end after its deadline is not started (the last response, or error, is returned at once),
// and when the context ends during a wait, RoundTrip returns its error at once.
//
// The body is replayed from req.GetBody (which http.NewRequest sets for in-memory bodies) or, when
// there is none, from a copy of up to MaxBufferedBody bytes; a larger body without GetBody is sent
// once, without retries. Other methods pass through untouched.
//
// A Transport is safe for concurrent use. Its zero value is ready to use: it wraps
// http.DefaultTransport with the defaults below.
type Transport struct {
	// Base sends each attempt. Default http.DefaultTransport.
	Base http.RoundTripper
	// MaxAttempts bounds the attempts, the first included. Default DefaultMaxAttempts.
	MaxAttempts int
	// MinBackoff is the wait before the first retry; it doubles per retry. Default DefaultMinBackoff.
	MinBackoff time.Duration
	// MaxBackoff caps the backoff. Default DefaultMaxBackoff.
	MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After honoured; a response asking for a longer wait is
	// returned to the caller instead. Default DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// MaxBufferedBody bounds the copy of a body that has no GetBody. Default DefaultMaxBufferedBody.
	MaxBufferedBody int64
	// Methods are the methods that get a key and retries. Default POST, PUT, PATCH, DELETE.
	Methods []string
	// NewKey makes keys. Default NewKey (UUID v4).
	NewKey func() string
}

var _ http.RoundTripper = (*Transport)(nil)

func (t *Transport) mutating(method string) bool {
	if len(t.Methods) == 0 {
		switch method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			return true
		}
		return false
	}
	return slices.Contains(t.Methods, method)
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// RoundTrip implements http.RoundTripper. It does not modify req: each attempt is a clone.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if !t.mutating(req.Method) {
		return base.RoundTrip(req)
	}
	key := req.Header.Get(HeaderKey)
	if key == "" {
		if t.NewKey != nil {
			key = t.NewKey()
		} else {
			key = NewKey()
		}
	}
	body, replayable, err := t.body(req)
	if err != nil {
		return nil, err
	}
	maxAttempts := orDefault(t.MaxAttempts, DefaultMaxAttempts)
	if !replayable {
		maxAttempts = 1
	}
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		r := req.Clone(ctx)
		r.Header.Set(HeaderKey, key)
		if r.Body, err = body(attempt); err != nil {
			return nil, fmt.Errorf("idempotency: replay request body: %w", err)
		}
		resp, err := base.RoundTrip(r)
		if attempt >= maxAttempts {
			return resp, err
		}
		wait, retry := t.retryable(ctx, resp, err, attempt)
		if !retry {
			return resp, err
		}
		if resp != nil {
			// Drain a little so that the connection can be reused, then let it go.
			_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
			_ = resp.Body.Close()
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("idempotency: waiting to retry %s %s: %w", req.Method, req.URL.Redacted(), context.Cause(ctx))
		case <-timer.C:
		}
	}
}

// body returns a function that yields the body for each attempt, and whether there can be more
// than one attempt.
func (t *Transport) body(req *http.Request) (func(attempt int) (io.ReadCloser, error), bool, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return func(int) (io.ReadCloser, error) { return req.Body, nil }, true, nil
	}
	if req.GetBody != nil {
		return func(attempt int) (io.ReadCloser, error) {
			if attempt == 1 {
				return req.Body, nil
			}
			return req.GetBody()
		}, true, nil
	}
	limit := orDefault(t.MaxBufferedBody, DefaultMaxBufferedBody)
	buf, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil {
		_ = req.Body.Close()
		return nil, false, fmt.Errorf("idempotency: read request body: %w", err)
	}
	if int64(len(buf)) > limit {
		// Too large to keep: send it once, what was read followed by the rest.
		rest := struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(buf), req.Body), req.Body}
		return func(int) (io.ReadCloser, error) { return rest, nil }, false, nil
	}
	_ = req.Body.Close()
	return func(int) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }, true, nil
}

// retryable decides whether an attempt's outcome is worth retrying with the same key, and after how
// long.
func (t *Transport) retryable(ctx context.Context, resp *http.Response, err error, attempt int) (time.Duration, bool) {
	if ctx.Err() != nil {
		return 0, false
	}
	if err != nil {
		// A network error: the request may or may not have reached the server. The same key makes
		// finding out safe.
		wait := t.backoff(attempt)
		return wait, !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && fits(ctx, time.Now(), wait)
	}
	if resp.Header.Get(HeaderReplayed) == "true" {
		return 0, false
	}
	switch {
	case resp.StatusCode == http.StatusConflict, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
	default:
		return 0, false
	}
	now := time.Now()
	wait, ok := retryafter.Parse(resp.Header.Get("Retry-After"), now)
	switch {
	case !ok:
		wait = t.backoff(attempt)
	case wait > orDefault(t.MaxRetryAfter, DefaultMaxRetryAfter):
		return 0, false
	}
	return wait, fits(ctx, now, wait)
}

// fits reports whether a retry after wait can still start before ctx's deadline: waiting past it
// could only end in the context's error, so the caller gets the response it has instead.
func fits(ctx context.Context, now time.Time, wait time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || now.Add(wait).Before(deadline)
}

// backoff is the wait after the given attempt: MinBackoff·2^(attempt-1), capped, drawn uniformly from
// its upper half so that clients that failed together do not retry together.
func (t *Transport) backoff(attempt int) time.Duration {
	lo, hi := orDefault(t.MinBackoff, DefaultMinBackoff), orDefault(t.MaxBackoff, DefaultMaxBackoff)
	d := lo
	for i := 1; i < attempt && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	half := d / 2
	return half + rand.N(d-half+1)
}
