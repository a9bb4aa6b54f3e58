package otelconv

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/svcplatform/conventions/apierror"
)

// metricHTTPDuration is the semantic conventions' server request duration.
const metricHTTPDuration = "http.server.request.duration"

// maxHTTPSets bounds the attribute sets of http.server.request.duration; past it a request is
// counted under http.route _OTHER. The sets are products of bounded values (method, scheme, protocol
// version, status, route), so only a service with very many routes comes near it.
const maxHTTPSets = 4096

// maxHTTPRoutes bounds the distinct routes recorded; a route past it is recorded as _OTHER. Routes
// come from the service's own patterns, so this only catches a service that names routes by path.
const maxHTTPRoutes = 512

// httpMethods are the methods recorded by name (the semantic conventions' list); any other is _OTHER.
var httpMethods = map[string]string{
	http.MethodConnect: http.MethodConnect, http.MethodDelete: http.MethodDelete, http.MethodGet: http.MethodGet,
	http.MethodHead: http.MethodHead, http.MethodOptions: http.MethodOptions, http.MethodPatch: http.MethodPatch,
	http.MethodPost: http.MethodPost, http.MethodPut: http.MethodPut, http.MethodTrace: http.MethodTrace,
}

func httpMethod(m string) string {
	if v, ok := httpMethods[m]; ok {
		return v
	}
	return otherValue
}

// httpProtocolVersion returns network.protocol.version for the versions Go's servers speak, and ""
// (no attribute) for anything else: the request line's version is the client's to choose.
func httpProtocolVersion(r *http.Request) string {
	switch {
	case r.ProtoMajor == 1 && r.ProtoMinor == 0:
		return "1.0"
	case r.ProtoMajor == 1 && r.ProtoMinor == 1:
		return "1.1"
	case r.ProtoMajor == 2 && r.ProtoMinor == 0:
		return "2"
	case r.ProtoMajor == 3 && r.ProtoMinor == 0:
		return "3"
	}
	return ""
}

// httpKey names one attribute set of http.server.request.duration. Every field is bounded by the
// server: the method by the list above, the scheme by the connection, the status by the handler, the
// route by the service's patterns.
type httpKey struct {
	method, scheme, proto, route string
	status                       int
}

func (k httpKey) options() []metric.RecordOption {
	kvs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(k.method), semconv.URLScheme(k.scheme)}
	if k.proto != "" {
		kvs = append(kvs, semconv.NetworkProtocolName("http"), semconv.NetworkProtocolVersion(k.proto))
	}
	if k.status != 0 {
		kvs = append(kvs, semconv.HTTPResponseStatusCode(k.status))
		if k.status >= 500 {
			kvs = append(kvs, semconv.ErrorTypeKey.String(strconv.Itoa(k.status)))
		}
	}
	if k.route != "" {
		kvs = append(kvs, semconv.HTTPRoute(k.route))
	}
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kvs...))}
}

// httpObserver is the HTTP server instrumentation: it is safe for concurrent use.
type httpObserver struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	duration   metric.Float64Histogram
	sets       *boundedSets[httpKey, []metric.RecordOption]
	routes     *boundedSets[string, string]
}

func (t *Telemetry) buildHTTP() error {
	o := &httpObserver{tracer: t.tracer, propagator: t.propagator,
		sets:   newBoundedSets(maxHTTPSets, httpKey{method: otherValue, scheme: "http", route: otherValue}, httpKey.options),
		routes: newBoundedSets(maxHTTPRoutes, otherValue, func(r string) string { return r })}
	var err error
	if o.duration, err = t.meter.Float64Histogram(metricHTTPDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of HTTP server requests, by method, route and status: nothing the client sends becomes an attribute value."),
		metric.WithExplicitBucketBoundaries(slowBuckets...)); err != nil {
		return err
	}
	t.http = o
	return nil
}

// routeHolder carries the route a request took from the router back up to the instrumentation.
type routeHolder struct{ route string }

type routeKey struct{}

// SetHTTPRoute tells HTTPHandler which route a request took ("/{version}/orders/{id}"), for the
// http.route attribute and the span's name: call it from the router, with the route's pattern,
// never with the request's path. Without a call, HTTPHandler takes the request's Pattern when a
// ServeMux set it on the request HTTPHandler passed on, and records no route otherwise (an unmatched
// path is never a route). It does nothing outside a request HTTPHandler serves.
func SetHTTPRoute(ctx context.Context, route string) {
	if h, ok := ctx.Value(routeKey{}).(*routeHolder); ok {
		h.route = route
	}
}

// HTTPHandler is the service's HTTP server instrumentation: a server span per request, continuing
// the caller's trace context, and the histogram http.server.request.duration. Put it outermost, so
// that the library's observers (idempotency, versioning, sandbox, apierror) annotate its span.
//
// Unlike otelhttp's defaults, nothing a client sends becomes a metric attribute value, with or
// without a key: no server.address or server.port (the Host header's), no user agent, no path.
// The attributes are http.request.method (the nine standard methods, else _OTHER), url.scheme,
// network.protocol.version (1.0, 1.1, 2, 3), http.response.status_code, error.type (the status, for
// a 5xx) and http.route — only a route the service named (SetHTTPRoute, or a ServeMux pattern),
// at most 512 of them. The span also carries url.path and user_agent.original, with any word shaped
// like a credential redacted (apierror.Redact).
//
// On a nil or zero Telemetry it returns next unchanged.
func (t *Telemetry) HTTPHandler(next http.Handler) http.Handler {
	if t == nil || t.http == nil {
		return next
	}
	o := t.http
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx := o.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		method := httpMethod(r.Method)
		name := method
		if method == otherValue {
			name = "HTTP"
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		proto := httpProtocolVersion(r)
		ctx, span := o.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		if span.IsRecording() {
			kvs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(method), semconv.URLScheme(scheme),
				semconv.URLPath(apierror.Redact(r.URL.Path))}
			if proto != "" {
				kvs = append(kvs, semconv.NetworkProtocolVersion(proto))
			}
			if ua := r.UserAgent(); ua != "" {
				kvs = append(kvs, semconv.UserAgentOriginal(apierror.Redact(ua)))
			}
			if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
				kvs = append(kvs, semconv.NetworkPeerAddress(host))
			}
			span.SetAttributes(kvs...)
		}
		holder := &routeHolder{}
		ctx = context.WithValue(ctx, routeKey{}, holder)
		sw := &statusWriter{ResponseWriter: w}
		r2 := r.WithContext(ctx)
		defer func() {
			// A panic still ends the span and counts the request (as a 500, which is what net/http's
			// recovery sends), then goes on up.
			p := recover()
			status := sw.status
			if p != nil && status == 0 {
				status = http.StatusInternalServerError
			}
			if status == 0 {
				status = http.StatusOK
			}
			route := holder.route
			if route == "" {
				route = patternRoute(r2.Pattern)
			}
			if route != "" {
				route, _ = o.routes.get(route)
			}
			k := httpKey{method: method, scheme: scheme, proto: proto, route: route, status: status}
			if status < 100 || status > 599 {
				k.status = 0
			}
			opts, _ := o.sets.get(k)
			o.duration.Record(ctx, time.Since(start).Seconds(), opts...)
			if span.IsRecording() {
				if route != "" {
					span.SetName(name + " " + route)
					span.SetAttributes(semconv.HTTPRoute(route))
				}
				span.SetAttributes(semconv.HTTPResponseStatusCode(status))
				if status >= 500 {
					span.SetStatus(codes.Error, "")
				}
			}
			span.End()
			if p != nil {
				panic(p)
			}
		}()
		next.ServeHTTP(sw, r2)
	})
}

// patternRoute is the path part of a ServeMux pattern ("GET /orders/{id}" is "/orders/{id}"); the
// catch-all "/" names no route.
func patternRoute(pattern string) string {
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == '/' {
			if pattern[i:] == "/" {
				return ""
			}
			return pattern[i:]
		}
	}
	return ""
}

// statusWriter notes the status a handler sends. It unwraps for http.ResponseController, so flushing
// and hijacking reach the server's writer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 && code >= 200 || code == http.StatusSwitchingProtocols {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

// Flush implements http.Flusher for callers that assert it rather than use a ResponseController.
func (s *statusWriter) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
