// Package otelconv reports what the conventions library does to OpenTelemetry: it implements the
// observer interfaces of idempotency, webhook, webhook/producer, versioning, sandbox and apierror with
// the OpenTelemetry metrics and trace APIs, so that a team's dashboards and traces show every
// convention without adapters of its own.
//
// It is a module of its own, so that the core module never downloads OpenTelemetry. The core
// packages call an observer only when one is set: without one nothing is measured and nothing is
// allocated.
//
// # Wiring
//
// Build one Telemetry per process with the team's providers (the SDK's, exported to Prometheus or
// OTLP), and hand its observers to the packages' options:
//
//	tel, err := otelconv.New(&otelconv.Options{MeterProvider: mp, TracerProvider: tp})
//	if err != nil {
//		return err
//	}
//	idem, err := idempotency.New(&idempotency.Options{Store: store, Observer: tel.Idempotency()})
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
// only when Options asks for it. Sequence numbers appear on spans, never on metrics.
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
//	name                               instrument       unit        attributes
//	svc.idempotency.requests           counter          {request}   svc.idempotency.outcome
//	svc.idempotency.store.duration     histogram        s           svc.idempotency.store.operation, svc.idempotency.store.backend, error.type
//	svc.idempotency.handler.duration   histogram        s           http.response.status_code, error.type (panic)
//	svc.idempotency.renewals           counter          {renewal}   svc.idempotency.renewal.result
//
// svc.idempotency.outcome is one of executed, replayed, in_use, reused, rejected, quota,
// store_error, failed_open, lease_lost, released (see idempotency.Outcome): each governed request
// is counted once. svc.idempotency.store.operation is claim, complete, release or renew;
// svc.idempotency.store.backend is memory, postgresql, redis or what a store's Backend method says;
// error.type is lease_lost, quota_exceeded, store_full, timeout or store_error, absent on success.
// svc.idempotency.renewal.result is ok, lease_lost or error.
//
// # Traces
//
// Idempotency: idempotency.claim, idempotency.handler (the handler's own spans are its children),
// idempotency.complete and idempotency.release are children of the request's span, and the
// request's span gets svc.idempotency.outcome. They are made only under a recording request span,
// so the server's instrumentation (otelhttp, or the team's own) and its sampler decide what is
// traced.
package otelconv
