// Package otelconv reports what the conventions library does to OpenTelemetry: it implements the
// observer interfaces of idempotency, webhook, webhook/producer, versioning, sandbox and apierror with
// the OpenTelemetry metrics and trace APIs, so a team's dashboards and traces show every convention
// without adapters of its own.
//
// It is a module of its own so that the core module never downloads OpenTelemetry; the core packages
// call their observers only when one is set, at no cost otherwise.
package otelconv
