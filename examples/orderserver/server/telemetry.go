package server

import (
	"net/http"
	"strings"

	"github.com/svcplatform/conventions/otelconv"
)

// EventTypes are the types of EventCatalogue: order.created, and the sandbox trigger's default.
// otelconv.Options.EventTypes takes it, so that the types a sandbox key makes up with the trigger
// control are counted as its class's _OTHER and never push these out.
var EventTypes = func() []string {
	types := make([]string, len(EventCatalogue))
	for i, et := range EventCatalogue {
		types[i] = et.Type
	}
	return types
}()

// traced gives every request a server span that continues the caller's traceparent and counts it
// in http.server.request.duration, through the library's instrumentation: no attribute takes a value
// from what the client sent (Host, port, user agent, path), so no client mints a series. The span is
// named by the route the request took ("GET /{version}/orders/{id}"), never by its path: routeNamed
// reports it once the API mux has routed.
func traced(h http.Handler, tel *otelconv.Telemetry) http.Handler {
	return tel.HTTPHandler(h)
}

// routeNamed records the route the API mux chose for a request next served, under the version
// segment it serves below; a request refused before the mux routed it (permit's 403) is named by the
// route it asked for. An unmatched path (the mux's "/" catch-all) names no route.
func routeNamed(api *http.ServeMux, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		pattern := r.Pattern
		if pattern == "" {
			_, pattern = api.Handler(r)
		}
		if pattern == "" || pattern == "/" {
			return
		}
		_, path, ok := strings.Cut(pattern, " ")
		if !ok {
			path = pattern
		}
		otelconv.SetHTTPRoute(r.Context(), "/{version}"+path)
	})
}
