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
//   - Append gives the events of a stream the sequences 1, 2, 3, … in the order they commit: no gap
//     and no reuse, even when appends race or a transaction that appended rolls back.
//   - Range reads a contiguous, ascending slice of a stream and says whether more follow; a range that
//     starts below the retained window fails with a *PrunedError (errors.Is ErrPruned) instead of
//     silently returning a hole.
//   - Claim hands a due delivery to one caller at a time: the lease it sets keeps every other caller
//     away until the lease ends or the holder settles it, and each claim gets a fencing token that
//     makes the settlement of an older claim fail with ErrLeaseLost.
//   - No method reads the clock: every time is passed in.
//
// Log is an interface so that storage can vary (MemoryLog here, pgstore.EventLog on PostgreSQL); the
// Dispatcher, Publisher and RangeHandler hold the behaviour. Implementations must be safe for
// concurrent use.
type Log interface {
	// Append stores ev as the next event of stream and returns it with its Sequence (and its ID, when
	// ev.ID was empty: the log assigns "evt_…"). ev.Sequence is ignored. ev.Type must be set and
	// ev.Data must be valid JSON, or the error is ErrInvalidEvent. The event's first delivery is due
	// at ev.Created.
	Append(ctx context.Context, stream string, ev webhook.Event) (webhook.Event, error)

	// Range returns the events of stream with from ≤ Sequence ≤ to, ascending, at most limit of them,
	// and whether more events in [from, to] follow the last one returned. Unknown streams and ranges
	// past the end are empty, not errors. from must be ≥ 1, to ≥ from and limit ≥ 1 (ErrInvalidRange).
	// When from lies below the retained window the error is a *PrunedError.
	Range(ctx context.Context, stream string, from, to uint64, limit int) ([]webhook.Event, bool, error)

	// Claim leases up to limit deliveries that are due at now (pending, next attempt ≤ now, no live
	// lease) until leaseUntil, and returns them ordered by next attempt, stream and sequence. Callers
	// racing on the same log never receive the same delivery while its lease is live.
	Claim(ctx context.Context, now, leaseUntil time.Time, limit int) ([]Delivery, error)

	// Delivered records that the leased delivery succeeded at the given time. It fails with
	// ErrLeaseLost when the lease's token is no longer the delivery's latest (someone re-claimed it).
	Delivered(ctx context.Context, lease Lease, at time.Time) error

	// Failed records a failed attempt. A zero f.RetryAt abandons the delivery: it is never claimed
	// again (the event stays retrievable by Range). ErrLeaseLost as for Delivered.
	Failed(ctx context.Context, lease Lease, f Failure) error

	// Release gives a leased delivery back without counting an attempt; it becomes due at retryAt.
	// ErrLeaseLost as for Delivered.
	Release(ctx context.Context, lease Lease, retryAt time.Time) error

	// Status reports the delivery state of one event, or ErrNotFound.
	Status(ctx context.Context, stream string, seq uint64) (DeliveryStatus, error)

	// Cleanup removes events created before the given time, oldest first, choosing at most limit of
	// them, and returns how many it removed. A stream's retained window stays contiguous: when an event
	// goes, every lower sequence of its stream goes too (an event created slightly later than a
	// successor may therefore go with it, so the count can exceed limit by such stragglers). Stream
	// counters are kept, so sequences are never reused after a cleanup. Call it until it returns 0.
	Cleanup(ctx context.Context, before time.Time, limit int) (int, error)
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
// settles it. It is a plain value; its Event.Data is the caller's own copy.
type Delivery struct {
	Lease
	Event webhook.Event
	// Attempts is the number of failed attempts recorded before this claim.
	Attempts int
	// LeaseUntil is when the claim's lease ends.
	LeaseUntil time.Time
}

// Failure describes a failed delivery attempt. It is a plain value.
type Failure struct {
	// At is when the attempt was made.
	At time.Time
	// RetryAt is when the next attempt is due; zero abandons the delivery.
	RetryAt time.Time
	// Reason says why the attempt failed ("status 503", "timeout"). It must not contain a secret.
	Reason string
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
	// ErrInvalidRange: Range was given from < 1, to < from or limit < 1.
	ErrInvalidRange = errors.New("producer: invalid range")
	// ErrLeaseLost: the lease is no longer the delivery's latest claim, or the delivery was settled,
	// or it no longer exists.
	ErrLeaseLost = errors.New("producer: delivery lease lost")
	// ErrNotFound: no such event.
	ErrNotFound = errors.New("producer: event not found")
	// ErrPruned: the range starts below the retained window. The error is a *PrunedError.
	ErrPruned = errors.New("producer: events pruned by retention")
)

// PrunedError says which part of a stream retention has removed: every sequence below FirstRetained.
// errors.Is(err, ErrPruned) holds for it. It is a plain value.
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
