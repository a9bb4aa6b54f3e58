package webhook

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/svcplatform/conventions/apierror"
)

// Errors of the sequence header and the envelope.
var (
	// ErrMissingSequence: the X-SVC-Sequence header is absent or empty.
	ErrMissingSequence = errors.New("webhook: missing " + HeaderSequence + " header")
	// ErrMalformedSequence: X-SVC-Sequence is not a canonical decimal number from 1 to 2⁶³−1.
	ErrMalformedSequence = errors.New("webhook: malformed " + HeaderSequence + " header")
	// ErrSequenceMismatch: X-SVC-Sequence and the signed body's "sequence" disagree. Only the body is
	// signed, so a header that says otherwise was altered or mis-set, and trusting either is unsafe.
	ErrSequenceMismatch = errors.New("webhook: " + HeaderSequence + " does not match the body's sequence")
)

// MaxSequence is the largest sequence number: PostgreSQL's bigint, the widest integer every store keeps.
const MaxSequence = 1<<63 - 1

// ParseSequence parses an X-SVC-Sequence value: decimal digits, no sign, spaces or leading zeros, from 1
// to MaxSequence.
func ParseSequence(s string) (uint64, error) {
	if s == "" {
		return 0, ErrMissingSequence
	}
	if s[0] == '0' || s[0] == '+' {
		return 0, ErrMalformedSequence
	}
	n, err := strconv.ParseUint(s, 10, 63)
	if err != nil {
		return 0, ErrMalformedSequence
	}
	return n, nil
}

// CheckSequence returns nil when header, an X-SVC-Sequence value, names ev.Sequence, and otherwise
// ErrMissingSequence, ErrMalformedSequence or ErrSequenceMismatch.
func CheckSequence(header string, ev *Event) error {
	n, err := ParseSequence(header)
	if err != nil {
		return err
	}
	if n != ev.Sequence {
		return fmt.Errorf("%w: header %d, body %d", ErrSequenceMismatch, n, ev.Sequence)
	}
	return nil
}

// CodeSequenceMismatch is the problem code of a delivery whose X-SVC-Sequence and body disagree.
const CodeSequenceMismatch = "sequence_mismatch"

// DecodeEvent decodes a delivery body into its envelope. Members the Event does not know are ignored,
// so that a producer can add some; id, type and a sequence from 1 to MaxSequence are required. Every
// failure is an *apierror.Error located at the offending member (a 400), so that a receiver can write
// it as it is.
func DecodeEvent(body []byte) (Event, error) {
	var env envelope
	if err := apierror.DecodeBytes(body, &env, &apierror.DecodeOptions{AllowUnknownFields: true}); err != nil {
		return Event{}, err
	}
	ev := Event(env.plain)
	if err := ev.validate(env.Object); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// validate checks the members every consumer relies on, as located problems; object is the
// envelope's "object" member, "" when it had none.
func (e *Event) validate(object string) error {
	var c apierror.Collector
	c.Check(object == "" || object == ObjectEvent,
		apierror.Body("/object", "invalid_object", `must be "event"`))
	c.Require("/id", e.ID != "")
	c.Check(e.Sequence != 0 && e.Sequence <= MaxSequence,
		apierror.Body("/sequence", "invalid_sequence", "must be an integer from 1 to 9223372036854775807"))
	c.Require("/type", e.Type != "")
	return c.Err()
}
