// Package otelconv reports what the conventions library does to OpenTelemetry: it fills the Hooks of
// idempotency, webhook, webhook/producer, versioning, apikey, ratelimit and apierror with the
// OpenTelemetry metrics and trace APIs, so that a team's dashboards and traces show every convention
// without adapters of its own.
//
// It is a module of its own, so that the core module never downloads OpenTelemetry. The core
// packages call a hook only when one is set: without one nothing is measured and nothing is
// allocated.
//
// # Wiring
//
// Build one Telemetry per process with the team's providers (the SDK's, exported to Prometheus or
// OTLP), and hand its hooks to the packages' options:
//
//	tel, err := otelconv.New(&otelconv.Options{MeterProvider: mp, TracerProvider: tp,
//		EventTypes: []string{"order.created", "order.cancelled"}})
//	if err != nil {
//		return err
//	}
//	idem, err := idempotency.New(&idempotency.Options{Store: store, Hooks: tel.Idempotency()})
//	srv := &http.Server{Handler: tel.HTTPHandler(apiHandler)}
//
// Every instrument is created once, in New. Recording a measurement allocates nothing: the
// attribute sets are built in New for every value an attribute can take. The reference order
// server (examples/orderserver, flags -metrics-addr and -otlp) shows the whole wiring, with the
// Prometheus exporter and OTLP/HTTP traces.
//
// # Cardinality
//
// Every attribute has a bounded set of values: outcomes, results, operations, status codes
// (100–599), problem codes and registered versions. otelconv never records an idempotency key, a
// credential, a signature, a URL or its query, an order or event ID; a licensee or endpoint ID
// only when Options asks for it. Sequence numbers appear on spans, never on metrics. Nothing a
// client sends mints a series, with or without a key: HTTPHandler, the HTTP server
// instrumentation, records no server.address, server.port, user agent or path (otelhttp's defaults
// take server.address from the Host header), and http.route only for a route the service named
// (SetHTTPRoute); event types come from the catalogue Options.EventTypes, any other counted as
// _OTHER of its licensee class (sandbox, live), so a sandbox key triggering made-up types never
// pushes a live type out. Span attributes taken from the request (url.path, user_agent.original)
// have every word shaped like a credential redacted (apierror.Redact). An outcome, result or
// operation that a newer version of its package adds, before otelconv knows it, is counted as
// unknown (webhook's enums) or _OTHER (idempotency's and versioning's), never lost.
//
// # Names
//
// Names follow OpenTelemetry's semantic-convention style: lowercase dot-separated namespaces under
// svc., counters named for what they count (Prometheus adds _total), durations as histograms in
// seconds named ….duration; http.response.status_code and error.type are the semantic conventions'
// own attributes. The Prometheus exporter turns dots into underscores and adds the unit:
// svc.idempotency.store.duration is svc_idempotency_store_duration_seconds.
//
// # Metrics
//
// The table of every instrument; README.md says for each what it counts and every value its
// attributes take.
//
//	name                                 instrument      unit              attributes
//	svc.idempotency.requests             counter         {request}         svc.idempotency.outcome
//	svc.idempotency.store.duration       histogram       s                 svc.idempotency.store.operation, svc.idempotency.store.backend, error.type
//	svc.idempotency.handler.duration     histogram       s                 http.response.status_code, error.type
//	svc.idempotency.renewals             counter         {renewal}         svc.idempotency.renewal.result
//	svc.webhook.events.appended          counter         {event}           svc.webhook.event.type, svc.sandbox.environment
//	svc.webhook.delivery.attempts        counter         {attempt}         svc.webhook.delivery.result, svc.webhook.delivery.status_class, error.type
//	svc.webhook.delivery.duration        histogram       s                 as svc.webhook.delivery.attempts
//	svc.webhook.backlog.age              gauge           s                 (svc.webhook.endpoint.id)
//	svc.webhook.backlog.events           gauge           {event}           (svc.webhook.endpoint.id)
//	svc.webhook.endpoints.disabled       counter         {endpoint}        svc.webhook.endpoint.disabled_reason, (svc.webhook.endpoint.id)
//	svc.webhook.verifications            counter         {verification}    svc.webhook.verification.result, svc.webhook.verification.source
//	svc.webhook.sequence.decisions       counter         {decision}        svc.webhook.sequence.outcome
//	svc.webhook.gap.size                 histogram       {event}
//	svc.webhook.range.fetches            counter         {fetch}           error.type
//	svc.webhook.range.duration           histogram       s                 error.type
//	svc.webhook.range.events             counter         {event}
//	svc.webhook.receive.duration         histogram       s                 http.response.status_code, error.type
//	svc.versioning.requests              counter         {request}         svc.versioning.version, svc.versioning.lifecycle, svc.versioning.outcome, (svc.licensee)
//	svc.versioning.decision.duration     histogram       s                 svc.versioning.outcome
//	svc.versioning.pin.changes           counter         {pin}             svc.versioning.version
//	svc.apikey.authentications           counter         {authentication}  svc.apikey.auth.result, svc.sandbox.environment, (svc.licensee)
//	svc.apikey.authentication.duration   histogram       s                 svc.apikey.auth.result, svc.sandbox.environment
//	svc.ratelimit.checks                 counter         {request}         svc.ratelimit.result, svc.sandbox.environment, (svc.licensee)
//	svc.apierror.problems                counter         {problem}         http.response.status_code, svc.apierror.code, svc.apierror.type, svc.apierror.opaque
//	http.server.request.duration         histogram       s                 http.request.method, url.scheme, network.protocol.version, http.response.status_code, error.type, http.route
//
// Attributes in parentheses are recorded only when Options opts in (LicenseeAttribute,
// EndpointAttribute); the producer's and the consumer's metrics then carry svc.webhook.endpoint.id
// too. The main values: svc.idempotency.outcome is executed, replayed, in_use, reused, rejected,
// quota, store_error, failed_open, lease_lost or released, each governed request counted once;
// svc.webhook.delivery.result is delivered, failed (a retry is scheduled), abandoned or released;
// svc.webhook.verification.result is ok, missing, malformed, mismatch, too_old or too_new;
// svc.webhook.sequence.outcome is processed, duplicate or gap; svc.versioning.lifecycle is current,
// deprecated, sunset or unknown, and an unknown version is recorded as "unknown", never as the
// segment the client sent; svc.apikey.auth.result and svc.ratelimit.result are the name of the
// apikey.Outcome and ratelimit.Outcome, or _OTHER for an outcome newer than this module.
//
// # Traces
//
//	span                   kind      parent                                         notes
//	idempotency.claim      internal  the request's span                             also .complete, .release
//	idempotency.handler    internal  the request's span                             the handler's spans are its children
//	webhook.deliver        client    none (the dispatcher's)                        linked to the span that published the event
//	webhook.receive        server    the delivery's traceparent (webhook.deliver)   internal under a server span already there
//	webhook.range_fetch    client    webhook.receive                                its traceparent goes on the range request
//	webhook.range_serve    server    the range request's traceparent
//
// The trace context of the request that publishes an event is stored with the event in the log
// (producer.TraceContext: traceparent and tracestate, in memory and in pgstore's tables), so that an
// attempt made minutes later, by another replica, links back to it. Idempotency spans are made only
// under a recording request span, so the server's instrumentation (otelhttp, or the team's own) and
// its sampler decide what is traced. Versioning, apikey, ratelimit and apierror annotate the request's
// span (attributes, and events for a 429 and for each problem written).
package otelconv
