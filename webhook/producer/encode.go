package producer

import (
	"encoding/json"
	"strconv"

	"github.com/svcplatform/conventions/webhook"

	"github.com/svcplatform/conventions/internal/jsonstr"
)

// The envelope is written by hand rather than by encoding/json: a range page is a thousand events,
// and encoding/json re-validates and compacts every event's data through reflection. Data was checked
// to be valid JSON when it was appended (and is checked again after a Render hook), so it is copied
// as it is. The field order and names are webhook.Event's.

// appendEvent appends ev as JSON. ev.Data must be valid JSON.
func appendEvent(b []byte, ev *webhook.Event) []byte {
	b = append(b, `{"object":"event","id":`...)
	b = jsonstr.AppendHTMLSafe(b, ev.ID)
	if ev.Endpoint != "" {
		b = append(b, `,"endpoint":`...)
		b = jsonstr.AppendHTMLSafe(b, ev.Endpoint)
	}
	if ev.Sequence != 0 { // only an event not yet numbered has none
		b = append(b, `,"sequence":`...)
		b = strconv.AppendUint(b, ev.Sequence, 10)
	}
	b = append(b, `,"type":`...)
	b = jsonstr.AppendHTMLSafe(b, ev.Type)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, ev.Created, 10)
	b = append(b, `,"api_version":`...)
	b = jsonstr.AppendHTMLSafe(b, ev.APIVersion)
	b = append(b, `,"data":`...)
	if len(ev.Data) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, ev.Data...)
	}
	return append(b, '}')
}

// eventSize estimates the encoded size of ev, to size buffers in one allocation.
func eventSize(ev *webhook.Event) int {
	return 130 + len(ev.ID) + len(ev.Endpoint) + len(ev.Type) + len(ev.APIVersion) + len(ev.Data)
}

// appendList appends a range response body.
func appendList(b []byte, events []webhook.Event, hasMore bool) []byte {
	b = append(b, `{"object":"list","data":[`...)
	for i := range events {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEvent(b, &events[i])
	}
	b = append(b, `],"has_more":`...)
	b = strconv.AppendBool(b, hasMore)
	return append(b, '}')
}

// validData reports whether a rendered event's data may be copied into a body as it is.
func validData(data json.RawMessage) bool { return len(data) == 0 || json.Valid(data) }
