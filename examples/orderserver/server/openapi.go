package server

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/openapi"
	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/versioning"
	"github.com/svcplatform/conventions/webhook/producer"
)

// openapiTemplate is the server's own part of its OpenAPI document: its operations and schemas, with
// paths relative to the version and a few placeholders (quoted capitals) that OpenAPIDocument fills
// per version. Everything the conventions define comes from package openapi.
//
//go:embed openapi.json
var openapiTemplate []byte

// OpenAPIPath is where each version's document is served: GET /v1/openapi.json, GET /v2/openapi.json.
const OpenAPIPath = "/openapi.json"

// OpenAPIDocument returns the OpenAPI 3.1 document of one API version of the reference server: its
// operations (every path under /<version>/), its schemas in that version's shape (v1 orders have
// "side", v2 orders "direction"), its webhooks (order.created and the sandbox's test event), and the
// conventions' components from package openapi. A deprecated version's document marks every
// operation deprecated and documents the Deprecation, Sunset and Link headers. baseURL, when not
// empty, is its server URL. The version must be one of the registry's.
func OpenAPIDocument(reg *versioning.Registry, version, baseURL string) ([]byte, error) {
	v, ok := reg.Lookup(version)
	if !ok {
		return nil, fmt.Errorf("server: OpenAPIDocument: no version %q", version)
	}
	var doc map[string]any
	if err := json.Unmarshal(openapiTemplate, &doc); err != nil {
		return nil, fmt.Errorf("server: the embedded openapi.json: %w", err)
	}
	doc["info"].(map[string]any)["version"] = version
	if baseURL != "" {
		doc["servers"] = []any{map[string]any{"url": strings.TrimRight(baseURL, "/")}}
	}

	// The order's direction is called side before v2 (order_side_renamed_direction).
	direction := "direction"
	if c, err := reg.Compare(version, orderSideRenamed.Version); err != nil {
		return nil, err
	} else if c < 0 {
		direction = "side"
	}
	schemas := doc["components"].(map[string]any)[openapi.Schemas].(map[string]any)
	schemas["Order"] = orderSchema(direction)
	schemas["CreateOrderRequest"] = createOrderSchema(direction)

	paths := doc["paths"].(map[string]any)
	paths["/webhook_endpoints/{id}/events"].(map[string]any)["get"] = rangeOperation()
	faults := paths["/sandbox/webhook_endpoints/{id}/faults"].(map[string]any)
	faults["post"] = faultsOperation("setWebhookFaults", "The contract's method; PUT is the same request.")
	faults["put"] = faultsOperation("putWebhookFaults", "The same as POST.")
	faults["delete"].(map[string]any)["responses"] = faultsResponses()
	for _, p := range []string{"/webhook_endpoints/{id}/events/{sequence}/resend", "/webhook_endpoints/{id}/recover"} {
		paths[p].(map[string]any)["post"].(map[string]any)["responses"].(map[string]any)["422"] = redeliveryRefused()
	}

	// Every path is under the version.
	versioned := make(map[string]any, len(paths))
	for p, item := range paths {
		versioned["/"+version+p] = item
	}
	doc["paths"] = versioned

	doc["webhooks"] = map[string]any{
		EventOrderCreated: withDescription(openapi.Webhook(EventOrderCreated, openapi.Ref(openapi.Schemas, "Order")),
			"Sent to every endpoint of the licensee and environment when an order is created; data is the order at the licensee's pinned version."),
		producer.EventEndpointDisabled: withDescription(openapi.Webhook(producer.EventEndpointDisabled, openapi.Ref(openapi.Schemas, "WebhookEndpointDisabled")),
			"Sent to the licensee's other endpoints subscribed to it when the producer disables one of theirs: it answered 410 Gone, or its deliveries failed without a success for the disable period (5 days by default). Enabling it again (PATCH status enabled) resumes its deliveries with the next event; the events of the time it was disabled are fetched by range."),
		sandbox.DefaultTestEventType: withDescription(openapi.Webhook(sandbox.DefaultTestEventType, map[string]any{"type": "object"}),
			"Sent by POST /"+version+"/sandbox/events when the request names no type; a request that names one gets an event of that type, with the data it gave."),
	}
	if err := openapi.Merge(doc); err != nil {
		return nil, fmt.Errorf("server: OpenAPIDocument: %w", err)
	}
	if !v.Deprecated.IsZero() {
		openapi.Deprecate(doc, openapi.Deprecation{Successor: v.Successor})
	}
	return json.MarshalIndent(doc, "", "  ")
}

// orderSchema is an order in a version's shape, direction being the name of its direction member.
func orderSchema(direction string) map[string]any {
	return map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"id", "object", "account", direction, "status", "created"},
		"properties": map[string]any{
			"id":      map[string]any{"type": "string", "pattern": "^ord_[a-z2-7]+$"},
			"object":  map[string]any{"const": "order"},
			"account": map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
			direction: map[string]any{"enum": []any{SideBuy, SideSell}},
			"status":  map[string]any{"const": "created"},
			"created": map[string]any{"type": "integer", "description": "Unix seconds."},
		},
	}
}

// createOrderSchema is the body of POST /{version}/orders in the version's shape.
func createOrderSchema(direction string) map[string]any {
	return map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"account", direction},
		"properties": map[string]any{
			"account": map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$",
				"description": "1–64 of A-Z, a-z, 0-9, _ and -."},
			direction: map[string]any{"enum": []any{SideBuy, SideSell}},
		},
	}
}

// rangeOperation is the conventions' range retrieval operation with this server's further answers:
// the version pin (403), and the production rate limit, whose 429 shares the status with the
// conventions' range_requests_in_flight: one response describes both codes.
func rangeOperation() map[string]any {
	op := openapi.RangeOperation()
	rs := op["responses"].(map[string]any)
	rs["403"] = openapi.Ref(openapi.Responses, openapi.ResponseVersionNotEnabled)
	busy := openapi.Component(openapi.Responses, openapi.ResponseRangeRequestsInFlight)
	busy["description"] = busy["description"].(string) + " Or " + apierror.CodeRateLimited +
		": production keys are rate limited per licensee; the sandbox has no ceiling."
	schema := busy["content"].(map[string]any)["application/problem+json"].(map[string]any)["schema"].(map[string]any)
	schema["allOf"].([]any)[1].(map[string]any)["properties"].(map[string]any)["code"] =
		map[string]any{"enum": []any{producer.CodeRangeBusy, apierror.CodeRateLimited}}
	rs["429"] = busy
	return op
}

// redeliveryRefused is the 422 of resend and recover: the idempotency middleware's, or the endpoint is
// disabled. One response describes both codes, as the status is one.
func redeliveryRefused() map[string]any {
	r := openapi.Component(openapi.Responses, openapi.ResponseIdempotencyKeyReused)
	r["description"] = r["description"].(string) + " Or " + producer.CodeEndpointDisabled +
		": the endpoint is disabled, so nothing would be sent; enable it first."
	schema := r["content"].(map[string]any)["application/problem+json"].(map[string]any)["schema"].(map[string]any)
	schema["allOf"].([]any)[1].(map[string]any)["properties"].(map[string]any)["code"] =
		map[string]any{"enum": []any{"idempotency_key_reused", producer.CodeEndpointDisabled}}
	return r
}

// faultsOperation is setting an endpoint's faults, by POST or PUT.
func faultsOperation(id, how string) map[string]any {
	return map[string]any{
		"operationId": id,
		"summary":     "Inject webhook faults on an endpoint (sandbox only)",
		"description": "Drops, duplicates, reorders, delays or corrupts the signature of a share of the endpoint's deliveries, so an evaluator can prove that a consumer recovers. " + how,
		"parameters": []any{openapi.Ref(openapi.Parameters, openapi.ParamWebhookEndpointID),
			openapi.Ref(openapi.Parameters, openapi.ParamIdempotencyKey)},
		"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{
			"schema": openapi.Ref(openapi.Schemas, "Faults")}}},
		"responses": faultsResponses(),
	}
}

// faultsResponses are the answers of the faults control, to every method.
func faultsResponses() map[string]any {
	ref := func(name string) map[string]any { return openapi.Ref(openapi.Responses, name) }
	return map[string]any{
		"200": map[string]any{
			"description": "The endpoint's faults now.",
			"headers": map[string]any{
				openapi.HeaderRequestID:          openapi.Ref(openapi.Headers, openapi.HeaderRequestID),
				openapi.HeaderVersion:            openapi.Ref(openapi.Headers, "X-SVC-Version-Required"),
				openapi.HeaderIdempotentReplayed: openapi.Ref(openapi.Headers, openapi.HeaderIdempotentReplayed),
				openapi.HeaderCacheControl:       openapi.Ref(openapi.Headers, openapi.HeaderCacheControl),
			},
			"content": map[string]any{"application/json": map[string]any{"schema": openapi.Ref(openapi.Schemas, "WebhookFaults")}},
		},
		"400": ref(openapi.ResponseBadRequest),
		"401": ref(openapi.ResponseUnauthorized),
		"403": ref(openapi.ResponseVersionNotEnabled),
		"404": ref(openapi.ResponseNotFound),
		"409": ref(openapi.ResponseIdempotencyKeyInUse),
		"413": ref(openapi.ResponseContentTooLarge),
		"415": ref(openapi.ResponseUnsupportedMediaType),
		"422": ref(openapi.ResponseIdempotencyKeyReused),
		"5XX": ref(openapi.ResponseServerError),
	}
}

func withDescription(item map[string]any, desc string) map[string]any {
	item["post"].(map[string]any)["description"] = desc + "\n\n" + item["post"].(map[string]any)["description"].(string)
	return item
}

// openAPIDocuments builds every version's document once, at start.
func (s *Server) openAPIDocuments(baseURL string) (map[string][]byte, error) {
	reg := s.versions.Registry()
	docs := make(map[string][]byte)
	for _, v := range reg.Versions() {
		d, err := OpenAPIDocument(reg, v.Name, baseURL)
		if err != nil {
			return nil, err
		}
		docs[v.Name] = d
	}
	return docs, nil
}

// openAPIHandler serves the document of the version the router put in the context. Anyone may read
// it: it holds nothing a licensee's key protects. Other methods than GET and HEAD are 405.
func (s *Server) openAPIHandler(docs map[string][]byte) http.Handler {
	allow := []string{http.MethodGet, http.MethodHead}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(allow, r.Method) {
			s.problems.Write(w, r, apierror.MethodNotAllowed(r.Method, allow...))
			return
		}
		doc, ok := docs[s.versionOf(r)]
		if !ok { // the router serves only the registry's versions, and each has a document
			s.problems.Write(w, r, fmt.Errorf("server: no OpenAPI document for %q among %v", s.versionOf(r), slices.Sorted(maps.Keys(docs))))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	})
}
