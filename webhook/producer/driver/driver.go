// Package driver is the storage contract behind package producer: what an event log must do for the
// Publisher, Dispatcher, Sequencer and the range and deliveries handlers to keep their promises.
// Only implementers of a log read it — pgstore.EventLog, the in-memory logs of package memstore, or
// a team's own log on another database. Teams that publish and deliver events use package producer
// and pass it a log; they never call these methods themselves.
//
// # What the caller guarantees
//
// The producer package checks every argument before it calls a Log, so an implementation need not
// check them again: a stream is never empty; an appended event has a Type and valid JSON Data, and
// its trace context is sanitized (visible ASCII, at most 128 bytes of traceparent and 512 of
// tracestate); a range has 1 ≤ from ≤ to, limit ≥ 1 and maxBytes ≥ 1, and a range to redeliver
// 1 ≤ from ≤ to; an attempt query has a stream and a limit ≥ 1; a claim's LeaseUntil is after its
// Now; Cleanup's time is a whole second.
//
// # What a Log promises
//
//   - The events of a stream get the sequences 1, 2, 3, …: no gap and no reuse, even when appends
//     race or a transaction that appended rolls back. A Log numbers each event either at Append, in
//     the order appends commit (memstore.NewLog), or after the append commits, by Sequencing.Sequence
//     (pgstore.EventLog, memstore.NewDeferredLog), which keeps a stream's hot counter out of the
//     appending transaction. An event is visible to Range, Claim and Status only once numbered.
//   - Range reads a contiguous, ascending slice of a stream and says whether more follow; a range that
//     starts below the retained window fails with a *PrunedError (errors.Is ErrPruned) instead of
//     silently returning a hole.
//   - Claim hands a due delivery to one caller at a time: the lease it sets keeps every other caller
//     away until the lease ends or the holder settles it, and each claim gets a fencing token that
//     makes the settlement of an older claim fail with ErrLeaseLost.
//   - No method reads the clock: every time is passed in.
//   - A Log may bound the events it keeps per stream (memstore.Log.MaxStreamEvents,
//     pgstore.EventLogOptions.MaxStreamEvents): an append that would take a stream past it fails
//     with ErrStreamFull and appends nothing, and the events Cleanup removes free their room. Events
//     appended and not yet numbered count.
//
// Package drivertest is the conformance suite that checks these promises; every implementation runs
// it under -race. Implementations must be safe for concurrent use.
package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/svcplatform/conventions/webhook"
)

// Log is the durable event log behind a webhook producer: one stream of events per webhook endpoint,
// numbered 1, 2, 3, … with no gaps, plus the delivery state of every event. The package doc lists
// what the caller guarantees and what a Log promises.
type Log interface {
	// Append stores e.Event as the next event of e.Stream and returns it with its Sequence (and its
	// ID, when e.Event.ID was empty: the log assigns "evt_…"); on a Sequencing log the event is
	// numbered later and the Sequence returned is 0. e.Event.Sequence is ignored. The event's first
	// delivery is due at e.Event.Created. The trace context is stored with the event and returned
	// in Delivery, so that a delivery attempt's trace links to the request that published the event.
	Append(ctx context.Context, e StreamEvent) (webhook.Event, error)

	// Range returns the events of stream with from ≤ Sequence ≤ to, ascending, at most limit of them,
	// and whether more events in [from, to] follow the last one returned. Unknown streams and ranges
	// past the end are empty, not errors. When from lies below the retained window the error is a
	// *PrunedError.
	Range(ctx context.Context, stream string, from, to uint64, limit int) ([]webhook.Event, bool, error)

	// Claim leases due deliveries (pending, next attempt ≤ req.Now, no live lease, the stream not
	// held past req.Now by a Settler's Settlement.Hold) until
	// req.LeaseUntil and returns them ordered by next attempt, stream and sequence: at most req.Limit
	// in all and req.PerStream of one stream, none from the streams in req.Skip, and none from a
	// stream that already has a delivery under a live lease — an endpoint has one holder at a time,
	// which is what keeps its deliveries in order across dispatchers. Within a stream the claimed
	// deliveries are the lowest due sequences. Callers racing on the same log never receive the same
	// delivery while its lease is live.
	Claim(ctx context.Context, req ClaimRequest) ([]Delivery, error)

	// Delivered records that the leased delivery succeeded, and the attempt in the delivery history
	// with OutcomeDelivered. It fails with ErrLeaseLost when the lease's token is no longer the
	// delivery's latest (someone re-claimed it); nothing is recorded then.
	Delivered(ctx context.Context, lease Lease, a Attempt) error

	// Failed records a failed attempt, in the delivery state and the history: with OutcomeFailed and
	// the next attempt due at a.RetryAt, or, when a.RetryAt is zero, with OutcomeAbandoned: the
	// delivery is never claimed again (the event stays retrievable by Range). ErrLeaseLost as for
	// Delivered.
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

	// Cleanup removes events (and their attempts) whose Created is before the given whole second,
	// oldest first, choosing at most limit of them, and returns how many it removed. A stream's
	// retained window stays contiguous: when an event goes, every lower sequence of its stream goes
	// too (an event created slightly later than a successor may therefore go with it, so the count
	// can exceed limit by such stragglers). Stream counters are kept, so sequences are never reused
	// after a cleanup. The caller calls it until it returns 0.
	Cleanup(ctx context.Context, before time.Time, limit int) (int, error)
}

// ByteRanger is implemented by Logs that bound a range read by bytes as well as by count, so that a
// page of large events is never read whole. The range handler reads through it when the Log has it,
// and otherwise through Range in small chunks.
type ByteRanger interface {
	// RangeBytes is Range that also stops before the events' Data, added up, would exceed maxBytes:
	// it returns the longest prefix of what Range would return whose Data fit in maxBytes — and at
	// least the first event, whatever its size — and reports more when events of [from, to] follow
	// the last one returned, whether the limit or the budget ended the page.
	RangeBytes(ctx context.Context, stream string, from, to uint64, limit, maxBytes int) ([]webhook.Event, bool, error)
}

// BatchAppender is implemented by Logs that append several events — to one stream or to several — in
// one call: pgstore.EventLog in one statement (one round trip instead of one per event), the memory
// logs under one lock. The Publisher's fan-out uses it when the Log has it. AppendBatch keeps
// Append's promises for every event and is all or nothing: a failure appends none. The events of one
// stream come in the batch's order, and the results are in the batch's order too.
type BatchAppender interface {
	AppendBatch(ctx context.Context, events []StreamEvent) ([]webhook.Event, error)
}

// StreamEvent is an event bound for a stream, with the trace context of the request that published
// it (W3C Trace Context header values; empty for none). It is a plain value; the zero value is never
// appended (the producer checks every event first).
type StreamEvent struct {
	Stream      string
	Event       webhook.Event
	TraceParent string
	TraceState  string
}

// Settler is implemented by Logs that can record many attempts' outcomes in one round trip, such as
// pgstore.EventLog. The Dispatcher then gathers the outcomes its workers have ready at the same moment
// into one Settle call (a group commit): on PostgreSQL that is one commit for many deliveries instead
// of one each. Settle is also the only way to hold a stream back (Settlement.Hold): on a Log that is
// not a Settler, a throttled endpoint's rate and a Retry-After are kept by the retry times alone, so
// an event appended meanwhile may go out sooner.
type Settler interface {
	// Settle records each settlement as Delivered (s.Delivered), Failed or, for s.Release, Release
	// would, sets the stream holds they carry, and returns one error per settlement, in order: nil,
	// ErrLeaseLost, or the store's error. A store error may fail every settlement of the call.
	Settle(ctx context.Context, s []Settlement) []error
}

// Settlement is one outcome for Settler.Settle. It is a plain value; the zero value settles no lease
// (its token 0 is never valid: ErrLeaseLost).
type Settlement struct {
	Lease     Lease
	Delivered bool
	Attempt   Attempt
	// Release hands the delivery back as Log.Release would, due again at Attempt.RetryAt, counting no
	// attempt and recording nothing in the history; Delivered and the rest of Attempt are ignored.
	// The Dispatcher gives back the unsent rest of an endpoint's run in one Settle call this way.
	Release bool
	// Hold, when not zero, holds the whole stream back until then: once the settlement has taken, no
	// delivery of the stream — not even an event appended after it — is claimed before Hold. A
	// stream's hold only moves later (the latest of the holds settled wins). The Dispatcher holds
	// an endpoint that asked for a pause (Retry-After) or is throttled (Endpoint.RateLimit); being
	// part of the settlement, the hold is in place before the lease ends, so no other dispatcher
	// claims the stream in between. A settlement whose lease is lost sets no hold.
	Hold time.Time
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
	// TraceParent and TraceState are the trace context stored with the event at Append; empty when
	// there was none or the Log keeps none.
	TraceParent string
	TraceState  string
	// Redelivery says that the event was delivered or abandoned before and was queued again by
	// Redeliverer.Redeliver: the same event (body and sequence) pushed again at a support engineer's
	// request. Attempts then counts the failed attempts of this redelivery only, so that the retry
	// schedule starts over.
	Redelivery bool
}

// ClaimRequest says what Claim may lease. It is a plain value; the zero value (Limit 0) claims
// nothing.
type ClaimRequest struct {
	// Now decides what is due and which leases are live.
	Now time.Time
	// LeaseUntil is when the leases Claim sets end; it is after Now.
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
	// Class says what kind of failure it was (producer.ClassStatus, …); empty for a success.
	Class string
	// Reason says why the attempt failed ("status 503", "timeout"). It never contains a secret.
	Reason string
	// Response is the start of the response body, at most 256 bytes of valid UTF-8, for a support
	// engineer to see what the endpoint said.
	Response string
	// RetryAt is, for a failed attempt, when the next one is due; zero abandons the delivery.
	RetryAt time.Time
}

// Outcome is what became of an attempt, as the history records it. The zero value is no outcome:
// an attempt that was handed back unrecorded.
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
// (no stream, no limit) is never passed (the producer checks every query first).
type AttemptQuery struct {
	// Stream is the endpoint whose attempts are listed.
	Stream string
	// Sequence, when not 0, keeps the attempts of that event only.
	Sequence uint64
	// Outcome, when not 0, keeps the attempts with that outcome only.
	Outcome Outcome
	// Before, when not 0, keeps the attempts that come after the attempt with this ID in the
	// history's order (newest first), the cursor of the next page: the last ID of the previous page.
	// An ID the log does not hold (removed with its event by the retention) gives an empty page.
	Before uint64
	// Limit is the most attempts returned.
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

// Sequencing is implemented by a Log whose Append does not number the event: the event is stored
// without a sequence (in the caller's transaction, for the outbox), and Sequence numbers it later, after
// it has committed. pgstore.EventLog works this way, so that an order's transaction never waits on
// the stream's counter for the previous order's commit; memstore.NewDeferredLog does the same in
// memory.
//
// Until Sequence numbers it, an event is invisible: Range, Claim and Status do not see it, and
// Append returned it with Sequence 0. Sequence keeps every promise of Log: a stream's events are
// numbered 1, 2, 3, … with no gap and no reuse, each event once. Within a stream it numbers events in
// the order they were appended (among those committed when it looks), so events appended one after
// the other — by one goroutine, or causally ordered across transactions — keep their order.
//
// A producer.Sequencer runs Sequence in the background; a Dispatcher on a Sequencing log starts one
// itself.
type Sequencing interface {
	Log
	// Sequence numbers at most limit committed, unnumbered events, oldest first, and returns them as
	// runs: per stream, the consecutive sequences it assigned. It returns nil when there was nothing to
	// number. Concurrent calls — in one process or in replicas sharing a database — never number the
	// same event twice, and never both number events of one stream at the same moment. limit < 1
	// numbers nothing. A call that fails numbered nothing — except when the store committed and the
	// answer was lost on the way back (a connection cut at that instant): the events are then numbered
	// and visible like any other, only not reported.
	Sequence(ctx context.Context, limit int) ([]SequencedRun, error)
}

// SequencedRun is a run of events of one stream that one Sequence call numbered: IDs[i] has sequence
// First+i. It is a plain value; the zero value is a run of no event.
type SequencedRun struct {
	Stream string
	First  uint64
	IDs    []string
}

// Last is the sequence of the run's last event.
func (r SequencedRun) Last() uint64 { return r.First + uint64(len(r.IDs)) - 1 }

// Redeliverer is implemented by Logs that can push retained events again: the producer's resend and
// recover endpoints queue a settled event, or a range of them, to be delivered once more, the same
// body and sequence under a fresh signature. A redelivery is a Delivery like any other — claimed,
// leased, settled and released by the same methods, under the same lease and fencing rules, and
// recorded in the same history — except for where it stands in its stream's order:
//
//   - Claim takes a stream's redeliveries only when it has no normal delivery due (and, as always,
//     none under a live lease): they go behind its normal stream, lowest sequence first, at most
//     ClaimRequest.PerStream of them, under the stream's one lease. A claim takes either normal
//     deliveries or redeliveries of a stream, never both. Delivery.Redelivery is set, and
//     Delivery.Attempts counts the failed attempts of this redelivery only.
//   - Delivered ends the redelivery (it leaves the queue); Failed with a RetryAt keeps it queued, due
//     then, one failed attempt more; Failed without one abandons it (it leaves the queue); Release
//     makes it due at retryAt and counts nothing. Each attempt goes into the history under the
//     event's next Number — the highest the event has, plus one — with the outcome it had.
//   - The event's own delivery state is unchanged: Status still reports it delivered or abandoned,
//     with the attempts of its first delivery, whatever its redeliveries do; the history (Attempts)
//     shows both.
//   - Cleanup removes an event's queued redelivery with the event. Backlogger.Backlog does not count
//     redeliveries: it reports the undelivered part of the normal stream.
//
// A Lease still names one claim of one delivery: only settled events are queued, and a settled event
// is never pending again, so an event is either pending normally or queued for redelivery, never both.
type Redeliverer interface {
	// Redeliver queues the retained events of stream with from ≤ Sequence ≤ to to be delivered again,
	// due at at, and returns how many it queued. Only settled events (delivered or abandoned) are
	// queued: an event still pending will be delivered anyway, and is neither queued nor counted. An
	// event already queued for redelivery (waiting, retrying or leased) is not queued again and not
	// counted, so the count is the number newly queued, and a repeated call returns 0. A to past the
	// stream's last sequence means its last. When from lies below the retained window the error is a
	// *PrunedError and nothing is queued; an unknown stream, or from past the stream's end, queues
	// nothing and is not an error. The caller guarantees 1 ≤ from ≤ to and bounds the range (the
	// producer allows at most a few thousand events a call); an implementation may spend time in
	// proportion to the range here, but Claim's cost must not grow with the ranges queued.
	Redeliver(ctx context.Context, stream string, from, to uint64, at time.Time) (int, error)
}

// Backlogger is implemented by Logs that can report what waits to be delivered; the Dispatcher's
// Backlog uses it.
type Backlogger interface {
	// Backlog returns, for every stream with undelivered events, how many there are and when the
	// oldest was created, ordered by stream. Undelivered means pending, whether due now, waiting for a
	// retry, or not yet numbered by a Sequencing log; delivered and abandoned events are not counted.
	Backlog(ctx context.Context) ([]Backlog, error)
}

// Backlog is one stream's undelivered events. It is a plain value; the zero value is an empty
// backlog of no stream.
type Backlog struct {
	Stream string
	// Events counts the undelivered events.
	Events int
	// Oldest is the creation time of the oldest one (Event.Created, to the second).
	Oldest time.Time
}

// Errors a Log returns. Implementations translate their databases' errors into these.
var (
	// ErrLeaseLost: the lease is no longer the delivery's latest claim, or the delivery was settled,
	// or it no longer exists.
	ErrLeaseLost = errors.New("producer: delivery lease lost")
	// ErrNotFound: no such event.
	ErrNotFound = errors.New("producer: event not found")
	// ErrPruned: the range starts below the retained window. The error is a *PrunedError.
	ErrPruned = errors.New("producer: events pruned by retention")
	// ErrStreamFull: Append or AppendBatch was refused, and appended nothing, because a stream holds
	// as many events as the log keeps per stream. Retention frees room as it removes old events.
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
