package producer

import (
	"context"
	"fmt"

	"github.com/svcplatform/conventions/webhook"
)

// RenderFunc renders a stored event for an endpoint, typically at the API version the endpoint's
// licensee is pinned to: versioning.Router.EventRenderer is one, which looks the pin up. It may
// change Type, APIVersion and Data; the event's ID, Sequence and Created are kept whatever it
// returns, because the consumer's ordering and deduplication depend on them. It must be safe for
// concurrent use.
type RenderFunc func(ctx context.Context, ep Endpoint, ev webhook.Event) (webhook.Event, error)

// render applies fn (when set) and pins the fields a renderer may not change. The envelope names the
// endpoint it is rendered for, so that a delivery captured on its way to one endpoint is refused by
// another that shares its secret.
func render(ctx context.Context, fn RenderFunc, ep Endpoint, ev webhook.Event) (webhook.Event, error) {
	ev.Endpoint = ep.ID
	if fn == nil {
		return ev, nil
	}
	out, err := fn(ctx, ep, ev)
	if err != nil {
		return webhook.Event{}, fmt.Errorf("producer: render event %d of %s at version %q: %w", ev.Sequence, ep.ID, ep.APIVersion, err)
	}
	if !validData(out.Data) {
		return webhook.Event{}, fmt.Errorf("producer: render event %d of %s at version %q: data is not valid JSON", ev.Sequence, ep.ID, ep.APIVersion)
	}
	out.ID, out.Sequence, out.Created, out.Endpoint = ev.ID, ev.Sequence, ev.Created, ep.ID
	return out, nil
}

// encodeEvent renders ev for ep and encodes it: the exact bytes a delivery carries and signs.
func encodeEvent(ctx context.Context, fn RenderFunc, ep Endpoint, ev webhook.Event) ([]byte, error) {
	out, err := render(ctx, fn, ep, ev)
	if err != nil {
		return nil, err
	}
	return appendEvent(make([]byte, 0, eventSize(&out)), &out), nil
}

// encodeList encodes a range response body.
func encodeList(events []webhook.Event, hasMore bool) []byte {
	n := 64
	for i := range events {
		n += eventSize(&events[i]) + 1
	}
	return appendList(make([]byte, 0, n), events, hasMore)
}
