package server

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/otelconv"
	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/versioning"
	"github.com/svcplatform/conventions/webhook/producer"
)

// The observers of each package, from Config.Telemetry; nil (no observer, no cost) without it. A
// nil *otelconv.Telemetry must not reach an Options field as a non-nil interface, hence these.

func (s *Server) idempotencyObserver() idempotency.Observer {
	if s.tel == nil {
		return nil
	}
	return s.tel.Idempotency()
}

func (s *Server) versioningObserver() versioning.Observer {
	if s.tel == nil {
		return nil
	}
	return s.tel.Versioning()
}

func (s *Server) sandboxObserver() sandbox.Observer {
	if s.tel == nil {
		return nil
	}
	return s.tel.Sandbox()
}

func (s *Server) apierrorObserver() apierror.Observer {
	if s.tel == nil {
		return nil
	}
	return s.tel.APIError()
}

func (s *Server) producerObserver() producer.Observer {
	if s.tel == nil {
		return nil
	}
	return s.tel.Producer()
}

// traced gives every request a server span that continues the caller's traceparent, named by the
// route pattern (never the raw path: order IDs would make every name distinct).
func traced(h http.Handler, tel *otelconv.Telemetry) http.Handler {
	return otelhttp.NewHandler(h, "orderserver",
		otelhttp.WithTracerProvider(tel.TracerProvider()), otelhttp.WithMeterProvider(tel.MeterProvider()),
		otelhttp.WithPropagators(tel.Propagator()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.Pattern != "" {
				return r.Pattern
			}
			return r.Method
		}))
}
