package producer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// maxResponseSnippet bounds driver.Attempt.Response.
const maxResponseSnippet = 256

// Classes of failed attempts (Attempt.Class).
const (
	ClassStatus           = "http_status"       // the endpoint answered, but not 2xx (redirects included)
	ClassTimeout          = "timeout"           // no answer within the per-request timeout
	ClassConnection       = "connection"        // refused, reset, unreachable, DNS or TLS failure
	ClassBlockedAddress   = "blocked_address"   // the URL resolves to an address the guard refuses
	ClassInvalidURL       = "invalid_url"       // the endpoint's URL cannot be requested
	ClassRender           = "render_failed"     // the event could not be rendered at the endpoint's version
	ClassNoSecret         = "no_secret"         // the endpoint has no usable signing secret
	ClassEndpointDeleted  = "endpoint_deleted"  // the endpoint is gone; the delivery is abandoned
	ClassEndpointDisabled = "endpoint_disabled" // the endpoint is disabled; the delivery is abandoned, unsent
)

// Errors of the producer's own checks, before it calls the Log.
var (
	// ErrInvalidEvent: an event with an empty type, or data that is not valid JSON, or bound for an
	// empty stream.
	ErrInvalidEvent = errors.New("producer: invalid event")
	// ErrInvalidRange: a range with from < 1, to < from or limit < 1, or an attempts query of an empty
	// stream or with a limit < 1.
	ErrInvalidRange = errors.New("producer: invalid range")
	// ErrStreamFull: the Log refused an append, and appended nothing, because the stream holds as many
	// events as the log keeps per stream (memstore.Log.MaxStreamEvents,
	// pgstore.EventLogOptions.MaxStreamEvents). Retention frees room as it removes old events. It is
	// driver.ErrStreamFull, for errors.Is.
	ErrStreamFull = driver.ErrStreamFull
)

// checkEvent checks what the driver contract guarantees of an appended event.
func checkEvent(stream string, ev webhook.Event) error {
	if stream == "" {
		return fmt.Errorf("%w: empty stream", ErrInvalidEvent)
	}
	return checkPayload(ev.Type, ev.Data)
}

// checkPayload checks an event's type and data.
func checkPayload(eventType string, data []byte) error {
	switch {
	case eventType == "":
		return fmt.Errorf("%w: empty type", ErrInvalidEvent)
	case !json.Valid(data):
		return fmt.Errorf("%w: data is not valid JSON", ErrInvalidEvent)
	}
	return nil
}

// checkRange checks what the driver contract guarantees of Range's arguments.
func checkRange(from, to uint64, limit int) error {
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

// checkRangeBytes checks what the driver contract guarantees of RangeBytes' arguments.
func checkRangeBytes(from, to uint64, limit, maxBytes int) error {
	if maxBytes < 1 {
		return fmt.Errorf("%w: maxBytes must be at least 1", ErrInvalidRange)
	}
	return checkRange(from, to, limit)
}

// checkAttemptQuery checks what the driver contract guarantees of an attempts query.
func checkAttemptQuery(q driver.AttemptQuery) error {
	switch {
	case q.Stream == "":
		return fmt.Errorf("%w: attempts of an empty stream", ErrInvalidRange)
	case q.Limit < 1:
		return fmt.Errorf("%w: limit must be at least 1", ErrInvalidRange)
	}
	return nil
}

// outcomeOf is the outcome a Log records for a settled attempt: delivered when ok, else failed or,
// without a retry, abandoned.
func outcomeOf(ok bool, a driver.Attempt) driver.Outcome {
	switch {
	case ok:
		return driver.OutcomeDelivered
	case a.RetryAt.IsZero():
		return driver.OutcomeAbandoned
	}
	return driver.OutcomeFailed
}

// cutoff is the smallest whole second that is not before t: the driver contract has Cleanup's time
// a whole second, so that every Log agrees on events created within the cutoff's second.
func cutoff(t time.Time) time.Time {
	s := t.Unix()
	if t.Nanosecond() > 0 && s < math.MaxInt64 {
		s++
	}
	return time.Unix(s, 0)
}
