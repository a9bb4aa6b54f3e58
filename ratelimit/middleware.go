package ratelimit

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/svcplatform/conventions"
	"github.com/svcplatform/conventions/apierror"
)

// Options tune a Middleware. A nil *Options and the zero value mean the defaults.
type Options struct {
	// Now is the clock passed to the Limiter; nil means time.Now.
	Now func() time.Time
	// Problems writes the problem responses (its TypeBase and Logger). Fields left empty come from the
	// Writer apierror.Writer.Handler put in the request's context, else apierror's defaults.
	Problems apierror.Writer
	// Logger records limiter and key function failures; nil logs nothing.
	Logger *slog.Logger
	// FailClosed answers 503 when the Limiter fails. By default the request goes through: a rate limit
	// protects capacity, and an outage of the limiter should not become an outage of the API.
	FailClosed bool
	// Hooks, when set, are told the outcome of every check (never the key counted by), for metrics
	// and traces (otelconv fills them). A nil *Hooks, and a nil field, call nothing, at no cost.
	Hooks *Hooks
}

// ErrLimited: the caller is over its rate limit.
var ErrLimited = errors.New("ratelimit: rate limited")

// Middleware is the rate-limit middleware: requests over the Limiter's limit for their key get a 429
// problem (rate_limited) with Retry-After in seconds. A request its key function names no caller for is not
// limited, and the Limiter is not even consulted: with apikey.RateLimitKey that is every request of a
// sandbox key, so a sandbox load test measures the build, not a throttle.
//
// A Middleware is safe for concurrent use. Build one with New; the zero value is not usable: its
// Check returns ErrNotBuilt and its Handler answers the opaque 500.
type Middleware struct {
	limiter    Limiter
	key        conventions.CallerFunc
	now        func() time.Time
	writer     apierror.Writer
	log        *slog.Logger
	failClosed bool
	hooks      Hooks // Options.Hooks, copied; the zero value for none
}

// New returns middleware that limits requests with l, counting each by the caller key names for it:
// the key its Limiter counts by. A request key names no caller for ("" and a nil error) is not limited
// at all (apikey.RateLimitKey answers "" for a sandbox principal: the sandbox has no ceiling); key's
// error is written as the response: an *apierror.Error (a 401, say) as it is, anything else as the
// opaque 500. A nil l (a limit that limits nothing would be a silent no-op) and a nil key are errors.
func New(l Limiter, key conventions.CallerFunc, opts *Options) (*Middleware, error) {
	if l == nil {
		return nil, errors.New("ratelimit: New needs a Limiter")
	}
	if key == nil {
		return nil, errors.New("ratelimit: New needs a key CallerFunc (apikey.RateLimitKey, or the caller's own identity)")
	}
	m := &Middleware{limiter: l, key: key, now: time.Now}
	if opts != nil {
		if opts.Now != nil {
			m.now = opts.Now
		}
		m.writer, m.log, m.failClosed, m.hooks = opts.Problems, opts.Logger, opts.FailClosed, opts.Hooks.copy()
	}
	return m, nil
}

// problemError carries both the condition (for errors.Is and logs) and the problem (for apierror.Write).
type problemError struct {
	cause   error
	problem *apierror.Error
}

func (e *problemError) Error() string   { return e.cause.Error() }
func (e *problemError) Unwrap() []error { return []error{e.cause, e.problem} }

// Check is the middleware's decision without HTTP: nil when r may proceed, otherwise an error that
// wraps the condition (ErrLimited, the key function's error, or the limiter's failure) and the
// *apierror.Error to answer with.
func (m *Middleware) Check(r *http.Request) error {
	_, err := m.decide(r)
	return err
}

// decide is Check with the outcome, for the Handler's log.
func (m *Middleware) decide(r *http.Request) (Outcome, error) {
	if m == nil || m.limiter == nil {
		return 0, &problemError{cause: errZeroMiddleware, problem: apierror.Internal()}
	}
	res, retry, err := m.check(r)
	if h := m.hooks.Checked; h != nil {
		h(r.Context(), Observation{Outcome: res, RetryAfter: retry})
	}
	return res, err
}

// check is Check with the outcome and the wait for the Hooks.
func (m *Middleware) check(r *http.Request) (Outcome, time.Duration, error) {
	key, err := m.key(r)
	if err != nil {
		var p *apierror.Error
		if errors.As(err, &p) {
			return OutcomeNoKey, 0, err
		}
		return OutcomeNoKey, 0, &problemError{cause: err, problem: apierror.Internal()}
	}
	if key == "" {
		return OutcomeExempt, 0, nil
	}
	allowed, retry, err := m.limiter.Allow(r.Context(), key, m.now())
	if err != nil {
		if m.log != nil {
			m.log.ErrorContext(r.Context(), "ratelimit: limiter failed", "key", key,
				"fail_closed", m.failClosed, "error", err)
		}
		if !m.failClosed {
			return OutcomeFailedOpen, 0, nil
		}
		return OutcomeFailedClosed, 0, &problemError{cause: err, problem: apierror.Unavailable(time.Second, "rate_limiter_unavailable",
			"the rate limiter could not be consulted; retry after the number of seconds in Retry-After")}
	}
	if !allowed {
		return OutcomeRefused, retry, &problemError{cause: ErrLimited, problem: apierror.RateLimited(retry, "")}
	}
	return OutcomeAllowed, 0, nil
}

// Handler returns middleware that applies Check before next runs.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := m.decide(r)
		if err == nil {
			next.ServeHTTP(w, r)
			return
		}
		if m == nil {
			apierror.Write(w, r, err)
			return
		}
		if m.log != nil {
			var p *apierror.Error
			switch {
			case errors.Is(err, errZeroMiddleware):
				m.log.ErrorContext(r.Context(), err.Error())
			case res == OutcomeNoKey && !(errors.As(err, &p) && p.Status < 500):
				// Most often the key function reads what an authentication middleware puts in the context
				// (apikey.RateLimitKey: ErrNoPrincipal), and that middleware is not in front.
				m.log.ErrorContext(r.Context(), "ratelimit: the key function failed; put the rate limit after the middleware that identifies the caller",
					"error", err)
			case !errors.Is(err, ErrLimited):
				m.log.ErrorContext(r.Context(), "ratelimit: the request was refused", "error", err)
			}
		}
		m.writer.Write(w, r, err)
	})
}
