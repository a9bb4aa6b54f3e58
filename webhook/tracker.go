package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// Errors of the Tracker. A Receiver answers every one of them with 503 and Retry-After, so the producer
// delivers again later and nothing is skipped.
var (
	// ErrFetch: the missing events of a gap could not be fetched; the cursor stays before the gap.
	ErrFetch = errors.New("webhook: fetching missed events failed")
	// ErrRangeIncomplete: a fetched range does not cover what was asked, or has a hole, a duplicate or
	// an event out of order. Nothing past the hole is processed.
	ErrRangeIncomplete = errors.New("webhook: fetched events do not cover the range")
	// ErrProcess: the ProcessFunc failed; the cursor stays before the event, which will be offered again.
	ErrProcess = errors.New("webhook: processing an event failed")
	// ErrNotAdvanced: with TrackerOptions.ProcessAdvances, the ProcessFunc returned nil but the cursor
	// did not move: without this check the event would be processed again on the next delivery.
	ErrNotAdvanced = errors.New("webhook: ProcessFunc returned nil without advancing the cursor")
	// ErrCursorStore: the CursorStore failed.
	ErrCursorStore = errors.New("webhook: cursor store failed")
	// ErrInvalidDelivery: an empty stream, a nil event, or a sequence outside 1..MaxSequence.
	ErrInvalidDelivery = errors.New("webhook: invalid delivery")
)

// ErrNotBuilt: a Tracker, Receiver or RangeClient used without its constructor, or a nil
// RangeFetcherFunc. The errors their methods return match it with errors.Is and name the type; a
// zero Receiver answers every delivery with the opaque 500.
var ErrNotBuilt = errors.New("webhook: not built with its constructor")

// notBuiltError is ErrNotBuilt for one type: its message names the type and its constructor.
type notBuiltError struct{ msg string }

func (e *notBuiltError) Error() string        { return e.msg }
func (e *notBuiltError) Is(target error) bool { return target == ErrNotBuilt }

var (
	errZeroTracker     error = &notBuiltError{"webhook: Tracker not built with NewTracker"}
	errZeroReceiver    error = &notBuiltError{"webhook: Receiver not built with NewReceiver"}
	errZeroRangeClient error = &notBuiltError{"webhook: RangeClient not built with NewRangeClient"}
	errNilFetcherFunc  error = &notBuiltError{"webhook: nil RangeFetcherFunc"}
)

// maxConflictRetries bounds how often one delivery re-reads the cursor after losing a compare-and-set.
// Each conflict means another process made progress, so a handful always suffices in practice.
const maxConflictRetries = 10

// Start says where a stream without a cursor begins.
type Start int

const (
	// StartAtBeginning: a stream without a cursor starts at sequence 1, so a first delivery n > 1 fetches
	// and processes 1…n−1 first. The default: nothing the producer still retains is skipped.
	StartAtBeginning Start = iota
	// StartAtFirstSeen: a stream without a cursor starts at the first delivery it receives. Earlier
	// events are never processed, and a later delivery with a lower sequence is a duplicate.
	StartAtFirstSeen
)

// Step is one event handed to a ProcessFunc: processing it moves the stream's cursor from From to
// Event.Sequence (always From+1, except for the first event of a StartAtFirstSeen stream). It is a
// plain value; a Tracker never hands out the zero Step, whose Event is nil.
type Step struct {
	// Stream is the stream (webhook endpoint ID) the event belongs to.
	Stream string
	// Event is the event, verified: it came in a delivery or a range response that the Verifier accepted.
	Event *Event
	// From is the cursor before this event, as the store holds it: the "from" of the compare-and-set
	// that a ProcessFunc in TrackerOptions.ProcessAdvances mode must make.
	From uint64
	// Fetched is true when the event was fetched to fill a gap rather than delivered.
	Fetched bool
}

// ProcessFunc handles one event. A Tracker calls it in sequence order, at most once at a time per
// stream, and once per event unless it fails: then the cursor stays where it was and the same event is
// offered again on a later delivery. Return an error for anything that should be retried.
type ProcessFunc func(ctx context.Context, s Step) error

// RangeFetcher fetches events a stream missed: those with from ≤ sequence ≤ to, in ascending order.
// It returns fewer only when the producer has no more (the stream ends before to). Implementations must
// return only events whose authenticity they verified — RangeClient checks the response signature.
type RangeFetcher interface {
	FetchRange(ctx context.Context, stream string, from, to uint64) ([]Event, error)
}

// RangeFetcherFunc adapts a function to a RangeFetcher. The zero (nil) RangeFetcherFunc fetches
// nothing: its FetchRange returns an error wrapping ErrNotBuilt, and NewTracker refuses it.
type RangeFetcherFunc func(ctx context.Context, stream string, from, to uint64) ([]Event, error)

// FetchRange calls f.
func (f RangeFetcherFunc) FetchRange(ctx context.Context, stream string, from, to uint64) ([]Event, error) {
	if f == nil {
		return nil, errNilFetcherFunc
	}
	return f(ctx, stream, from, to)
}

// Outcome is what a Tracker makes of a delivered event under the sequence rule. Hooks.Sequenced is
// told the rule's verdict, any of the three, before the event is processed; Receive returns what
// became of the delivery, Processed or Duplicate (see Result.Outcome). The zero value is the unknown
// outcome: the Result of a failed Receive carries it, as does the ReceiveEndInfo of an answer other
// than 200, and Hooks.Sequenced is never told it.
type Outcome int

const (
	// Processed: as a verdict, the event is the next one (sequence = cursor+1) and is processed now;
	// in a Result, the event (and any missed ones before it) was processed and the cursor moved past
	// it.
	Processed Outcome = iota + 1
	// Duplicate: the event was already processed (sequence ≤ cursor); it is acknowledged and not
	// processed again.
	Duplicate
	// Gap: events are missing before this one (sequence > cursor+1); they are fetched and processed
	// first. Only a verdict: a Result never says Gap, since a recovered gap ends Processed.
	Gap
)

// String returns the outcome in snake_case: "processed", "duplicate" or "gap"; "unknown" for the zero
// value and for a value this version does not know.
func (o Outcome) String() string {
	switch o {
	case Processed:
		return "processed"
	case Duplicate:
		return "duplicate"
	case Gap:
		return "gap"
	}
	return "unknown"
}

// Result reports a delivery the Tracker accepted. It is a plain value; the zero Result (an unknown
// Outcome) is what Receive returns along with an error.
type Result struct {
	// Outcome is Processed or Duplicate, never Gap: a gap that is recovered ends Processed, with
	// Recovered above zero. It is the zero (unknown) Outcome when Receive returns an error.
	Outcome Outcome
	// Sequence is the delivered event's sequence.
	Sequence uint64
	// Recovered counts the missed events fetched and processed before the delivered one. It may be
	// above zero even when Receive returns an error: those events stay processed.
	Recovered int
}

// TrackerOptions tune a Tracker. A nil *TrackerOptions and the zero value mean the defaults.
type TrackerOptions struct {
	// Start is where a stream without a cursor begins; the zero value is StartAtBeginning.
	Start Start
	// ProcessAdvances says that the ProcessFunc advances the cursor itself, in the same transaction as
	// its own writes (pgstore's CursorStore.ProcessInTx does this), so that processing and the cursor
	// commit together. The Tracker then does not call Advance; it reads the cursor back and fails with
	// ErrNotAdvanced if it did not move.
	ProcessAdvances bool
	// FetchBatch is how many missed events are fetched and held at a time; zero means
	// DefaultPageSize, one page of the range endpoint at its default limit, so that a gap of any
	// length is worked through page by page and never held whole. The cursor advances event by
	// event, so a long gap makes progress even when a later batch fails. When the RangeFetcher
	// answers ErrRangeTooLarge (the events are bigger than its byte budget), the Tracker asks for
	// half as many, down to one event at a time.
	FetchBatch int
	// Logger records recovered gaps, duplicates and conflicts; nil means no logging.
	Logger *slog.Logger
	// Hooks are told the verdict of the sequence rule on each delivered event (Hooks.Sequenced:
	// processed, duplicate, or gap with its size); nil means none.
	Hooks *Hooks
}

// Tracker applies the consumer's sequence rule to each stream, backed by a CursorStore:
//
//   - sequence ≤ cursor: a duplicate, acknowledged and not processed;
//   - sequence = cursor+1: processed, then the cursor advances;
//   - sequence > cursor+1: the missing range is fetched through the RangeFetcher, checked to cover
//     the whole range with no hole, and processed in order, then the delivered event. If the fetch
//     fails, Receive fails and nothing after the cursor is processed: the producer retries.
//
// Deliveries on one stream are serialized within a Tracker; across processes the store's
// compare-and-set keeps the cursor from moving twice, and a lost compare-and-set makes the delivery
// re-read the cursor and decide again. Exactly-once processing across processes needs the processing to
// commit with the cursor (TrackerOptions.ProcessAdvances); otherwise two replicas racing on the same
// event may both process it, though only one advances the cursor.
//
// A Tracker is safe for concurrent use. Its zero value is not usable: its Receive and CatchUp return
// an error that wraps ErrNotBuilt. Build one with NewTracker.
type Tracker struct {
	store           CursorStore
	fetch           RangeFetcher
	process         ProcessFunc
	start           Start
	processAdvances bool
	batch           uint64
	log             *slog.Logger
	hooks           *Hooks

	mu    sync.Mutex
	locks map[string]*streamLock
}

// streamLock serializes one stream's deliveries. It is a channel rather than a mutex so that a
// delivery whose request is cancelled stops waiting.
type streamLock struct {
	ch   chan struct{}
	refs int // waiters and holder; guarded by Tracker.mu
}

// isNilFetcherFunc reports a nil RangeFetcherFunc inside a non-nil RangeFetcher interface.
func isNilFetcherFunc(f RangeFetcher) bool {
	ff, ok := f.(RangeFetcherFunc)
	return ok && ff == nil
}

// NewTracker returns a Tracker that keeps cursors in store, fetches gaps through fetch and hands each
// event to process. All three are required.
func NewTracker(store CursorStore, fetch RangeFetcher, process ProcessFunc, opts *TrackerOptions) (*Tracker, error) {
	switch {
	case store == nil:
		return nil, errors.New("webhook: NewTracker needs a CursorStore")
	case fetch == nil || isNilFetcherFunc(fetch):
		return nil, errors.New("webhook: NewTracker needs a RangeFetcher: without one a gap could only be skipped")
	case process == nil:
		return nil, errors.New("webhook: NewTracker needs a ProcessFunc")
	}
	t := &Tracker{store: store, fetch: fetch, process: process, batch: DefaultPageSize, locks: make(map[string]*streamLock)}
	if opts != nil {
		switch opts.Start {
		case StartAtBeginning, StartAtFirstSeen:
			t.start = opts.Start
		default:
			return nil, fmt.Errorf("webhook: unknown Start %d", opts.Start)
		}
		if opts.FetchBatch < 0 {
			return nil, errors.New("webhook: negative FetchBatch")
		}
		if opts.FetchBatch > 0 {
			t.batch = uint64(opts.FetchBatch)
		}
		t.processAdvances = opts.ProcessAdvances
		t.log = opts.Logger
		t.hooks = opts.Hooks
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	return t, nil
}

// Receive applies the sequence rule to ev, delivered on stream: it processes any missed events and ev,
// or recognizes ev as a duplicate. ev must already be verified (Receiver does that). An error means ev
// was not processed and should be retried (answer 503); events recovered before the error stay
// processed and Result.Recovered counts them.
func (t *Tracker) Receive(ctx context.Context, stream string, ev *Event) (Result, error) {
	if t == nil || t.locks == nil {
		return Result{}, errZeroTracker
	}
	if stream == "" || ev == nil || ev.Sequence == 0 || ev.Sequence > MaxSequence {
		return Result{}, ErrInvalidDelivery
	}
	l, err := t.lock(ctx, stream)
	if err != nil {
		return Result{}, err
	}
	defer t.unlock(stream, l)

	res := Result{Sequence: ev.Sequence}
	for attempt := 0; ; attempt++ {
		cur, err := t.get(ctx, stream)
		if err != nil {
			return res, err
		}
		last := cur
		if cur == 0 && t.start == StartAtFirstSeen {
			last = ev.Sequence - 1
		}
		if ev.Sequence <= last {
			t.log.DebugContext(ctx, "webhook: duplicate delivery", "stream", stream, "sequence", ev.Sequence, "cursor", cur)
			if o := t.hooks; o != nil {
				o.sequenced(ctx, SequenceInfo{Stream: stream, Sequence: ev.Sequence, Cursor: cur, Outcome: Duplicate})
			}
			res.Outcome = Duplicate
			return res, nil
		}
		if ev.Sequence > last+1 {
			t.log.InfoContext(ctx, "webhook: gap, fetching missed events", "stream", stream, "from", last+1, "to", ev.Sequence-1)
			if o := t.hooks; o != nil {
				o.sequenced(ctx, SequenceInfo{Stream: stream, Sequence: ev.Sequence, Cursor: cur, Outcome: Gap,
					Missing: ev.Sequence - 1 - last})
			}
		} else if o := t.hooks; o != nil {
			o.sequenced(ctx, SequenceInfo{Stream: stream, Sequence: ev.Sequence, Cursor: cur, Outcome: Processed})
		}
		var n int
		n, cur, err = t.fill(ctx, stream, cur, last+1, ev.Sequence-1, false)
		res.Recovered += n
		if err == nil {
			err = t.apply(ctx, Step{Stream: stream, Event: ev, From: cur})
		}
		if err == nil {
			res.Outcome = Processed
			return res, nil
		}
		if !errors.Is(err, ErrCursorConflict) || attempt == maxConflictRetries {
			return res, err
		}
		t.log.InfoContext(ctx, "webhook: cursor moved concurrently, deciding again", "stream", stream, "sequence", ev.Sequence)
	}
}

// CatchUp processes every event the producer holds after the stream's cursor, for a consumer that was
// down or that wants to pick up events whose deliveries were lost for good. It stops when the
// RangeFetcher returns fewer events than asked and reports how many it processed. A stream without a
// cursor under StartAtFirstSeen has no place to start from, and CatchUp does nothing.
func (t *Tracker) CatchUp(ctx context.Context, stream string) (int, error) {
	if t == nil || t.locks == nil {
		return 0, errZeroTracker
	}
	if stream == "" {
		return 0, ErrInvalidDelivery
	}
	l, err := t.lock(ctx, stream)
	if err != nil {
		return 0, err
	}
	defer t.unlock(stream, l)

	total := 0
	for attempt := 0; ; attempt++ {
		cur, err := t.get(ctx, stream)
		if err != nil {
			return total, err
		}
		if cur == 0 && t.start == StartAtFirstSeen || cur == MaxSequence {
			return total, nil
		}
		n, _, err := t.fill(ctx, stream, cur, cur+1, MaxSequence, true)
		total += n
		if err == nil {
			return total, nil
		}
		if !errors.Is(err, ErrCursorConflict) || attempt == maxConflictRetries {
			return total, err
		}
	}
}

// fill fetches and processes the events from..to (inclusive) in batches, starting with the cursor at
// cur, and returns how many it processed and the cursor after them. With open, the stream may end
// before to; otherwise anything short of to is ErrRangeIncomplete.
func (t *Tracker) fill(ctx context.Context, stream string, cur, from, to uint64, open bool) (int, uint64, error) {
	n := 0
	batch := t.batch
	for from <= to {
		hi := to
		if hi-from >= batch {
			hi = from + batch - 1
		}
		evs, err := t.fetch.FetchRange(ctx, stream, from, hi)
		if errors.Is(err, ErrRangeTooLarge) && hi > from {
			batch = max(1, (hi-from+1)/2)
			t.log.InfoContext(ctx, "webhook: range over the fetch budget, asking for fewer events", "stream", stream,
				"from", from, "batch", batch)
			continue
		}
		if err != nil {
			return n, cur, fmt.Errorf("%w: stream %q, sequences %d to %d: %w", ErrFetch, stream, from, hi, err)
		}
		if err := checkRange(evs, from, hi, open); err != nil {
			return n, cur, fmt.Errorf("stream %q: %w", stream, err)
		}
		for i := range evs {
			if err := t.apply(ctx, Step{Stream: stream, Event: &evs[i], From: cur, Fetched: true}); err != nil {
				return n, cur, err
			}
			cur = evs[i].Sequence
			n++
		}
		if uint64(len(evs)) < hi-from+1 || hi == to {
			break // open range: the stream ends here
		}
		from = hi + 1
	}
	return n, cur, nil
}

// checkRange checks that evs are exactly from, from+1, … up to hi (or, when open, a prefix of that).
func checkRange(evs []Event, from, hi uint64, open bool) error {
	want := hi - from + 1
	if uint64(len(evs)) > want || !open && uint64(len(evs)) != want {
		return fmt.Errorf("%w: asked for sequences %d to %d, got %d events", ErrRangeIncomplete, from, hi, len(evs))
	}
	for i := range evs {
		if evs[i].Sequence != from+uint64(i) {
			return fmt.Errorf("%w: sequence %d expected at position %d, got %d", ErrRangeIncomplete, from+uint64(i), i, evs[i].Sequence)
		}
	}
	return nil
}

// apply processes one event and moves the cursor past it.
func (t *Tracker) apply(ctx context.Context, s Step) error {
	seq := s.Event.Sequence
	// Receive and fill only make steps forward, to at most MaxSequence; the store relies on it (see
	// CursorStore), and so does a ProcessFunc that advances the cursor itself: checked, not trusted
	// to the arithmetic of the callers.
	if err := checkAdvance(s.From, seq); err != nil {
		return fmt.Errorf("webhook: stream %q, step from %d to %d: %w", s.Stream, s.From, seq, err)
	}
	if err := t.process(ctx, s); err != nil {
		return fmt.Errorf("%w: stream %q, sequence %d: %w", ErrProcess, s.Stream, seq, err)
	}
	if t.processAdvances {
		got, err := t.get(ctx, s.Stream)
		if err != nil {
			return err
		}
		if got < seq {
			return fmt.Errorf("%w: stream %q, sequence %d, cursor %d", ErrNotAdvanced, s.Stream, seq, got)
		}
		return nil
	}
	if err := t.store.Advance(ctx, s.Stream, s.From, seq); err != nil {
		if errors.Is(err, ErrCursorConflict) {
			return fmt.Errorf("webhook: stream %q, advancing %d to %d: %w", s.Stream, s.From, seq, err)
		}
		return fmt.Errorf("%w: stream %q, advancing %d to %d: %w", ErrCursorStore, s.Stream, s.From, seq, err)
	}
	return nil
}

func (t *Tracker) get(ctx context.Context, stream string) (uint64, error) {
	cur, err := t.store.Get(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("%w: reading stream %q: %w", ErrCursorStore, stream, err)
	}
	return cur, nil
}

func (t *Tracker) lock(ctx context.Context, stream string) (*streamLock, error) {
	t.mu.Lock()
	l := t.locks[stream]
	if l == nil {
		l = &streamLock{ch: make(chan struct{}, 1)}
		t.locks[stream] = l
	}
	l.refs++
	t.mu.Unlock()
	select {
	case l.ch <- struct{}{}:
		return l, nil
	case <-ctx.Done():
		t.release(stream, l)
		return nil, fmt.Errorf("webhook: waiting for stream %q: %w", stream, ctx.Err())
	}
}

func (t *Tracker) unlock(stream string, l *streamLock) {
	<-l.ch
	t.release(stream, l)
}

// release drops a reference and forgets the lock when nobody holds or awaits it, so the map does not
// grow with every stream ever seen.
func (t *Tracker) release(stream string, l *streamLock) {
	t.mu.Lock()
	l.refs--
	if l.refs == 0 {
		delete(t.locks, stream)
	}
	t.mu.Unlock()
}
