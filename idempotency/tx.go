package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/internal/reqnote"
)

// errRollback ends a transaction whose outcome was decided without committing anything.
var errRollback = errors.New("idempotency: roll back")

// txOutcome says how serveTx's transaction ended when it rolled back on purpose.
type txOutcome int

const (
	txDecided  txOutcome = iota + 1 // replay, conflict or mismatch: the handler did not run
	txTooLarge                      // the response was over MaxResponseBytes
	txReleased                      // a 5xx under ReleaseServerErrors
)

// serveTx is serve's transactional mode. The response is buffered and reaches the client only after
// the commit, so a client never sees the result of work that then failed to commit. FailOpen does
// not apply: without the transaction there is nothing to run the handler in.
//
// The transaction runs under the request's context without its cancellation: a client that
// disconnects does not stop the request, which finishes and commits, so its retry replays the
// stored response (Stripe's rule) rather than running the operation again.
func (m *Middleware) serveTx(w http.ResponseWriter, r *http.Request, next http.Handler, x *exchange, req Request) {
	a := &x.attempt
	rec := &x.rec
	var outcome txOutcome
	panicking := false
	defer func() {
		if panicking {
			// The Transactor rolled back: nothing of this request remains, the key included.
			m.stats.panics.Add(1)
			m.stats.released.Add(1)
			m.outcome(r.Context(), OutcomeReleased)
			m.log.LogAttrs(r.Context(), slog.LevelError, "idempotency: handler panicked; transaction rolled back",
				slog.String("idempotency_key", req.Key))
		}
	}()
	err := m.tx.InTx(context.WithoutCancel(r.Context()), func(ctx context.Context, store driver.Store) error {
		req.Store, req.NoRenew = store, true
		if err := m.begin(ctx, req, a, m.cancelOnLoss, nil); err != nil {
			return err
		}
		if a.Decision != Execute {
			outcome = txDecided
			return errRollback
		}
		a.tx = true
		defer a.stop()
		rec.reset(w, m, true)
		x.body.reset(x.buf)
		hctx := a.ctx // the transaction's context
		var start time.Time
		if m.hooks != nil {
			hctx, start = m.handlerStart(hctx, a)
			defer func() {
				if panicking {
					m.handlerEnd(hctx, a, start, http.StatusInternalServerError, true)
				}
			}()
		}
		r2 := r.WithContext(hctx)
		r2.Body = &x.body
		panicking = true
		next.ServeHTTP(rec, r2)
		panicking = false
		if m.hooks != nil {
			m.handlerEnd(hctx, a, start, rec.finalStatus(), false)
		}
		rec.finalize()
		switch {
		case rec.overflow:
			outcome = txTooLarge
			return errRollback
		case m.releases(rec):
			// A 5xx under ReleaseServerErrors, or a 4xx that did nothing (NotPerformed): roll the
			// claim back with whatever the handler wrote, and answer.
			outcome = txReleased
			return errRollback
		}
		return a.completeRecorded(ctx, rec, m.redacts(rec))
	})
	switch {
	case err == nil:
		m.outcome(r.Context(), OutcomeExecuted)
		rec.flushTo(w)
	case errors.Is(err, errRollback):
		switch outcome {
		case txDecided:
			if a.Decision == Replay {
				reqnote.From(r.Context()).SetReplayed(a.Response.Status, a.Response.Header, a.Response.Body)
				writeReplay(w, a.Response)
			} else {
				m.problems.Write(w, r, a.Problem())
			}
		case txTooLarge:
			m.stats.released.Add(1)
			m.outcome(r.Context(), OutcomeReleased)
			m.log.LogAttrs(r.Context(), slog.LevelError, "idempotency: response over MaxResponseBytes in transactional mode; rolled back",
				slog.String("idempotency_key", req.Key), slog.Int64("max_response_bytes", m.maxResponseBytes))
			m.problems.Write(w, r, m.pRespTooLarge)
		case txReleased:
			m.stats.released.Add(1)
			m.outcome(r.Context(), OutcomeReleased)
			rec.flushTo(w)
		}
	case errors.Is(err, ErrQuotaExceeded):
		m.problems.Write(w, r, m.pQuota)
	case errors.Is(err, ErrRecordRefused):
		// begin counted and logged it; nothing ran, nothing was committed.
		m.problems.Write(w, r, apierror.Internal())
	case errors.Is(err, driver.ErrTxAborted):
		// The handler's own SQL failed: nothing was committed, the key included, so a corrected
		// request with the same key runs. Not a 503: retrying the same request would fail the same
		// way. Whatever the handler wrote is dropped; the client gets the opaque 500.
		m.stats.released.Add(1)
		m.outcome(r.Context(), OutcomeReleased)
		m.log.LogAttrs(r.Context(), slog.LevelError, "idempotency: the handler's statements aborted its transaction; rolled back",
			slog.String("idempotency_key", req.Key), slog.Any("error", err))
		m.problems.Write(w, r, m.pInternal)
	default:
		m.outcome(r.Context(), OutcomeStoreError)
		// The claim, the completion or the commit failed: nothing was committed, so the request was
		// not carried out and a retry with the same key is safe.
		if !errors.Is(err, ErrStore) {
			m.stats.storeErrors.Add(1)
		}
		m.log.LogAttrs(r.Context(), slog.LevelError, "idempotency: transaction failed; nothing committed",
			slog.String("idempotency_key", req.Key), slog.Any("error", err))
		m.problems.Write(w, r, m.pUnavailable)
	}
}
