package server

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
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

// OpenAPIDocument returns the OpenAPI 3.1 document of one API version of the server, as GET
// /{version}/openapi.json serves it: its operations (every path under /<version>/), each with the
// permission its route declares (routes.go) as its security requirement's role and x-permission,
// and every problem code it may answer with, by response status, in x-problem-codes; its schemas
// in that version's shape (v1 orders have "side", v2 orders "direction"), its webhooks
// (order.created, webhook_endpoint.disabled and the sandbox's test event), and the conventions'
// components from package openapi. A deprecated version's document marks every operation
// deprecated and documents the Deprecation, Sunset and Link headers. Its server URL is
// Config.BaseURL, when set. The version must be one the server serves.
func (s *Server) OpenAPIDocument(version string) ([]byte, error) {
	doc, ok := s.openapi[version]
	if !ok {
		return nil, fmt.Errorf("server: OpenAPIDocument: no version %q", version)
	}
	return slices.Clone(doc), nil
}

// openAPIDocument builds the document of one version of reg.
func (s *Server) openAPIDocument(reg *versioning.Registry, version, baseURL string) ([]byte, error) {
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
	schemas["ApiKey"] = apiKeySchema(false, false)
	schemas["ApiKeyWithSecret"] = apiKeySchema(true, false)
	schemas["RolledApiKey"] = apiKeySchema(true, true)
	schemas["CreateApiKeyRequest"] = createAPIKeySchema()

	paths := doc["paths"].(map[string]any)
	paths["/webhook_endpoints/{id}/events"].(map[string]any)["get"] = rangeOperation()
	faults := paths["/sandbox/webhook_endpoints/{id}/faults"].(map[string]any)
	faults["post"] = faultsOperation("setWebhookFaults", "The contract's method; PUT is the same request.")
	faults["put"] = faultsOperation("putWebhookFaults", "The same as POST.")
	faults["delete"].(map[string]any)["responses"] = faultsResponses()
	faults["delete"].(map[string]any)[openapi.ExtensionProblemCodes] = map[string]any{
		"404": []any{producer.CodeEndpointNotFound}}
	for _, p := range []string{"/webhook_endpoints/{id}/events/{sequence}/resend", "/webhook_endpoints/{id}/recover"} {
		paths[p].(map[string]any)["post"].(map[string]any)["responses"].(map[string]any)["422"] = redeliveryRefused()
	}
	paths["/version_pin"].(map[string]any)["post"].(map[string]any)["responses"].(map[string]any)["409"] = pinConflict()
	if err := s.documentPermissions(version, paths); err != nil {
		return nil, err
	}
	s.documentMiddlewareCodes(version, paths, doc["security"])

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
	// Each operation lists every code it may answer with: its responses' and its own (the template's
	// x-problem-codes, the middleware's above).
	if err := openapi.ListProblemCodes(doc); err != nil {
		return nil, fmt.Errorf("server: OpenAPIDocument: %w", err)
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

// rangeOperation is the conventions' range retrieval operation with this server's further answer,
// the production rate limit, whose 429 shares the status with the conventions'
// range_requests_in_flight: one response describes both codes. (Its 403 is every API operation's:
// documentPermissions.)
func rangeOperation() map[string]any {
	op := openapi.RangeOperation()
	rs := op["responses"].(map[string]any)
	busy := openapi.Component(openapi.Responses, openapi.ResponseRangeRequestsInFlight)
	busy["description"] = busy["description"].(string) + " Or " + apierror.CodeRateLimited +
		": production keys are rate limited per licensee; the sandbox has no ceiling."
	schema := busy["content"].(map[string]any)["application/problem+json"].(map[string]any)["schema"].(map[string]any)
	schema["allOf"].([]any)[1].(map[string]any)["properties"].(map[string]any)["code"] =
		map[string]any{"enum": []any{producer.CodeRangeBusy, apierror.CodeRateLimited}}
	addCodes(busy, apierror.CodeRateLimited)
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
	addCodes(r, producer.CodeEndpointDisabled)
	return r
}

// pinConflict is the 409 of moving the version pin: the idempotency middleware's, or the upgrade is
// final (its rollback window has closed), located at body /version. One response describes both
// codes, as the status is one; Retry-After comes with the first only.
func pinConflict() map[string]any {
	r := openapi.Component(openapi.Responses, openapi.ResponseIdempotencyKeyInUse)
	r["description"] = r["description"].(string) + " Or " + versioning.CodeVersionUpgradeFinal +
		": the version asked for is the one the pin's last upgrade came from, and the upgrade's rollback window has closed, so the upgrade is final; the detail says since when. It does not change by retrying."
	r["headers"].(map[string]any)[openapi.HeaderRetryAfter] = openapi.Ref(openapi.Headers, openapi.HeaderRetryAfter)
	schema := r["content"].(map[string]any)["application/problem+json"].(map[string]any)["schema"].(map[string]any)
	schema["allOf"].([]any)[1].(map[string]any)["properties"].(map[string]any)["code"] =
		map[string]any{"enum": []any{"idempotency_key_in_use", versioning.CodeVersionUpgradeFinal}}
	addCodes(r, versioning.CodeVersionUpgradeFinal)
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
		// The faults' bounds (sandbox.Faults.Validate), and an endpoint that is not the caller's.
		openapi.ExtensionProblemCodes: map[string]any{
			"400": []any{apierror.CodeFieldMissing, producer.CodeOutOfRange, apierror.CodeValidationFailed},
			"404": []any{producer.CodeEndpointNotFound},
		},
		"responses": faultsResponses(),
	}
}

// faultsResponses are the answers of the faults control, to every method (its 403 is every API
// operation's: documentPermissions).
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
		"404": ref(openapi.ResponseNotFound),
		"409": ref(openapi.ResponseIdempotencyKeyInUse),
		"413": ref(openapi.ResponseContentTooLarge),
		"415": ref(openapi.ResponseUnsupportedMediaType),
		"422": ref(openapi.ResponseIdempotencyKeyReused),
		"5XX": ref(openapi.ResponseServerError),
	}
}

// documentPermissions gives every operation an API key reaches the permission its route declares
// (routes.go), found the way a request finds it: as the role of its security requirement
// (security: [{"BearerAuth": ["orders:write"]}], which OpenAPI 3.1 allows for any scheme), as
// x-permission for tools that look for it, and in its description; and its 403 is the shared
// Forbidden response, which describes permission_denied beside version_not_enabled. An operation
// open to every key (the changelog) has a security requirement without a role, no x-permission,
// and the 403 version_not_enabled only. The operations served beside the API's routes (the public
// documents, the admin's credentials) take no API key permission. An operation of the API with no
// declaration is an error: the document would not say what a restricted key needs.
func (s *Server) documentPermissions(version string, paths map[string]any) error {
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		item := paths[p].(map[string]any)
		for _, m := range slices.Sorted(maps.Keys(item)) {
			op, ok := item[m].(map[string]any)
			method := strings.ToUpper(m)
			if !ok || !slices.Contains(httpMethods, method) {
				continue
			}
			if _, pattern := s.root.Handler(probe(method + " /" + version + p)); pattern != "/" {
				continue
			}
			perm, ok := s.permissionOf(method, p)
			if !ok {
				return fmt.Errorf("server: the OpenAPI document's %s %s reaches no route that declares a permission (routes.go)", method, p)
			}
			desc, _ := op["description"].(string)
			if perm == "" {
				op["security"] = []any{map[string]any{openapi.SecurityBearer: []any{}}}
				op["responses"].(map[string]any)["403"] = openapi.Ref(openapi.Responses, openapi.ResponseVersionNotEnabled)
				op["description"] = strings.TrimSpace(desc + " Any API key may call it, restricted or not: it requires no permission.")
				continue
			}
			op["security"] = []any{map[string]any{openapi.SecurityBearer: []any{perm}}}
			op["x-permission"] = perm
			op["responses"].(map[string]any)["403"] = openapi.Ref(openapi.Responses, openapi.ResponseForbidden)
			op["description"] = strings.TrimSpace(desc + " Requires the permission " + perm + ": a restricted key without it gets 403 permission_denied.")
		}
	}
	return nil
}

// addCodes adds codes to the x-problem-codes of r, a problem response made from a component whose
// description and schema the caller extended with them.
func addCodes(r map[string]any, codes ...string) {
	list, _ := r[openapi.ExtensionProblemCodes].([]any)
	for _, c := range codes {
		list = append(list, c)
	}
	r[openapi.ExtensionProblemCodes] = list
}

// The problem codes of the middleware in front of the operations (routes.go), by response status.
// Each set is declared here once and listed on every operation behind that middleware, found from
// what the document says of the operation (documentMiddlewareCodes); an operation's own codes are
// in the template, beside it. A set's status that an operation does not document is not listed
// for it.
var (
	// authenticatedCodes: an operation that takes a credential goes through authentication, the
	// production rate limit and the versioning router, in that order, before any route is chosen —
	// a production key past its rate is refused on a sandbox control too — and each can fail on its
	// store. (Their 401s and 403s are the shared Unauthorized and Forbidden responses.)
	authenticatedCodes = map[string][]string{
		"429": {apierror.CodeRateLimited},
		"5XX": {apikey.CodeUnavailable, versioning.CodePinUnavailable},
	}
	// idempotentCodes: an operation that takes an Idempotency-Key goes through the idempotency
	// middleware, which reads the body to fingerprint it and may find its store failing or a
	// credential's quota of records used up. (Its 409 and 422 are the shared responses; its 500 for
	// an answer too large to store in transactional mode is listed only where an answer can be:
	// the sandbox trigger's.)
	idempotentCodes = map[string][]string{
		"400": {idempotency.CodeKeyMissing, idempotency.CodeKeyInvalid, idempotency.CodeBodyUnreadable},
		"413": {apierror.CodeBodyTooLarge},
		"429": {idempotency.CodeQuotaExceeded},
		"5XX": {apierror.CodeUnavailable},
	}
	// jsonBodyCodes: every JSON request body is decoded strictly (apierror.Decode, DecodeBytes); a
	// required one may be missing (bodyRequiredCodes), and one that takes members may name one twice
	// (memberCodes: in a body that takes none, maxProperties 0, the first member is unknown already).
	// Each violation is the problem's code when it is the only one.
	jsonBodyCodes = map[string][]string{
		"400": {apierror.CodeMalformedJSON, apierror.CodeTrailingData, apierror.CodeWrongType, apierror.CodeUnknownField,
			apierror.CodeInvalidUTF8, idempotency.CodeBodyUnreadable},
	}
	bodyRequiredCodes = map[string][]string{"400": {apierror.CodeBodyMissing}}
	memberCodes       = map[string][]string{"400": {apierror.CodeDuplicateMember}}
	// hiddenCodes: a sandbox control answers a production key, and issuing credentials anyone
	// without the admin token, exactly as a route that does not exist.
	hiddenCodes = map[string][]string{"404": {CodeRouteNotFound}}
)

// documentMiddlewareCodes adds to the x-problem-codes of every operation in paths (below the
// version) the codes of the middleware in front of it, each set where the operation documents the
// status: authenticatedCodes unless it is public (security, or the document's, empty),
// idempotentCodes where it takes an Idempotency-Key, jsonBodyCodes (with bodyRequiredCodes and
// memberCodes) where it takes a JSON body, and hiddenCodes for the sandbox controls and the admin's
// route.
func (s *Server) documentMiddlewareCodes(version string, paths map[string]any, security any) {
	idemKey := openapi.Ref(openapi.Parameters, openapi.ParamIdempotencyKey)
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		item := paths[p].(map[string]any)
		for _, m := range slices.Sorted(maps.Keys(item)) {
			op, ok := item[m].(map[string]any)
			method := strings.ToUpper(m)
			if !ok || !slices.Contains(httpMethods, method) {
				continue
			}
			responses := op["responses"].(map[string]any)
			own, _ := op[openapi.ExtensionProblemCodes].(map[string]any)
			if own == nil {
				own = map[string]any{}
			}
			add := func(set map[string][]string) {
				for status, codes := range set {
					if _, documented := responses[status]; !documented {
						continue
					}
					list, _ := own[status].([]any)
					for _, c := range codes {
						list = append(list, c)
					}
					own[status] = list
				}
			}
			sec, ok := op["security"]
			if !ok {
				sec = security
			}
			list, _ := sec.([]any)
			authenticated := len(list) > 0
			if authenticated {
				add(authenticatedCodes)
			}
			params, _ := op["parameters"].([]any)
			if slices.ContainsFunc(params, func(p any) bool { return reflect.DeepEqual(p, idemKey) }) {
				add(idempotentCodes)
			}
			body, _ := op["requestBody"].(map[string]any)
			if content, _ := body["content"].(map[string]any); content["application/json"] != nil {
				add(jsonBodyCodes)
				if body["required"] == true {
					add(bodyRequiredCodes)
				}
				media, _ := content["application/json"].(map[string]any)
				if schema, _ := media["schema"].(map[string]any); schema["maxProperties"] != float64(0) {
					add(memberCodes)
				}
			}
			_, rootPattern := s.root.Handler(probe(method + " /" + version + p))
			_, apiPattern := s.api.Handler(probe(method + " " + p))
			// The admin's route is the one beside the API's that takes a credential.
			if s.rules[apiPattern].sandbox || (rootPattern != "/" && authenticated) {
				add(hiddenCodes)
			}
			if len(own) > 0 {
				op[openapi.ExtensionProblemCodes] = own
			}
		}
	}
}

// httpMethods are the methods a path item may describe an operation for.
var httpMethods = []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodOptions,
	http.MethodHead, http.MethodPatch, http.MethodTrace}

// permissionPattern is the shape of a permission: a resource and read or write.
const permissionPattern = "^[a-z][a-z0-9_]{0,63}:(read|write)$"

// apiKeySchema is an API key as the keys API answers it (apikey.KeysHandler): withSecret for the
// answer that creates it, the only one that shows its secret, and withPrevious for a roll's, which
// also shows the rolled key.
func apiKeySchema(withSecret, withPrevious bool) map[string]any {
	required := []any{"object", "id", "environment", "restricted", "permissions", "created", "expires_at", "last_used_at"}
	props := map[string]any{
		"object":      map[string]any{"const": "api_key"},
		"id":          map[string]any{"type": "string", "pattern": "^key_[a-z2-7]+$"},
		"environment": map[string]any{"enum": []any{string(apikey.Sandbox), string(apikey.Live)}, "description": "Where the key works: its secret starts sk_sandbox_ or sk_live_."},
		"restricted":  map[string]any{"type": "boolean", "description": "Whether the key is restricted to permissions; false for the full key."},
		"permissions": map[string]any{"type": []any{"array", "null"}, "minItems": 1, "maxItems": apikey.MaxPermissions,
			"items":       map[string]any{"type": "string", "pattern": permissionPattern},
			"description": "What the key may do, each resource:read or resource:write (write includes read), sorted; null for the full key, which may do everything."},
		"created": map[string]any{"type": "integer", "description": "When it was created, Unix seconds."},
		"expires_at": map[string]any{"type": []any{"integer", "null"},
			"description": "When it stops working, Unix seconds: its expiry, or the end a roll or a revocation set, whichever comes first; null: never."},
		"last_used_at": map[string]any{"type": []any{"integer", "null"},
			"description": "When it last authenticated a request, Unix seconds, to the minute: a use is written at most once a minute per key; null: never used."},
	}
	if withSecret {
		required = append(required, "secret")
		props["secret"] = map[string]any{"type": "string", "pattern": "^sk_(sandbox|live)_[a-z2-7]{40}$",
			"description": "The key itself, shown this once: only its hash is stored. Send it as Authorization: Bearer <key>."}
	}
	if withPrevious {
		required = append(required, "previous_key")
		props["previous_key"] = openapi.Ref(openapi.Schemas, "ApiKey")
	}
	return map[string]any{"type": "object", "additionalProperties": false, "required": required, "properties": props}
}

// createAPIKeySchema is the body of POST /{version}/api_keys: the permissions are the API's own.
func createAPIKeySchema() map[string]any {
	vocabulary := make([]any, len(permissions))
	for i, p := range permissions {
		vocabulary[i] = p
	}
	return map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"properties": map[string]any{
			"permissions": map[string]any{"type": "array", "minItems": 1, "maxItems": apikey.MaxPermissions,
				"items": map[string]any{"enum": vocabulary},
				"description": "What the new key may do: some of this API's permissions (write includes read), each held by the key that asks. " +
					"Omitted: the permissions of the key that asks (the full key for a full key)."},
		},
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
		d, err := s.openAPIDocument(reg, v.Name, baseURL)
		if err != nil {
			return nil, err
		}
		docs[v.Name] = d
	}
	return docs, nil
}

// openAPIHandler serves the document of the version the router put in the context. Anyone may read
// it: it holds nothing a licensee's key protects. Other methods than GET and HEAD are 405.
func (s *Server) openAPIHandler() http.Handler {
	allow := []string{http.MethodGet, http.MethodHead}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(allow, r.Method) {
			s.problems.Write(w, r, apierror.MethodNotAllowed(r.Method, allow...))
			return
		}
		doc, ok := s.openapi[s.versionOf(r)]
		if !ok { // the router serves only the registry's versions, and each has a document
			s.problems.Write(w, r, fmt.Errorf("server: no OpenAPI document for %q among %v", s.versionOf(r), slices.Sorted(maps.Keys(s.openapi))))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	})
}
