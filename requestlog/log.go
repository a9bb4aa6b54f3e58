package requestlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/internal/reqnote"
)

// Defaults of Options.
const (
	DefaultRetention     = 7 * 24 * time.Hour
	DefaultBufferSize    = 10_000
	DefaultBatchSize     = 500
	DefaultFlushInterval = time.Second
	DefaultPruneInterval = 10 * time.Minute
	DefaultStoreTimeout  = 10 * time.Second
)

// Retention is applied in bounded steps, so that a backlog of old entries never holds the flusher
// (and the buffer behind it) for long: at most pruneCalls calls of Store.DeleteBefore, of pruneLimit
// entries each, per flush interval, until a call removes fewer.
const (
	pruneLimit = 1000
	pruneCalls = 10
)

// Options configure a Log. A nil *Options and the zero value mean the defaults.
type Options struct {
	// Store keeps the entries; nil means a new MemoryStore with its defaults. A service of more than
	// one replica, or one whose support must outlive a restart, uses a shared store
	// (pgstore.RequestLogStore).
	Store Store
	// Route names the route pattern of a request, called with the request as the log's middleware
	// sees it once the handler has returned; a non-empty answer is kept as Entry.Route. Nil (the
	// default) keeps the pattern apierror.Writer.ServeMux noted, the usual wiring; set it for
	// another router, such as a plain http.ServeMux
	//
	//	Route: func(r *http.Request) string { _, pattern := mux.Handler(r); return pattern },
	//
	// or chi, whose route context the log's request shares:
	//
	//	Route: func(r *http.Request) string { return chi.RouteContext(r.Context()).RoutePattern() },
	//
	// It must return a pattern, never the path itself (which may carry anything): a value over 256
	// bytes, or one shaped like a credential (apierror.LooksLikeCredential), is not kept.
	Route func(r *http.Request) string
	// Now is the clock of Entry.At and Entry.Latency and of the retention; nil means time.Now.
	Now func() time.Time
	// Retention is how long entries are kept; zero means DefaultRetention.
	Retention time.Duration
	// BufferSize bounds the entries waiting for the flusher, besides those it has taken and is
	// writing, or holds because the Store refused them (at most BufferSize more). When it is full a
	// request's entry is dropped (and counted in Stats.Dropped): the request is never held up. Zero
	// means DefaultBufferSize.
	BufferSize int
	// BatchSize is the most entries one Store.Insert receives; a full batch is written at once.
	// Zero means DefaultBatchSize.
	BatchSize int
	// FlushInterval is how long an entry may wait for its batch to fill; zero means
	// DefaultFlushInterval.
	FlushInterval time.Duration
	// PruneInterval is how often entries older than Retention are removed (Store.DeleteBefore);
	// zero means DefaultPruneInterval.
	PruneInterval time.Duration
	// StoreTimeout bounds every Store call; zero means DefaultStoreTimeout.
	StoreTimeout time.Duration
	// Logger records failed Store calls (at Warn while the entries are kept for another try, at Error
	// for entries lost at Close; how many, never an entry), and
	// a Log mounted outside apierror.WithRequestID, once, at Warn. Nil logs nothing.
	Logger *slog.Logger
}

// Stats counts what became of the entries of a Log since New. The zero value is no entries.
type Stats struct {
	// Recorded counts the entries queued for the Store.
	Recorded uint64
	// Dropped counts the entries not queued: the buffer was full (Options.BufferSize), the Log was
	// closed, or the request had no ID (the Log was not mounted inside apierror.WithRequestID).
	Dropped uint64
	// Written counts the entries the Store accepted.
	Written uint64
	// Failed counts the entries lost because Store.Insert still failed when the Log closed. Before
	// that, a batch the Store refuses is kept and tried again.
	Failed uint64
	// Retried counts the Store.Insert calls that failed and whose batch was kept, to be tried again
	// at the next FlushInterval.
	Retried uint64
	// Pruned counts the entries the retention removed.
	Pruned uint64
}

// Log is the request log: middleware that records every request it serves (Handler), a bounded
// buffer, and a background flusher that writes the entries to the Store in batches and applies the
// retention. Recording never blocks a request on the Store.
//
// A Log is safe for concurrent use. Build one with New and stop it with Close. The zero value is not
// usable: its Handler answers the opaque 500, Record drops, Flush and Close return an error that
// wraps ErrNotBuilt, and its Stats are all zero.
type Log struct {
	store        Store
	route        func(*http.Request) string
	now          func() time.Time
	retention    time.Duration
	batchSize    int
	flushEvery   time.Duration
	pruneEvery   time.Duration
	storeTimeout time.Duration
	log          *slog.Logger

	// mu guards the buffer: Record appends under it, the flusher takes the whole buffer under it, and
	// Close sets closed under it, so no entry reaches the buffer after the flusher's last look.
	mu      sync.Mutex
	closed  bool
	buf     []Entry       // recorded, not yet taken by the flusher
	spare   []Entry       // the flusher's last buffer, written and cleared, for buf's next turn; nil when none
	size    int           // the most entries buf holds (Options.BufferSize)
	full    chan struct{} // a batch is ready: wakes the flusher, once per batch, not once per entry
	flushes chan chan error
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the flusher has returned
	once    sync.Once
	ctx     context.Context    // the flusher's Store calls
	cancel  context.CancelFunc // Close gives up on them
	noID    sync.Once

	recorded, dropped, written, failed, pruned, retries atomic.Uint64
}

// ErrNotBuilt: a Log, MemoryStore or RequestsHandler used without its constructor. The errors their
// methods return match it with errors.Is and name the type.
var ErrNotBuilt = errors.New("requestlog: not built with its constructor")

// ErrClosed: Flush on a Log that Close stopped.
var ErrClosed = errors.New("requestlog: the Log is closed")

// notBuiltError is ErrNotBuilt for one type: its message names the type and its constructor.
type notBuiltError struct{ msg string }

func (e *notBuiltError) Error() string        { return e.msg }
func (e *notBuiltError) Is(target error) bool { return target == ErrNotBuilt }

var (
	errZeroLog             error = &notBuiltError{"requestlog: Log not built with New"}
	errZeroMemoryStore     error = &notBuiltError{"requestlog: MemoryStore not built with NewMemoryStore"}
	errZeroRequestsHandler error = &notBuiltError{"requestlog: RequestsHandler not built with NewRequestsHandler"}
)

// New returns a Log configured by opts, which may be nil, and starts its flusher; stop it with Close.
// A negative duration or size is an error that names the option.
func New(opts *Options) (*Log, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Retention", o.Retention}, {"FlushInterval", o.FlushInterval}, {"PruneInterval", o.PruneInterval}, {"StoreTimeout", o.StoreTimeout}} {
		if d.v < 0 {
			return nil, fmt.Errorf("requestlog: New: negative %s %v", d.name, d.v)
		}
	}
	if o.BufferSize < 0 || o.BatchSize < 0 {
		return nil, fmt.Errorf("requestlog: New: negative BufferSize %d or BatchSize %d", o.BufferSize, o.BatchSize)
	}
	l := &Log{store: o.Store, route: o.Route, now: o.Now, retention: o.Retention, batchSize: o.BatchSize,
		flushEvery: o.FlushInterval, pruneEvery: o.PruneInterval, storeTimeout: o.StoreTimeout, log: o.Logger}
	if l.store == nil {
		l.store, _ = NewMemoryStore(nil)
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.retention == 0 {
		l.retention = DefaultRetention
	}
	if l.batchSize == 0 {
		l.batchSize = DefaultBatchSize
	}
	if l.flushEvery == 0 {
		l.flushEvery = DefaultFlushInterval
	}
	if l.pruneEvery == 0 {
		l.pruneEvery = DefaultPruneInterval
	}
	if l.storeTimeout == 0 {
		l.storeTimeout = DefaultStoreTimeout
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	size := o.BufferSize
	if size == 0 {
		size = DefaultBufferSize
	}
	l.size = size
	l.buf = make([]Entry, 0, min(size, l.batchSize))
	l.full = make(chan struct{}, 1)
	l.flushes = make(chan chan error)
	l.stop = make(chan struct{})
	l.done = make(chan struct{})
	l.ctx, l.cancel = context.WithCancel(context.Background())
	go l.run()
	return l, nil
}

// Handler returns middleware that records every request through next. Mount it inside
// apierror.WithRequestID, whose ID names the entry, and outside authentication, so that refused
// requests are recorded too; see the package documentation for the whole chain. A request that
// arrives already authenticated — an in-process call whose context carries its apikey.Principal, such
// as the portal's (package portal) — is recorded as that principal's.
func (l *Log) Handler(next http.Handler) http.Handler {
	if l == nil || l.full == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { apierror.Write(w, r, errZeroLog) })
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := l.now()
		rw := &responseWriter{ResponseWriter: w}
		if p, ok := apikey.FromContext(r.Context()); ok {
			rw.note.SetPrincipal(p.KeyID, p.Scope(), string(p.Environment))
		}
		r2 := r.WithContext(reqnote.NewContext(r.Context(), &rw.note))
		returned := false
		defer func() { l.finish(rw, r2, start, returned) }()
		next.ServeHTTP(rw, r2)
		returned = true
	})
}

// finish records the request once its handler has returned or panicked.
func (l *Log) finish(rw *responseWriter, r *http.Request, start time.Time, returned bool) {
	status := rw.status
	if status == 0 {
		// Nothing written: net/http answers 200 when the handler returns, and nothing when it
		// panics (the panic goes on from here, to a Recover outside or to the server).
		status = http.StatusOK
		if !returned {
			status = http.StatusInternalServerError
		}
	}
	id := apierror.RequestIDFromContext(r.Context())
	if id == "" {
		l.dropped.Add(1)
		l.noID.Do(func() {
			l.log.WarnContext(r.Context(), "requestlog: a request without an ID is not recorded: mount the Log inside apierror.WithRequestID")
		})
		return
	}
	f := rw.note.Fields()
	e := Entry{RequestID: id, Owner: f.Owner, KeyID: f.KeyID, Environment: f.Environment, Method: method(r.Method),
		Route: f.Route, Status: status, IdempotencyKey: f.IdempotencyKey, Replayed: f.Replayed, Version: f.Version,
		Latency: l.now().Sub(start), At: start}
	if status >= 400 {
		e.Code = f.Code
	}
	if l.route != nil {
		if p := l.route(r); p != "" {
			e.Route = p
		}
	}
	if len(e.Route) > maxRoute || apierror.LooksLikeCredential(e.Route) {
		e.Route = ""
	}
	if apierror.LooksLikeCredential(e.IdempotencyKey) {
		e.IdempotencyKey = ""
	}
	l.Record(e)
}

// maxRoute bounds Entry.Route.
const maxRoute = 256

// method returns m when it is one of net/http's methods, and "_OTHER" for anything else: a client
// may send any token as a method, and what it sends is not kept.
func method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// Record queues e for the Store, as the middleware does for each request, for a caller that serves
// requests without net/http; it reports whether e was queued. It never blocks: when the buffer is
// full, or the Log is closed, e is dropped and counted (Stats.Dropped). At and Latency are kept to the
// microsecond. The caller is responsible for what e holds: see Entry.
func (l *Log) Record(e Entry) bool {
	if l == nil || l.full == nil {
		return false
	}
	e.At = e.At.Truncate(time.Microsecond)
	e.Latency = e.Latency.Truncate(time.Microsecond)
	l.mu.Lock()
	if l.closed || len(l.buf) >= l.size {
		l.mu.Unlock()
		l.dropped.Add(1)
		return false
	}
	l.buf = append(l.buf, e)
	n := len(l.buf)
	l.mu.Unlock()
	l.recorded.Add(1)
	if n == l.batchSize {
		select {
		case l.full <- struct{}{}:
		default: // already signalled
		}
	}
	return true
}

// Flush writes every entry recorded before it was called to the Store, and returns the error of a
// write that failed meanwhile (the entries are then kept, and tried again at the next tick); then it
// applies the retention when that is due (Options.PruneInterval, by Options.Now), as the flusher's
// ticks do. A Log flushes on its own (Options.BatchSize, Options.FlushInterval): Flush is for
// tests, and for a caller that must see its entries at once. After Close it returns ErrClosed.
func (l *Log) Flush(ctx context.Context) error {
	if l == nil || l.full == nil {
		return errZeroLog
	}
	reply := make(chan error, 1)
	select {
	case l.flushes <- reply:
	case <-l.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops recording, writes what is buffered and stops the flusher: call it at shutdown, after
// the server has stopped serving (http.Server.Shutdown), so that the last requests are kept. When ctx
// ends first, the Store calls still running are cancelled, what was not written is lost, and Close
// returns ctx's error. Requests served after Close are not recorded (Stats.Dropped). Calling it again
// waits for the first call's flush.
func (l *Log) Close(ctx context.Context) error {
	if l == nil || l.full == nil {
		return errZeroLog
	}
	l.once.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		close(l.stop)
	})
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		l.cancel()
		return ctx.Err()
	}
}

// Stats returns what became of the entries so far.
func (l *Log) Stats() Stats {
	if l == nil {
		return Stats{}
	}
	return Stats{Recorded: l.recorded.Load(), Dropped: l.dropped.Load(), Written: l.written.Load(),
		Failed: l.failed.Load(), Retried: l.retries.Load(), Pruned: l.pruned.Load()}
}

// run is the flusher: it takes what the buffer holds when a batch is ready (Options.BatchSize) and
// at each tick, writes it in Store.Insert calls of at most BatchSize entries, and applies the
// retention at the ticks when it is due. Record wakes it once per batch, not once per entry: a
// request only appends to the buffer. A batch the Store refuses is held and tried again at the next
// tick (Insert skips what a write that failed late did store); meanwhile the flusher takes nothing
// more, so the buffer fills and then drops and counts what arrives: a store that is down costs the
// entries past the buffer, never the ones in hand, and is not called more than once a tick.
func (l *Log) run() {
	defer close(l.done)
	defer l.cancel()
	tick := time.NewTicker(l.flushEvery)
	defer tick.Stop()
	var held []Entry        // taken and not yet written: the Store refused them
	var nextPrune time.Time // due at the first tick
	var err error
	for {
		select {
		case <-l.full:
			if err == nil { // while the Store fails, only the ticks try again
				held, err = l.writeOut(held)
			}
		case <-tick.C:
			held, err = l.writeOut(held)
			nextPrune = l.prune(nextPrune)
		case reply := <-l.flushes:
			held, err = l.writeOut(held)
			nextPrune = l.prune(nextPrune)
			reply <- err
		case <-l.stop:
			// Close holds Record off: the buffer no longer grows. What the Store still refuses now is
			// lost, and counted.
			if held, err = l.writeOut(held); err != nil {
				l.lose(held, err)
			}
			return
		}
	}
}

// writeOut writes held, then everything the buffer holds, and returns what the Store refused (and
// what was not tried after it), with the error. It takes nothing from the buffer while held cannot
// be written.
func (l *Log) writeOut(held []Entry) ([]Entry, error) {
	if len(held) > 0 {
		if rest, err := l.writeAll(held); err != nil {
			return rest, err
		}
	}
	l.mu.Lock()
	taken := l.buf
	if len(taken) > 0 {
		// The two buffers take turns: Record fills one while this writes the other.
		l.buf, l.spare = l.spare[:0], nil
		if l.buf == nil {
			l.buf = make([]Entry, 0, min(l.size, max(l.batchSize, len(taken))))
		}
	}
	l.mu.Unlock()
	if len(taken) == 0 {
		return nil, nil // nothing taken: the buffer stays Record's
	}
	rest, err := l.writeAll(taken)
	if err == nil {
		l.spare = taken[:0] // written and cleared: free for the next turn
	}
	return rest, err
}

// writeAll writes entries in Store.Insert calls of at most BatchSize, and returns the entries from
// the first refused call on, with its error; nil when all were written.
func (l *Log) writeAll(entries []Entry) ([]Entry, error) {
	for len(entries) > 0 {
		n := min(len(entries), l.batchSize)
		if err := l.write(entries[:n]); err != nil {
			return entries, err
		}
		clear(entries[:n]) // the strings they hold are garbage now
		entries = entries[n:]
	}
	return nil, nil
}

// write hands batch to the Store.
func (l *Log) write(batch []Entry) error {
	ctx, cancel := context.WithTimeout(l.ctx, l.storeTimeout)
	err := l.store.Insert(ctx, batch)
	cancel()
	if err != nil {
		l.retries.Add(1)
		l.log.LogAttrs(context.Background(), slog.LevelWarn, "requestlog: the store failed; the entries are kept and tried again",
			slog.Int("entries", len(batch)), slog.Any("error", err))
		return fmt.Errorf("requestlog: write %d entries: %w", len(batch), err)
	}
	l.written.Add(uint64(len(batch)))
	return nil
}

// lose counts and logs the entries the Store still refused when the Log closed.
func (l *Log) lose(held []Entry, err error) {
	l.failed.Add(uint64(len(held)))
	l.log.LogAttrs(context.Background(), slog.LevelError, "requestlog: entries lost at close: the store failed",
		slog.Int("entries", len(held)), slog.Any("error", err))
}

// prune removes entries past the retention when it is due at next, in bounded steps, and returns
// when it is due again: at the next tick while old entries remain, else after PruneInterval.
func (l *Log) prune(next time.Time) time.Time {
	now := l.now()
	if now.Before(next) {
		return next
	}
	cutoff := now.Add(-l.retention)
	for range pruneCalls {
		ctx, cancel := context.WithTimeout(l.ctx, l.storeTimeout)
		n, err := l.store.DeleteBefore(ctx, cutoff, pruneLimit)
		cancel()
		l.pruned.Add(uint64(max(n, 0)))
		if err != nil {
			l.log.LogAttrs(context.Background(), slog.LevelError, "requestlog: retention failed", slog.Any("error", err))
			return now.Add(l.pruneEvery)
		}
		if n < pruneLimit {
			return now.Add(l.pruneEvery)
		}
	}
	return time.Time{} // more to remove: at the next tick
}
