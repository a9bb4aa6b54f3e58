package idempotency

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
	"github.com/svcplatform/conventions/internal/reqnote"
)

// Handler returns next wrapped with the middleware.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	if m == nil || m.store == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { apierror.Write(w, r, ErrNotBuilt) })
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

// errBodyTooLarge marks a request body over MaxRequestBytes.
var errBodyTooLarge = errors.New("idempotency: request body too large")

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !m.governs(r.Method) {
		next.ServeHTTP(w, r)
		return
	}
	// The requester first (an unauthenticated client learns nothing else), then its key.
	scope, err := m.scope(r)
	if err != nil || scope == "" {
		m.stats.rejected.Add(1)
		m.outcome(r.Context(), OutcomeRejected)
		if err == nil {
			err = errors.New("idempotency: Options.Scope returned an empty scope")
			m.log.LogAttrs(r.Context(), slog.LevelError, "idempotency: empty scope", slog.String("path", r.URL.Path))
		}
		m.problems.Write(w, r, err)
		return
	}
	key, err := KeyFromHeader(r.Header)
	if err != nil {
		m.stats.rejected.Add(1)
		m.outcome(r.Context(), OutcomeRejected)
		if err == ErrKeyMissing {
			m.problems.Write(w, r, m.pMissing)
		} else {
			m.problems.Write(w, r, m.pInvalid)
		}
		return
	}
	reqnote.From(r.Context()).SetIdempotencyKey(key)
	x := m.buffers.Get().(*exchange)
	defer func() {
		if !x.retained {
			m.putExchange(x)
		}
	}()
	if err := x.readBody(r, m.maxRequestBytes); err != nil {
		m.stats.rejected.Add(1)
		m.outcome(r.Context(), OutcomeRejected)
		var mbe *http.MaxBytesError
		if err == errBodyTooLarge || errors.As(err, &mbe) {
			m.problems.Write(w, r, m.pTooLarge)
		} else {
			m.problems.Write(w, r, m.pUnreadable)
		}
		return
	}
	req := Request{Scope: scope, Key: key}
	if m.fingerprint == nil {
		req.Fingerprint = NewFingerprint(r.Method, r.URL.EscapedPath(), r.URL.RawQuery, sha256.Sum256(x.buf))
	} else if req.Fingerprint, err = m.fingerprint(r, x.buf); err != nil {
		m.stats.rejected.Add(1)
		m.outcome(r.Context(), OutcomeRejected)
		m.problems.Write(w, r, err)
		return
	}
	if m.tx != nil {
		m.serveTx(w, r, next, x, req)
		return
	}
	a := &x.attempt
	if err := m.begin(r.Context(), req, a, m.cancelOnLoss, &x.renewal); err != nil {
		if errors.Is(err, ErrQuotaExceeded) {
			m.problems.Write(w, r, m.pQuota)
			return
		}
		if errors.Is(err, ErrRecordRefused) {
			// Never FailOpen: the request was carried out once already.
			m.problems.Write(w, r, apierror.Internal())
			return
		}
		if m.failOpen {
			m.stats.failedOpen.Add(1)
			m.outcome(r.Context(), OutcomeFailedOpen)
			m.log.LogAttrs(r.Context(), slog.LevelWarn, "idempotency: store failed; running the handler without idempotency (FailOpen)",
				slog.String("idempotency_key", key), slog.Any("error", err))
			x.body.reset(x.buf)
			r2 := r.WithContext(m.withDownstream(r.Context(), driver.Key{Scope: scope, Key: key}))
			r2.Body = &x.body
			next.ServeHTTP(w, r2)
			return
		}
		m.outcome(r.Context(), OutcomeStoreError)
		m.problems.Write(w, r, m.pUnavailable)
		return
	}
	switch a.Decision {
	case Replay:
		reqnote.From(r.Context()).SetReplayed(a.Response.Status, a.Response.Header, a.Response.Body)
		writeReplay(w, a.Response)
		return
	case InUse, Reused:
		m.problems.Write(w, r, a.Problem())
		return
	}
	m.execute(w, r, next, x, a)
}

// execute runs the handler for a claimed attempt and completes it.
func (m *Middleware) execute(w http.ResponseWriter, r *http.Request, next http.Handler, x *exchange, a *Attempt) {
	// The handler reads the buffered body. Swapping r.Body in place (and back) is what
	// http.MaxBytesReader users do. The handler's request is a copy with a context that carries the
	// DownstreamKey material: the copy and the context are one allocation, not pooled, since a
	// goroutine the handler leaves behind may still read them.
	x.body.reset(x.buf)
	ctx := a.ctx
	var start time.Time
	if m.hooks != nil {
		ctx, start = m.handlerStart(ctx, a)
	}
	g := &governedRequest{ctx: downstreamContext{Context: ctx, key: a.Key, secret: m.downstreamSecret}}
	g.req = *r.WithContext(&g.ctx) // WithContext is inlined: its own copy stays on the stack
	r2 := &g.req
	origBody := r.Body
	r2.Body = &x.body
	defer func() { r.Body = origBody }()
	rec := &x.rec
	rec.reset(w, m, false)
	finished := false
	defer func() {
		if finished {
			return
		}
		// The handler panicked (or called runtime.Goexit). Release the key so that a retry can run
		// — nothing is stored — and let the panic go on with its original stack.
		m.stats.panics.Add(1)
		if m.hooks != nil {
			m.handlerEnd(ctx, a, start, http.StatusInternalServerError, true)
		}
		x.detached.parent = r.Context()
		err := a.Release(&x.detached)
		m.log.LogAttrs(r.Context(), slog.LevelError, "idempotency: handler panicked; key released",
			slog.String("idempotency_key", a.Key.Key), slog.Any("release_error", err))
	}()
	next.ServeHTTP(rec, r2)
	finished = true
	if m.hooks != nil {
		m.handlerEnd(ctx, a, start, rec.finalStatus(), false)
	}
	x.detached.parent = r.Context()
	m.finish(&x.detached, x, a, rec)
}

// finish stores (or releases) the handler's response for a claimed attempt.
func (m *Middleware) finish(ctx context.Context, x *exchange, a *Attempt, rec *recorder) {
	rec.finalize()
	if m.releases(rec) {
		if err := a.Release(ctx); err != nil {
			m.completionFailed(ctx, a, err, "release")
		}
		return
	}
	omitted := rec.overflow || m.redacts(rec)
	err := a.completeRecorded(ctx, rec, omitted)
	if err == nil || errors.Is(err, ErrLeaseLost) {
		if err != nil {
			m.completionFailed(ctx, a, err, "complete")
		}
		return
	}
	if !omitted && errors.Is(err, memstore.ErrStoreFull) {
		// A memory store over its byte budget (memstore.ErrStoreFull): a short answer still fits. Store the response without
		// its body rather than let a retry run the handler again.
		m.log.LogAttrs(ctx, slog.LevelWarn, "idempotency: the store refused the full response; storing it without its body",
			slog.String("idempotency_key", a.Key.Key), slog.Any("error", err))
		omitted = true
		if err = a.completeRecorded(ctx, rec, true); err == nil || errors.Is(err, ErrLeaseLost) {
			return
		}
	}
	// The store failed, and the claim is still ours (renewal goes on): keep trying in the background
	// until the response is stored, the claim is lost, or Close gives up. Meanwhile duplicates find
	// the key in flight (409), as its lease is kept alive.
	m.completionFailed(ctx, a, err, "complete")
	m.pending.defer_(m, ctx, x, a, rec.stored(omitted))
}

// redacts reports whether a response is stored without its body because it carries a secret and
// there is no Sealer to store it sealed.
func (m *Middleware) redacts(rec *recorder) bool { return rec.secret && m.sealer == nil }

// releases reports whether a finished handler's claim is released instead of stored: a 5xx under
// ReleaseServerErrors, or a 4xx whose handler said nothing was done (NotPerformed).
func (m *Middleware) releases(rec *recorder) bool {
	status := rec.status
	switch {
	case m.releaseServer && status >= 500:
		return true
	case rec.notPerformed && status >= 400 && status < 500:
		return true
	}
	return false
}

func (m *Middleware) completionFailed(ctx context.Context, a *Attempt, err error, op string) {
	if errors.Is(err, ErrLeaseLost) {
		// The lease lapsed and another request took the key over: its result, not ours, is the
		// record. Our client got our response; it is not stored.
		m.log.LogAttrs(ctx, slog.LevelWarn, "idempotency: stale owner's "+op+" refused: the key was taken over",
			slog.String("idempotency_key", a.Key.Key), slog.Uint64("token", a.Token))
		return
	}
	m.log.LogAttrs(ctx, slog.LevelError, "idempotency: "+op+" failed",
		slog.String("idempotency_key", a.Key.Key), slog.Any("error", err))
}

// writeReplay answers with a stored response. A replay is never cached (Cache-Control: no-store,
// unless the original response said otherwise): it is one client's answer, and may carry a secret.
func writeReplay(w http.ResponseWriter, resp *Response) {
	h := w.Header()
	for k, vs := range resp.Header {
		if k == headerSealed {
			continue
		}
		// Shared with the store: capped so that an Add downstream copies instead of writing into it.
		h[k] = vs[:len(vs):len(vs)]
	}
	vals := make([]string, 2) // one allocation for both values
	vals[0], vals[1] = "true", "no-store"
	h[HeaderReplayed] = vals[0:1:1]
	if _, ok := resp.Header["Cache-Control"]; !ok {
		h["Cache-Control"] = vals[1:2:2]
	}
	w.WriteHeader(resp.Status)
	if len(resp.Body) > 0 {
		_, _ = w.Write(resp.Body)
	}
}

// exchange is the per-request state of a governed request, pooled.
type exchange struct {
	retained bool   // a deferred completion still owns it: not pooled by serve
	buf      []byte // the request body
	body     bodyReader
	rec      recorder
	attempt  Attempt
	renewal  renewal // never copied or zeroed: see renewal
	detached detachedContext
}

// detachedContext is context.WithoutCancel without its allocation: the completion of a request must
// not be abandoned because its client went away, but it keeps the request's values (tracing, say).
type detachedContext struct{ parent context.Context }

func (detachedContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (detachedContext) Done() <-chan struct{}       { return nil }
func (detachedContext) Err() error                  { return nil }
func (c *detachedContext) Value(key any) any        { return c.parent.Value(key) }
func (c *detachedContext) String() string           { return "idempotency.detachedContext" }

// Pooled buffers above this are dropped, so that one huge request cannot pin memory.
const maxPooledBuffer = 256 << 10

func (m *Middleware) putExchange(x *exchange) {
	if cap(x.buf) > maxPooledBuffer {
		x.buf = nil
	}
	x.body = bodyReader{}
	x.detached.parent = nil
	x.rec.release()
	x.attempt = Attempt{}
	m.buffers.Put(x)
}

// readBody reads the whole request body into x.buf, at most limit bytes.
func (x *exchange) readBody(r *http.Request, limit int64) error {
	b := x.buf[:0]
	if r.Body != nil && r.Body != http.NoBody {
		if r.ContentLength > limit {
			return errBodyTooLarge
		}
		if r.ContentLength > 0 && int64(cap(b)) < r.ContentLength+1 {
			b = make([]byte, 0, r.ContentLength+1) // +1: room to see EOF without growing
		}
		for {
			if len(b) == cap(b) {
				b = append(b, 0)[:len(b)]
			}
			room := b[len(b):cap(b)]
			if int64(len(b)+len(room)) > limit+1 {
				room = room[:limit+1-int64(len(b))]
			}
			n, err := r.Body.Read(room)
			b = b[:len(b)+n]
			if int64(len(b)) > limit {
				x.buf = b
				return errBodyTooLarge
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				x.buf = b
				return err
			}
		}
	}
	x.buf = b
	return nil
}

// bodyReader replays the buffered request body to the handler.
type bodyReader struct {
	b   []byte
	off int
}

func (br *bodyReader) reset(b []byte) { *br = bodyReader{b: b} }

func (br *bodyReader) Read(p []byte) (int, error) {
	if br.off >= len(br.b) {
		return 0, io.EOF
	}
	n := copy(p, br.b[br.off:])
	br.off += n
	return n, nil
}

// WriteTo lets io.Copy and io.ReadAll skip an intermediate buffer.
func (br *bodyReader) WriteTo(w io.Writer) (int64, error) {
	if br.off >= len(br.b) {
		return 0, nil
	}
	n, err := w.Write(br.b[br.off:])
	br.off += n
	return int64(n), err
}

func (br *bodyReader) Close() error { return nil }
