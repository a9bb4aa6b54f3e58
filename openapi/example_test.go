package openapi_test

import (
	"encoding/json"
	"fmt"

	"github.com/svcplatform/conventions/openapi"
)

// A team's document for one mutating operation, with the conventions merged in: the Idempotency-Key
// header, the standard problems, Bearer security and a webhook.
func Example() {
	doc := map[string]any{
		"openapi":  "3.1.0",
		"info":     map[string]any{"title": "Payments", "version": "v1"},
		"security": []any{map[string]any{openapi.SecurityBearer: []any{}}},
		"paths": map[string]any{"/v1/payments": map[string]any{"post": map[string]any{
			"operationId": "createPayment",
			"parameters":  []any{openapi.Ref(openapi.Parameters, openapi.ParamIdempotencyKey)},
			"responses": map[string]any{
				"201": map[string]any{"description": "The payment.", "headers": map[string]any{
					openapi.HeaderRequestID:          openapi.Ref(openapi.Headers, openapi.HeaderRequestID),
					openapi.HeaderIdempotentReplayed: openapi.Ref(openapi.Headers, openapi.HeaderIdempotentReplayed),
				}},
				"400": openapi.Ref(openapi.Responses, openapi.ResponseBadRequest),
				"401": openapi.Ref(openapi.Responses, openapi.ResponseUnauthorized),
				"409": openapi.Ref(openapi.Responses, openapi.ResponseIdempotencyKeyInUse),
				"422": openapi.Ref(openapi.Responses, openapi.ResponseIdempotencyKeyReused),
				"5XX": openapi.Ref(openapi.Responses, openapi.ResponseServerError),
			},
		}}},
		"webhooks": map[string]any{"payment.created": openapi.Webhook("payment.created", map[string]any{"type": "object"})},
	}
	if err := openapi.Merge(doc); err != nil {
		fmt.Println(err)
		return
	}
	comps := doc["components"].(map[string]any)
	fmt.Println(len(comps[openapi.Responses].(map[string]any)) > 0, comps[openapi.SecuritySchemes].(map[string]any)[openapi.SecurityBearer])

	// A document that redefines a convention is refused.
	comps[openapi.Schemas].(map[string]any)[openapi.SchemaProblem] = map[string]any{"type": "string"}
	fmt.Println(openapi.Merge(doc))

	out, _ := json.Marshal(doc["paths"].(map[string]any)["/v1/payments"].(map[string]any)["post"].(map[string]any)["parameters"])
	fmt.Println(string(out))
	// Output:
	// true map[description:Authorization: Bearer <API key>. The key names its environment: sk_sandbox_… or sk_live_…; sandbox and production data never mix. scheme:bearer type:http]
	// openapi: the document defines a convention's component differently: components.schemas.Problem
	// [{"$ref":"#/components/parameters/IdempotencyKey"}]
}

// Each operation lists every problem code it may answer with, by response key: the codes of its
// shared responses and its own, such as a 404's, which no shared response can name.
func ExampleListProblemCodes() {
	doc := map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "Payments", "version": "v1"},
		"paths": map[string]any{"/v1/payments/{id}": map[string]any{"get": map[string]any{
			"operationId": "getPayment",
			"responses": map[string]any{
				"200": map[string]any{"description": "The payment."},
				"401": openapi.Ref(openapi.Responses, openapi.ResponseUnauthorized),
				"404": openapi.Ref(openapi.Responses, openapi.ResponseNotFound),
			},
			openapi.ExtensionProblemCodes: map[string]any{"404": []any{"payment_not_found"}},
		}}},
	}
	if err := openapi.Merge(doc); err != nil {
		fmt.Println(err)
		return
	}
	if err := openapi.ListProblemCodes(doc); err != nil {
		fmt.Println(err)
		return
	}
	get := doc["paths"].(map[string]any)["/v1/payments/{id}"].(map[string]any)["get"].(map[string]any)
	out, _ := json.MarshalIndent(get[openapi.ExtensionProblemCodes], "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "401": [
	//     "api_key_invalid",
	//     "api_key_malformed",
	//     "api_key_missing",
	//     "auth_scheme_unsupported"
	//   ],
	//   "404": [
	//     "payment_not_found"
	//   ]
	// }
}
