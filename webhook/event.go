package webhook

import "encoding/json"

// Headers of a delivery (and of a signed range response).
const (
	HeaderSignature = "X-SVC-Signature"
	HeaderSequence  = "X-SVC-Sequence"
	// HeaderRedelivery is "true" on a delivery pushed again at a support engineer's request (the
	// producer's resend and recover): the same body and sequence as before, a fresh signature. A
	// consumer that follows the sequence rule needs nothing more — it is a duplicate, or, for one that
	// lost its data, an event to take; the header only says why it came again.
	HeaderRedelivery = "X-SVC-Redelivery"
)

// Event is the envelope of every webhook delivery. Sequence is the same number as the delivery's
// X-SVC-Sequence header; a verifier rejects a delivery where the two disagree. Endpoint names the
// webhook endpoint the event was signed for, so that a delivery captured on its way to one endpoint is
// refused by another that happens to share its secret; a producer's stored events leave it empty and
// the producer fills it in on the way out. The envelope's first member is "object":"event", like the
// "object" member of every resource of the API: encoders always write it (it is a constant, so the
// struct has no field for it), and decoders accept an envelope without it, from producers that
// predate it, but refuse any other value. Every delivered or retrieved event has a Sequence of 1 or
// more; an event that a producer appended but has not numbered yet (a log that numbers after the
// commit, such as pgstore.EventLog) has Sequence 0, and its envelope leaves "sequence" out.
//
//	{"object":"event","id":"evt_…","endpoint":"we_123","sequence":7,"type":"order.created","created":1767225600,"api_version":"v1","data":{…}}
//
// An Event is a plain value. The zero Event has no ID, no type and Sequence 0: a Tracker refuses it
// (ErrInvalidDelivery), and a producer's Log refuses to append it.
type Event struct {
	ID         string          `json:"id"`
	Endpoint   string          `json:"endpoint,omitempty"`
	Sequence   uint64          `json:"sequence,omitzero"`
	Type       string          `json:"type"`
	Created    int64           `json:"created"`
	APIVersion string          `json:"api_version"`
	Data       json.RawMessage `json:"data"`
}

// ObjectEvent is the "object" member of every event envelope.
const ObjectEvent = "event"

// MarshalJSON encodes the envelope, "object":"event" first.
func (e Event) MarshalJSON() ([]byte, error) {
	return json.Marshal(envelope{Object: ObjectEvent, plain: plain(e)})
}

// envelope is an Event on the wire: the constant "object" member and the Event's own. Decoders read
// Object to refuse an envelope that says it is something else.
type envelope struct {
	Object string `json:"object"`
	plain
}

// plain is Event without its MarshalJSON method.
type plain Event

// EventList is the body of a range retrieval response:
// GET /v1/webhook_endpoints/{id}/events?from=&to=&limit= → {"object":"list","data":[…],"has_more":…}.
// It is a plain value; the zero value is an empty last page whose Object is not yet "list".
type EventList struct {
	Object  string  `json:"object"` // always "list"
	Data    []Event `json:"data"`
	HasMore bool    `json:"has_more"`
}
