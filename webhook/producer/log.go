package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/svcplatform/conventions/webhook"
)

// Log is the durable event log behind a webhook producer: one stream of events per webhook endpoint,
// numbered 1, 2, 3, … with no gaps, plus the delivery state of every event.
//
// Implementations must keep these promises, which logtest.Run checks:
//
//   - The events of a stream get the sequences 1, 2, 3, …: no gap and no reuse, even when appends
//     race or a transaction that appended rolls back. A Log numbers each event either at Append, in
//     the order appends commit (MemoryLog), or after the append commits, by Sequencing.Sequence
//     (pgstore.EventLog, DeferredMemoryLog), which keeps a stream's hot counter out of the
//     appending transaction. An event is visible to Range, Claim and Status only once numbered.
//   - Range reads a contiguous, ascending slice of a stream and says whether more follow; a range that
//     starts below the retained window fails with a *PrunedError (errors.Is ErrPruned) instead of
//     silently returning a hole.
//   - Claim hands a due delivery to one caller at a time: the lease it sets keeps every other caller
//     away until the lease ends or the holder settles it, and each claim gets a fencing token that
//     makes the settlement of an older claim fail with ErrLeaseLost.
//   - No method reads the clock: every time is passed in.
//   - A Log may bound the events it keeps per stream (MemoryLog.MaxStreamEvents,
//     pgstore.EventLogOptions.MaxStreamEvents): an append that would take a stream past it fails
//     with ErrStreamFull and appends nothing, and the events Cleanup removes free their room. Events
//     appended and not yet numbered count. logtest.RunStreamQuota checks it.
//
// Log is an interface so that storage can vary (MemoryLog here, pgstore.EventLog on PostgreSQL); the
// Dispatcher, Publisher and RangeHandler hold the behaviour. Implementations must be safe for
// concurrent use.
type Log interface {
	// Append stores ev as the next event of stream and returns it with its Sequence (and its ID, when
	// ev.ID was empty: the log assigns "evt_…"); on a Sequencing log the event is numbered later and
	// the Sequence returned is 0. ev.Sequence is ignored. ev.Type must be set and
	// ev.Data must be valid JSON, or the error is ErrInvalidEvent. The event's first delivery is due
	// at ev.Created. The trace context TraceContextFrom(ctx) is stored with the event and returned in
	// Delivery.Trace (AppendBatch does the same for each event of the batch), so that a delivery
	// attempt's trace links to the request that published the event.
	Append(ctx context.Context, stream string, ev webhook.Event) (webhook.Event, error)

	// Range returns the events of stream with from ≤ Sequence ≤ to, ascending, at most limit of them,
	// and whether more events in [from, to] follow the last one returned. Unknown streams and ranges
	// past the end are empty, not errors. from must be ≥ 1, to ≥ from and limit ≥ 1 (ErrInvalidRange).
	// When from lies below the retained window the error is a *PrunedError.
	Range(ctx context.Context, stream string, from, to uint64, limit int) ([]webhook.Event, bool, error)

	// Claim leases due deliveries (pending, next attempt ≤ req.Now, no live lease) until
	// req.LeaseUntil and returns them ordered by next attempt, stream and sequence: at most req.Limit
	// in all and req.PerStream of one stream, none from the streams in req.Skip, and none from a
	// stream that already has a delivery under a live lease — an endpoint has one holder at a time,
	// which is what keeps its deliveries in order across dispatchers. Within a stream the claimed
	// deliveries are the lowest due sequences. Callers racing on the same log never receive the same
	// delivery while its lease is live.
	Claim(ctx context.Context, req ClaimRequest) ([]Delivery, error)

	// Delivered records that the leased delivery succeeded, and the attempt in the delivery history.
	// It fails with ErrLeaseLost when the lease's token is no longer the delivery's latest (someone
	// re-claimed it); nothing is recorded then.
	Delivered(ctx context.Context, lease Lease, a Attempt) error

	// Failed records a failed attempt, in the delivery state and the history. A zero a.RetryAt
	// abandons the delivery: it is never claimed again (the event stays retrievable by Range).
	// ErrLeaseLost as for Delivered.
	Failed(ctx context.Context, lease Lease, a Attempt) error

	// Release gives a leased delivery back without counting an attempt; it becomes due at retryAt.
	// ErrLeaseLost as for Delivered.
	Release(ctx context.Context, lease Lease, retryAt time.Time) error

	// Status reports the delivery state of one event, or ErrNotFound.
	Status(ctx context.Context, stream string, seq uint64) (DeliveryStatus, error)

	// Attempts lists the recorded attempts of one stream, newest first (by At, then Sequence, then
	// Number, all descending), filtered and paged by q, and says whether older ones match too.
	// Attempts go with their events at Cleanup. Implementations give each attempt a random ID
	// (AttemptRecord.ID), never a counter's.
	Attempts(ctx context.Context, q AttemptQuery) ([]AttemptRecord, bool, error)

	// Cleanup removes events (and their attempts) created before the given time, oldest first, choosing at most limit of
	// them, and returns how many it removed. A stream's retained window stays contiguous: when an event
	// goes, every lower sequence of its stream goes too (an event created slightly later than a
	// successor may therefore go with it, so the count can exceed limit by such stragglers). Stream
	// counters are kept, so sequences are never reused after a cleanup. Call it until it returns 0.
	Cleanup(ctx context.Context, before time.Time, limit int) (int, error)
}

// ByteRanger is implemented by Logs that bound a range read by bytes as well as by count, so that a
// page of large events is never read whole: MemoryLog, DeferredMemoryLog and pgstore.EventLog. The
// RangeHandler reads through it when the Log has it, and otherwise through Range in chunks of
// RangeChunk events. logtest.Run checks it.
type ByteRanger interface {
	// RangeBytes is Range that also stops before the events' Data, added up, would exceed maxBytes:
	// it returns the longest prefix of what Range would return whose Data fit in maxBytes — and at
	// least the first event, whatever its size — and reports more when events of [from, to] follow
	// the last one returned, whether the limit or the budget ended the page. maxBytes must be ≥ 1
	// (ErrInvalidRange).
	RangeBytes(ctx context.Context, stream string, from, to uint64, limit, maxBytes int) ([]webhook.Event, bool, error)
}

// BatchAppender is implemented by Logs that append several events — to one stream or to several — in
// one call: pgstore.EventLog in one statement (one round trip instead of one per event), MemoryLog
// under one lock. Publisher.PublishToEach uses it when the Log has it. AppendBatch keeps Append's
// promises for every event and is all or nothing: an invalid event (ErrInvalidEvent, naming its
// index) or a failure appends none. The events of one stream come in the batch's order, and the
// results are in the batch's order too.
type BatchAppender interface {
	AppendBatch(ctx context.Context, events []StreamEvent) ([]webhook.Event, error)
}

// StreamEvent is an event bound for a stream, for BatchAppender. It is a plain value; the zero value
// has no stream and no type, and is refused with ErrInvalidEvent.
type StreamEvent struct {
	Stream string
	Event  webhook.Event
}

// Settler is implemented by Logs that can record many attempts' outcomes in one round trip, such as
// pgstore.EventLog. The Dispatcher then gathers the outcomes its workers have ready at the same moment
// into one Settle call (a group commit): on PostgreSQL that is one commit for many deliveries instead
// of one each.
type Settler interface {
	// Settle records each settlement as Delivered (s.Delivered) or Failed would, and returns one error
	// per settlement, in order: nil, ErrLeaseLost, or the store's error. A store error may fail every
	// settlement of the call.
	Settle(ctx context.Context, s []Settlement) []error
}

// Settlement is one outcome for Settler.Settle. It is a plain value; the zero value settles no lease
// (its token 0 is never valid: ErrLeaseLost).
type Settlement struct {
	Lease     Lease
	Delivered bool
	Attempt   Attempt
}

// Lease identifies one claim of one delivery. Token is the fencing token: each claim of a delivery
// gets a token that no earlier claim of it had, and the zero token is never valid. A Lease is a plain
// value, safe to copy and share.
type Lease struct {
	Stream   string
	Sequence uint64
	Token    uint64
}

// Delivery is a claimed delivery: the event to send to the stream's endpoint and the lease that
// settles it. It is a plain value; its Event.Data is the caller's own copy. Claim never returns the
// zero Delivery.
type Delivery struct {
	Lease
	Event webhook.Event
	// Attempts is the number of failed attempts recorded before this claim.
	Attempts int
	// LeaseUntil is when the claim's lease ends.
	LeaseUntil time.Time
	// Trace is the trace context stored with the event at Append (TraceContextFrom of Append's
	// context); zero when there was none or the Log keeps none.
	Trace TraceContext
}

// ClaimRequest says what Claim may lease. It is a plain value; the zero value (Limit 0) claims
// nothing.
type ClaimRequest struct {
	// Now decides what is due and which leases are live.
	Now time.Time
	// LeaseUntil is when the leases Claim sets end; it must be after Now.
	LeaseUntil time.Time
	// Limit is the most deliveries claimed in all; below 1 claims nothing.
	Limit int
	// PerStream is the most deliveries claimed from one stream; 0 means no bound but Limit. A
	// bound keeps one endpoint's backlog from filling every claim.
	PerStream int
	// Skip lists streams not to claim from (the dispatcher's endpoints whose licensee has no delivery
	// slot free).
	Skip []string
}

// Attempt is one delivery attempt as the dispatcher records it: the delivery state's update and a
// row of the delivery history. It is a plain value; the zero value is an attempt with no response and
// no error recorded.
type Attempt struct {
	// At is when the attempt was made.
	At time.Time
	// Latency is how long the request took, until the response head (or the failure).
	Latency time.Duration
	// StatusCode is the response's status; 0 when there was no response.
	StatusCode int
	// Class says what kind of failure it was (ClassStatus, ClassTimeout, …); empty for a success.
	Class string
	// Reason says why the attempt failed ("status 503", "timeout"). It must not contain a secret.
	Reason string
	// Response is the start of the response body, at most MaxResponseSnippet bytes of valid UTF-8,
	// for a support engineer to see what the endpoint said.
	Response string
	// RetryAt is, for a failed attempt, when the next one is due; zero abandons the delivery.
	RetryAt time.Time
}

// MaxResponseSnippet bounds Attempt.Response.
const MaxResponseSnippet = 256

// Classes of failed attempts (Attempt.Class).
const (
	ClassStatus          = "http_status"      // the endpoint answered, but not 2xx (redirects included)
	ClassTimeout         = "timeout"          // no answer within the per-request timeout
	ClassConnection      = "connection"       // refused, reset, unreachable, DNS or TLS failure
	ClassBlockedAddress  = "blocked_address"  // the URL resolves to an address the guard refuses
	ClassInvalidURL      = "invalid_url"      // the endpoint's URL cannot be requested
	ClassRender          = "render_failed"    // the event could not be rendered at the endpoint's version
	ClassNoSecret        = "no_secret"        // the endpoint has no usable signing secret
	ClassEndpointDeleted = "endpoint_deleted" // the endpoint is gone; the delivery is abandoned
)

// Outcome is what became of an attempt, as the history shows it.
type Outcome int

const (
	// OutcomeFailed: the attempt failed and another is scheduled.
	OutcomeFailed Outcome = iota + 1
	// OutcomeDelivered: the attempt succeeded.
	OutcomeDelivered
	// OutcomeAbandoned: the attempt failed and no other will be made.
	OutcomeAbandoned
)

func (o Outcome) String() string {
	switch o {
	case OutcomeFailed:
		return "failed"
	case OutcomeDelivered:
		return "delivered"
	case OutcomeAbandoned:
		return "abandoned"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// AttemptRecord is one attempt of the delivery history. It is a plain value; Attempts never returns
// the zero AttemptRecord (IDs are never 0, Numbers start at 1).
type AttemptRecord struct {
	// ID identifies the attempt: random in [1, 2^63), unique in its log, and the history's cursor. It
	// orders nothing — a counter would tell every tenant how many attempts went to the others; the
	// history is ordered by At, then Sequence, then Number.
	ID       uint64
	Stream   string
	Sequence uint64
	EventID  string
	// Number counts the event's attempts: 1 for the first.
	Number  int
	Outcome Outcome
	Attempt
}

// AttemptQuery selects attempts of one stream for Log.Attempts. It is a plain value; the zero value
// has no stream and is refused with ErrInvalidRange.
type AttemptQuery struct {
	// Stream is the endpoint whose attempts are listed; required.
	Stream string
	// Sequence, when not 0, keeps the attempts of that event only.
	Sequence uint64
	// Outcome, when not 0, keeps the attempts with that outcome only.
	Outcome Outcome
	// Before, when not 0, keeps the attempts that come after the attempt with this ID in the
	// history's order (newest first), the cursor of the next page: the last ID of the previous page.
	// An ID the log does not hold (removed with its event by the retention) gives an empty page.
	Before uint64
	// Limit is the most attempts returned; it must be at least 1.
	Limit int
}

// State is where a delivery stands. The zero value is Pending.
type State int

const (
	// Pending: the delivery will be attempted (again) at NextAttempt.
	Pending State = iota
	// Delivered: an attempt succeeded.
	Delivered
	// Abandoned: the retry schedule is exhausted (or the endpoint is gone); no further attempts.
	Abandoned
)

func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Delivered:
		return "delivered"
	case Abandoned:
		return "abandoned"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// DeliveryStatus is the delivery state of one event as Log.Status reports it: a plain value, whose
// zero value is a Pending delivery never attempted.
type DeliveryStatus struct {
	State State
	// Attempts counts failed attempts.
	Attempts int
	// NextAttempt is when a Pending delivery is due.
	NextAttempt time.Time
	// LeaseUntil is when the current claim's lease ends; zero when unclaimed.
	LeaseUntil time.Time
	// LastAttempt is when the last attempt (failed or not) was made; zero before the first.
	LastAttempt time.Time
	// LastError is the Reason of the last failed attempt.
	LastError string
	// DeliveredAt is when the successful attempt was made.
	DeliveredAt time.Time
}

// Errors a Log returns. Implementations translate their drivers' errors into these.
var (
	// ErrInvalidEvent: Append was given an empty stream or type, or data that is not valid JSON.
	ErrInvalidEvent = errors.New("producer: invalid event")
	// ErrInvalidRange: Range was given from < 1, to < from or limit < 1, Attempts an empty
	// stream or a limit < 1, or ListEndpoints an empty owner or a limit < 1.
	ErrInvalidRange = errors.New("producer: invalid range")
	// ErrLeaseLost: the lease is no longer the delivery's latest claim, or the delivery was settled,
	// or it no longer exists.
	ErrLeaseLost = errors.New("producer: delivery lease lost")
	// ErrNotFound: no such event.
	ErrNotFound = errors.New("producer: event not found")
	// ErrPruned: the range starts below the retained window. The error is a *PrunedError.
	ErrPruned = errors.New("producer: events pruned by retention")
	// ErrStreamFull: Append or AppendBatch was refused, and appended nothing, because a stream holds
	// as many events as the log keeps per stream (MemoryLog.MaxStreamEvents,
	// pgstore.EventLogOptions.MaxStreamEvents). Retention frees room as it removes old events.
	ErrStreamFull = errors.New("producer: the stream holds as many events as the log keeps")
)

// PrunedError says which part of a stream retention has removed: every sequence below FirstRetained.
// errors.Is(err, ErrPruned) holds for it. It is a plain value; the zero value names no stream and no
// pruned sequence.
type PrunedError struct {
	Stream        string
	FirstRetained uint64
}

func (e *PrunedError) Error() string {
	return fmt.Sprintf("producer: events of stream %q below sequence %d are gone (retention)", e.Stream, e.FirstRetained)
}

// Is makes errors.Is(err, ErrPruned) true.
func (e *PrunedError) Is(target error) bool { return target == ErrPruned }

// CheckEvent validates what Append needs from an event; Log implementations call it first.
func CheckEvent(stream string, ev webhook.Event) error {
	switch {
	case stream == "":
		return fmt.Errorf("%w: empty stream", ErrInvalidEvent)
	case ev.Type == "":
		return fmt.Errorf("%w: empty type", ErrInvalidEvent)
	case !json.Valid(ev.Data):
		return fmt.Errorf("%w: data is not valid JSON", ErrInvalidEvent)
	}
	return nil
}

// CheckBatch validates a BatchAppender's events, each as Append would, naming the first invalid one
// by its index.
func CheckBatch(events []StreamEvent) error {
	for i, se := range events {
		if err := CheckEvent(se.Stream, se.Event); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	return nil
}

// CheckRange validates Range's arguments; Log implementations call it first.
func CheckRange(from, to uint64, limit int) error {
	switch {
	case from < 1:
		return fmt.Errorf("%w: from must be at least 1", ErrInvalidRange)
	case to < from:
		return fmt.Errorf("%w: to must not be below from", ErrInvalidRange)
	case limit < 1:
		return fmt.Errorf("%w: limit must be at least 1", ErrInvalidRange)
	}
	return nil
}

// CheckRangeBytes validates RangeBytes' arguments; Log implementations call it first.
func CheckRangeBytes(from, to uint64, limit, maxBytes int) error {
	if maxBytes < 1 {
		return fmt.Errorf("%w: maxBytes must be at least 1", ErrInvalidRange)
	}
	return CheckRange(from, to, limit)
}

// CheckAttemptQuery validates Attempts' query; Log implementations call it first.
func CheckAttemptQuery(q AttemptQuery) error {
	switch {
	case q.Stream == "":
		return fmt.Errorf("%w: attempts of an empty stream", ErrInvalidRange)
	case q.Limit < 1:
		return fmt.Errorf("%w: limit must be at least 1", ErrInvalidRange)
	}
	return nil
}

// AttemptOutcome is the outcome a Log records for a settled attempt: delivered when ok, else failed
// or, without a retry, abandoned.
func AttemptOutcome(ok bool, a Attempt) Outcome {
	switch {
	case ok:
		return OutcomeDelivered
	case a.RetryAt.IsZero():
		return OutcomeAbandoned
	}
	return OutcomeFailed
}

// CutoffUnix is the smallest unix second that is not before t: Cleanup(before) removes the events
// whose Created is below CutoffUnix(before). Log implementations call it so that all agree on events
// created within the cutoff's second.
func CutoffUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 && s < math.MaxInt64 {
		s++
	}
	return s
}
