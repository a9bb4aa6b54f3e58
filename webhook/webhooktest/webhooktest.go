package webhooktest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/webhook"
)

// APIVersion is the api_version of the events NewEvent makes.
const APIVersion = "v1"

// NewEvent returns an event with a fresh "evt_" ID, the sequence and type given, data marshalled as its
// data member (nil becomes {}), and created set to created's Unix seconds.
func NewEvent(seq uint64, typ string, data any, created time.Time) webhook.Event {
	raw := json.RawMessage(`{}`)
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			panic("webhooktest: NewEvent: marshal data: " + err.Error())
		}
		raw = b
	}
	return webhook.Event{
		ID:         randid.New("evt_"),
		Sequence:   seq,
		Type:       typ,
		Created:    created.Unix(),
		APIVersion: APIVersion,
		Data:       raw,
	}
}

// Body returns ev's JSON: the bytes a producer sends and signs.
func Body(ev webhook.Event) []byte {
	b, err := json.Marshal(ev)
	if err != nil {
		panic("webhooktest: Body: " + err.Error())
	}
	return b
}

// Header returns the X-SVC-Signature value for body signed at now with secrets (several while one
// rotates). It panics on ErrNoSecret.
func Header(body []byte, now time.Time, secrets ...string) string {
	h, err := webhook.Sign(body, now, secrets...)
	if err != nil {
		panic("webhooktest: Header: " + err.Error())
	}
	return h
}

// NewRequest returns a delivery of ev to target as an incoming server request (for a handler's
// ServeHTTP): POST, JSON body, X-SVC-Sequence, and X-SVC-Signature signed at now with secrets.
func NewRequest(target string, ev webhook.Event, now time.Time, secrets ...string) *http.Request {
	return NewRequestBody(target, Body(ev), ev.Sequence, now, secrets...)
}

// NewRequestBody is NewRequest for a raw body, to test bodies a real producer would not send: it signs
// body as it is and sets X-SVC-Sequence to seq, whatever the body says.
func NewRequestBody(target string, body []byte, seq uint64, now time.Time, secrets ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(webhook.HeaderSequence, strconv.FormatUint(seq, 10))
	r.Header.Set(webhook.HeaderSignature, Header(body, now, secrets...))
	return r
}

// Deliver serves a delivery of ev to h, signed at now, and returns the recorded response.
func Deliver(h http.Handler, ev webhook.Event, now time.Time, secrets ...string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, NewRequest("/webhooks", ev, now, secrets...))
	return rec
}
