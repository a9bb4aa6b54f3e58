// Package openapi gives a product team the platform's conventions as OpenAPI 3.1 components, so
// that the API reference it publishes describes them exactly as the library implements them, without
// writing them again:
//
//   - schemas: Problem (RFC 9457, with code, request_id and located errors), Violation, the webhook
//     Event envelope, EventList (a page of range retrieval), RequestID, EventType, Sequence;
//   - parameters: IdempotencyKey (the required Idempotency-Key header), RangeFrom, RangeTo,
//     RangeLimit and WebhookEndpointID;
//   - headers: X-Request-Id, X-SVC-Version, Idempotent-Replayed, Retry-After, WWW-Authenticate,
//     Deprecation, Sunset and Link (RFC 9745, RFC 8594), X-SVC-Signature and X-SVC-Sequence;
//   - responses: the standard problems — BadRequest, Unauthorized, VersionNotEnabled,
//     PermissionDenied (403 permission_denied, a restricted API key's), Forbidden (both 403s in one
//     response, for a service with version pins and restricted keys), NotFound, IdempotencyKeyInUse
//     (409), IdempotencyKeyReused (422), EventsPruned, ContentTooLarge, UnsupportedMediaType,
//     TooManyRequests, RangeRequestsInFlight (429 range_requests_in_flight), ServerError (5XX) — and
//     EventList, the signed range page;
//   - securitySchemes: BearerAuth;
//   - operations: RangeOperation (range retrieval, GET /v1/webhook_endpoints/{id}/events) and
//     Webhook, the delivery a consumer receives (POST, with its signature and sequence headers and
//     the envelope), for one event type of the document's webhooks.
//
// The components are one embedded document, itself a valid OpenAPI 3.1 document (JSON returns it),
// so a team that keeps its reference as a file can reference them from outside Go, and a Go service
// merges them into its own document:
//
//	doc := map[string]any{
//		"openapi": "3.1.0",
//		"info":    map[string]any{"title": "Payments", "version": "v1"},
//		"paths": map[string]any{
//			"/v1/payments": map[string]any{"post": map[string]any{
//				"security":   []any{map[string]any{openapi.SecurityBearer: []any{}}},
//				"parameters": []any{openapi.Ref(openapi.Parameters, openapi.ParamIdempotencyKey)},
//				"responses": map[string]any{
//					"201": …,
//					"400": openapi.Ref(openapi.Responses, openapi.ResponseBadRequest),
//					"409": openapi.Ref(openapi.Responses, openapi.ResponseIdempotencyKeyInUse),
//					"422": openapi.Ref(openapi.Responses, openapi.ResponseIdempotencyKeyReused),
//				},
//			}},
//		},
//		"webhooks": map[string]any{"payment.created": openapi.Webhook("payment.created", openapi.Ref(openapi.Schemas, "Payment"))},
//	}
//	if err := openapi.Merge(doc); err != nil { … } // ErrConflict if doc defines a Problem of its own
//
// Merge refuses a document that defines one of these names differently: a reference that redefines
// the problem schema does not describe the platform. Deprecate marks a deprecated version's document
// (every operation deprecated, every response with the deprecation headers).
//
// Problem codes are machine-readable: every problem response lists the codes it may carry in the
// extension x-problem-codes (ExtensionProblemCodes) — a problem's code or a violation's, since a
// problem with one violation takes its code — a shared response those common to every operation
// that uses it. An operation lists its own codes, those only its route answers, in an x-problem-codes
// object by response key ("404": ["payment_not_found"]), and ListProblemCodes, called after Merge,
// completes that object with its responses' codes, so that a client reads every code an operation
// may answer with, by status, in one place; each code is documented at its problem type URI.
//
// The package is the standard library only and does not validate documents; the examples module's
// tests load every document built here with kin-openapi and check the reference server's every
// answer against its own (examples/e2e). The reference server serves its document at
// GET /v1/openapi.json (and /v2/…).
//
// Everything here returns fresh values: callers own what they get and may change it. The functions
// are safe for concurrent use.
package openapi
