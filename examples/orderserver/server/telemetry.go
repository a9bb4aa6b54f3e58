package server

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcplatform/conventions/otelconv"
)

// routeKey holds the route a request took, for its server span's name.
type routeKey struct{}

// traced gives every request a server span that continues the caller's traceparent, named by the
// route it took ("POST /{version}/orders"), never by its path: order IDs would make every name
// distinct. The route is known only once the API mux has routed (routeNamed writes it).
func traced(h http.Handler, tel *otelconv.Telemetry) http.Handler {
	inner := otelhttp.NewHandler(h, "orderserver",
		otelhttp.WithTracerProvider(tel.TracerProvider()), otelhttp.WithMeterProvider(tel.MeterProvider()),
		otelhttp.WithPropagators(tel.Propagator()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if route, _ := r.Context().Value(routeKey{}).(*string); route != nil && *route != "" {
				return r.Method + " " + *route
			}
			return r.Method
		}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), routeKey{}, new(string))))
	})
}

// routeNamed records the route the API mux chose, under the version segment it serves below.
func routeNamed(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r)
		route, _ := r.Context().Value(routeKey{}).(*string)
		if route == nil || r.Pattern == "" || r.Pattern == "/" {
			return
		}
		_, path, ok := strings.Cut(r.Pattern, " ")
		if !ok {
			path = r.Pattern
		}
		*route = "/{version}" + path
		span := trace.SpanFromContext(r.Context())
		span.SetName(r.Method + " " + *route)
		span.SetAttributes(semconv.HTTPRoute(*route))
	})
}
