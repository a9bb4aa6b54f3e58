package versioning

import (
	"context"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
)

// EventRenderer is the producer.RenderFunc that renders each webhook event at its endpoint's version,
// for the Dispatcher's deliveries and the RangeHandler's pages alike, so that a fetched event reads
// exactly as its delivery did: the endpoint's own APIVersion when it names a version of the registry
// (an endpoint upgraded apart from its licensee's API calls, as Stripe's endpoint api_version is), and
// otherwise the version its licensee is pinned to (RenderEvent). licensee names the licensee whose
// pin governs an endpoint; nil means the endpoint's Owner, which is right when endpoints are owned by
// the same value the router's Options.Licensee returns (a principal's scope, say). Only the event's
// type, api_version and data change; the producer keeps its ID, sequence, creation time and endpoint
// whatever a renderer returns.
//
// A failing pin store makes rendering fail with ErrPinUnavailable: the delivery is retried later and
// a range page answers 500, rather than an event going out in a shape its licensee does not read.
func (rt *Router) EventRenderer(licensee func(ep producer.Endpoint) string) producer.RenderFunc {
	if licensee == nil {
		licensee = func(ep producer.Endpoint) string { return ep.Owner }
	}
	return func(ctx context.Context, ep producer.Endpoint, ev webhook.Event) (webhook.Event, error) {
		shape := EventShape{Version: ev.APIVersion, Type: ev.Type, Data: ev.Data}
		var (
			out EventShape
			err error
		)
		if _, own := rt.Registry().Lookup(ep.APIVersion); own && ep.APIVersion != "" {
			out, err = rt.Registry().RenderEvent(shape, ep.APIVersion)
		} else {
			out, err = rt.RenderEvent(ctx, licensee(ep), shape)
		}
		if err != nil {
			return webhook.Event{}, err
		}
		ev.APIVersion, ev.Type, ev.Data = out.Version, out.Type, out.Data
		return ev, nil
	}
}
