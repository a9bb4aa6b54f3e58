package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/openapi"
	"github.com/svcplatform/conventions/versioning"
	"github.com/svcplatform/conventions/webhook/producer"
)

// loadDocument loads an OpenAPI document with kin-openapi and validates it as the OpenAPI version it
// declares.
func loadDocument(t *testing.T, data []byte) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	require.NoError(t, err)
	require.True(t, doc.IsOpenAPI31OrLater(), "the documents are OpenAPI 3.1")
	require.NoError(t, doc.Validate(context.Background()))
	return doc
}

// TestConventionsDocumentValidates loads the conventions' own document, which teams reference from
// outside Go, with the validator the contract tests use.
func TestConventionsDocumentValidates(t *testing.T) {
	doc := loadDocument(t, openapi.JSON())
	require.Len(t, doc.Webhooks, 1)
	for _, section := range []string{openapi.Schemas, openapi.Parameters, openapi.Headers, openapi.Responses,
		openapi.SecuritySchemes} {
		require.NotEmpty(t, openapi.Components()[section], section)
	}
}

// TestOpenAPIDocuments checks each version's document: it validates, has every route of the server
// under its version, the order in the version's shape, the webhooks, and the deprecation of v1.
func TestOpenAPIDocuments(t *testing.T) {
	ts := newTestServer(t)
	for _, tc := range []struct {
		version, direction, absent string
		deprecated                 bool
	}{
		{"v1", "side", "direction", true},
		{"v2", "direction", "side", false},
	} {
		t.Run(tc.version, func(t *testing.T) {
			w := ts.do(http.MethodGet, "/"+tc.version+"/openapi.json", "", "", "")
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			require.Equal(t, "application/json", w.Header().Get("Content-Type"))
			require.Equal(t, tc.version, w.Header().Get("X-SVC-Version"))
			doc := loadDocument(t, w.Body.Bytes())
			require.Equal(t, tc.version, doc.Info.Version)

			var paths []string
			for p, item := range doc.Paths.Map() {
				require.True(t, strings.HasPrefix(p, "/"+tc.version+"/"), p)
				for m, op := range item.Operations() {
					paths = append(paths, m+" "+strings.TrimPrefix(p, "/"+tc.version))
					require.Equal(t, tc.deprecated, op.Deprecated, "%s %s", m, p)
				}
			}
			require.ElementsMatch(t, []string{
				"GET /openapi.json",
				"POST /orders", "GET /orders/{id}",
				"POST /webhook_endpoints", "GET /webhook_endpoints", "GET /webhook_endpoints/{id}/events", "GET /webhook_endpoints/{id}/deliveries",
				"GET /webhook_endpoints/{id}", "PATCH /webhook_endpoints/{id}", "DELETE /webhook_endpoints/{id}",
				"POST /webhook_endpoints/{id}/roll_secret", "GET /event_types",
				"GET /webhook_endpoints/{id}/stats", "POST /webhook_endpoints/{id}/events/{sequence}/resend",
				"POST /webhook_endpoints/{id}/recover",
				"GET /api_keys", "POST /api_keys", "GET /api_keys/{id}", "DELETE /api_keys/{id}", "POST /api_keys/{id}/roll",
				"GET /requests", "GET /requests/{request_id}", "GET /version_pin", "POST /version_pin", "GET /changelog",
				"POST /portal_sessions",
				"POST /sandbox/credentials", "POST /sandbox/events", "POST /sandbox/reset",
				"POST /sandbox/webhook_endpoints/{id}/faults", "PUT /sandbox/webhook_endpoints/{id}/faults",
				"DELETE /sandbox/webhook_endpoints/{id}/faults",
			}, paths)

			order := doc.Components.Schemas["Order"].Value
			require.Contains(t, order.Properties, tc.direction)
			require.NotContains(t, order.Properties, tc.absent)
			require.Contains(t, doc.Components.Schemas["CreateOrderRequest"].Value.Required, tc.direction)
			require.Contains(t, doc.Webhooks, EventOrderCreated)
			require.Contains(t, doc.Webhooks, "sandbox.test")
			require.Contains(t, doc.Webhooks, "webhook_endpoint.disabled")

			_, hasDeprecation := doc.Components.Responses[openapi.ResponseBadRequest].Value.Headers[openapi.HeaderDeprecation]
			require.Equal(t, tc.deprecated, hasDeprecation, "shared responses document the deprecation headers")
			created := doc.Paths.Value("/" + tc.version + "/orders").Post.Responses.Value("201").Value
			_, hasSunset := created.Headers[openapi.HeaderSunset]
			require.Equal(t, tc.deprecated, hasSunset)
		})
	}

	t.Run("unknown version", func(t *testing.T) {
		w := ts.do(http.MethodGet, "/v9/openapi.json", "", "", "")
		require.Equal(t, http.StatusNotFound, w.Code)
		require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	})
	t.Run("other methods", func(t *testing.T) {
		w := ts.do(http.MethodPost, "/v1/openapi.json", "", "", "")
		require.Equal(t, http.StatusMethodNotAllowed, w.Code)
		require.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
	})
}

// TestOpenAPIPermissions: every operation an API key reaches shows the permission its route declares
// — as the role of its security requirement and as x-permission, generated from the declarations in
// routes.go — and its 403 describes permission_denied beside version_not_enabled. The public
// document and the admin's credentials take no API key; the changelog takes any, without a role.
func TestOpenAPIPermissions(t *testing.T) {
	ts := newTestServer(t)
	for _, v := range []string{"v1", "v2"} {
		raw := ts.do(http.MethodGet, "/"+v+"/openapi.json", "", "", "").Body.Bytes()
		doc := loadDocument(t, raw)
		var decoded struct {
			Paths map[string]map[string]map[string]any `json:"paths"`
		}
		require.NoError(t, json.Unmarshal(raw, &decoded))
		used := map[string]bool{}
		for p, item := range doc.Paths.Map() {
			path := strings.TrimPrefix(p, "/"+v)
			for m, op := range item.Operations() {
				name := m + " " + path
				xperm := decoded.Paths[p][strings.ToLower(m)]["x-permission"]
				if name == "GET /openapi.json" || name == "POST /sandbox/credentials" {
					require.Nil(t, xperm, name)
					continue
				}
				perm, declared := ts.permissionOf(m, path)
				require.True(t, declared, "%s has no declared permission", name)
				if name == "GET /changelog" {
					require.Empty(t, perm, "any key may read the changelog")
					require.Nil(t, xperm, name)
					require.Equal(t, openapi3.SecurityRequirements{{openapi.SecurityBearer: []string{}}}, *op.Security, name)
					require.Equal(t, "#/components/responses/"+openapi.ResponseVersionNotEnabled, op.Responses.Value("403").Ref, name)
					continue
				}
				require.Equal(t, perm, xperm, name)
				require.NotNil(t, op.Security, name)
				require.Equal(t, openapi3.SecurityRequirements{{openapi.SecurityBearer: []string{perm}}}, *op.Security, name)
				require.Contains(t, op.Description, "Requires the permission "+perm, name)
				forbidden := op.Responses.Value("403")
				require.NotNil(t, forbidden, name)
				require.Equal(t, "#/components/responses/"+openapi.ResponseForbidden, forbidden.Ref, name)
				used[perm] = true
			}
		}
		for _, p := range permissions {
			require.True(t, used[p], "%s: no operation shows %s", v, p)
		}
		// The permissions a new key may be given are the API's own.
		items := doc.Components.Schemas["CreateApiKeyRequest"].Value.Properties["permissions"].Value.Items.Value
		require.Len(t, items.Enum, len(permissions))
		for i, p := range permissions {
			require.Equal(t, p, items.Enum[i])
		}
		// The shared 403 describes both codes.
		codes := doc.Components.Responses[openapi.ResponseForbidden].Value.Content.Get("application/problem+json").Schema.Value.AllOf[1].Value.Properties["code"].Value.Enum
		require.ElementsMatch(t, []any{apikey.CodePermissionDenied, versioning.CodeVersionNotEnabled}, codes)
	}
}

// TestOpenAPIAPIKeyMatchesTheServer checks the document's key schemas against what the keys API
// writes: a created key (with its secret), a rolled one (with the key it replaced), a listed one and
// one got alone (without a secret: additionalProperties is false, so a secret would fail).
func TestOpenAPIAPIKeyMatchesTheServer(t *testing.T) {
	ts := newTestServer(t)
	doc := loadDocument(t, ts.do(http.MethodGet, "/v1/openapi.json", "", "", "").Body.Bytes())
	check := func(schema string, body []byte) {
		t.Helper()
		var v any
		require.NoError(t, json.Unmarshal(body, &v))
		require.NoError(t, doc.Components.Schemas[schema].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()), "%s: %s", schema, body)
	}
	req := `{"permissions":["orders:read","api_keys:write"]}`
	var body any
	require.NoError(t, json.Unmarshal([]byte(req), &body))
	require.NoError(t, doc.Components.Schemas["CreateApiKeyRequest"].Value.VisitJSON(body, openapi3.EnableJSONSchema2020()))
	w := ts.do(http.MethodPost, "/v1/api_keys", ts.key, ts.nextKey(), req)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	check("ApiKeyWithSecret", w.Body.Bytes())
	var k struct{ ID string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &k))
	w = ts.do(http.MethodPost, "/v1/api_keys/"+k.ID+"/roll", ts.key, ts.nextKey(), `{"expires_in":60}`)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	check("RolledApiKey", w.Body.Bytes())
	check("ApiKeyList", ts.do(http.MethodGet, "/v1/api_keys", ts.key, "", "").Body.Bytes())
	check("ApiKey", ts.do(http.MethodGet, "/v1/api_keys/"+k.ID, ts.key, "", "").Body.Bytes())
	w = ts.do(http.MethodPost, "/v1/api_keys", ts.key, ts.nextKey(), `{}`)
	var secretful any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &secretful))
	require.Error(t, doc.Components.Schemas["ApiKey"].Value.VisitJSON(secretful, openapi3.EnableJSONSchema2020()),
		"the schema of a listed key refuses a secret")
}

// TestOpenAPIOrderMatchesTheServer checks the document's order schema against what the handler
// writes, in both versions, so the two cannot drift apart unnoticed.
func TestOpenAPIOrderMatchesTheServer(t *testing.T) {
	ts := newTestServer(t)
	for _, tc := range []struct{ version, body string }{
		{"v1", `{"account":"acc_1","side":"buy"}`},
		{"v2", `{"account":"acc_1","direction":"sell"}`},
	} {
		t.Run(tc.version, func(t *testing.T) {
			s := newTestServer(t) // a licensee of its own: it is pinned to the version of its first request
			w := s.do(http.MethodPost, "/"+tc.version+"/orders", s.key, s.nextKey(), tc.body)
			require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
			doc := loadDocument(t, ts.do(http.MethodGet, "/"+tc.version+"/openapi.json", "", "", "").Body.Bytes())
			var order any
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &order))
			require.NoError(t, doc.Components.Schemas["Order"].Value.VisitJSON(order, openapi3.EnableJSONSchema2020()))
			var req any
			require.NoError(t, json.Unmarshal([]byte(tc.body), &req))
			require.NoError(t, doc.Components.Schemas["CreateOrderRequest"].Value.VisitJSON(req, openapi3.EnableJSONSchema2020()))
		})
	}
}

// TestOpenAPIEventBounds: the refusals of the bounds on events are documented with the codes the
// server sends — 413 event_too_large and 429 events_quota_exceeded (with Retry-After) where an event
// is published, 429 range_requests_in_flight beside the rate limit on range retrieval — so that the
// document and the handlers cannot drift apart.
func TestOpenAPIEventBounds(t *testing.T) {
	ts := newTestServer(t)
	// codes returns the codes a response's problem schema allows.
	codes := func(r *openapi3.Response) []any {
		s := r.Content.Get("application/problem+json").Schema.Value
		require.Len(t, s.AllOf, 2)
		return s.AllOf[1].Value.Properties["code"].Value.Enum
	}
	for _, v := range []string{"v1", "v2"} {
		doc := loadDocument(t, ts.do(http.MethodGet, "/"+v+"/openapi.json", "", "", "").Body.Bytes())
		for _, path := range []string{"/orders", "/sandbox/events"} {
			rs := doc.Paths.Value("/" + v + path).Post.Responses
			require.Contains(t, codes(rs.Value("413").Value), CodeEventTooLarge, "%s %s", v, path)
			require.Contains(t, codes(rs.Value("413").Value), apierror.CodeBodyTooLarge, "%s %s", v, path)
			busy := rs.Value("429").Value
			require.Contains(t, codes(busy), CodeEventsQuotaExceeded, "%s %s", v, path)
			require.Contains(t, codes(busy), idempotency.CodeQuotaExceeded, "%s %s", v, path)
			require.True(t, busy.Headers["Retry-After"].Value.Required, "%s %s", v, path)
		}
		rangeBusy := doc.Paths.Value("/" + v + "/webhook_endpoints/{id}/events").Get.Responses.Value("429").Value
		require.ElementsMatch(t, []any{producer.CodeRangeBusy, apierror.CodeRateLimited}, codes(rangeBusy))
		require.True(t, rangeBusy.Headers["Retry-After"].Value.Required)
	}
}

// TestOpenAPIRequestsPinAndChangelogMatchTheServer checks the document's schemas of the request
// log, the version pin and the changelog against what the server writes, and that the pin's 409
// describes both of its codes.
func TestOpenAPIRequestsPinAndChangelogMatchTheServer(t *testing.T) {
	ts := newTestServer(t)
	doc := loadDocument(t, ts.do(http.MethodGet, "/v1/openapi.json", "", "", "").Body.Bytes())
	check := func(schema string, w *httptest.ResponseRecorder) {
		t.Helper()
		require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
		var v any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v))
		require.NoError(t, doc.Components.Schemas[schema].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()), "%s: %s", schema, w.Body)
	}
	w := ts.do(http.MethodPost, "/v1/orders", ts.key, "k", `{"account":"acc_1","side":"buy"}`)
	ts.do(http.MethodPost, "/v1/orders", ts.key, "k", `{"account":"acc_1","side":"buy"}`)
	ts.do(http.MethodGet, "/v1/orders/ord_x", ts.key, "", "")
	flushLog(t, ts.Server)
	check("RequestLogEntry", ts.do(http.MethodGet, "/v1/requests/"+w.Header().Get("X-Request-Id"), ts.key, "", ""))
	check("RequestLogList", ts.do(http.MethodGet, "/v1/requests", ts.key, "", ""))
	check("VersionPin", ts.do(http.MethodGet, "/v1/version_pin", ts.key, "", ""))
	check("VersionPin", ts.do(http.MethodPost, "/v1/version_pin", ts.key, "up", `{"version":"v2"}`)) // previous_version, rollback_until
	check("Changelog", ts.do(http.MethodGet, "/v1/changelog", ts.key, "", ""))

	conflict := doc.Paths.Value("/v1/version_pin").Post.Responses.Value("409").Value
	codes := conflict.Content.Get("application/problem+json").Schema.Value.AllOf[1].Value.Properties["code"].Value.Enum
	require.ElementsMatch(t, []any{"idempotency_key_in_use", versioning.CodeVersionUpgradeFinal}, codes)
	require.False(t, conflict.Headers["Retry-After"].Value.Required, "a final upgrade has no Retry-After")
}

// TestOpenAPIProblemCodes: each operation lists, by status, every code it may answer with — those of
// its shared responses, its own from the template, and those of the middleware in front of it — and
// each inline problem response lists its own; info.description says where a code is documented.
func TestOpenAPIProblemCodes(t *testing.T) {
	ts := newTestServer(t)
	for _, v := range []string{"v1", "v2"} {
		raw := ts.do(http.MethodGet, "/"+v+"/openapi.json", "", "", "").Body.Bytes()
		doc := loadDocument(t, raw)
		require.Contains(t, doc.Info.Description, "x-problem-codes")
		require.Contains(t, doc.Info.Description, "<server>/problems/<code>")
		var decoded struct {
			Paths map[string]map[string]struct {
				Codes     map[string][]string `json:"x-problem-codes"`
				Responses map[string]struct {
					Ref     string         `json:"$ref"`
					Content map[string]any `json:"content"`
					Codes   *[]string      `json:"x-problem-codes"`
				} `json:"responses"`
			} `json:"paths"`
		}
		require.NoError(t, json.Unmarshal(raw, &decoded))
		codes := func(method, path, status string) []string {
			return decoded.Paths["/"+v+path][method].Codes[status]
		}
		for p, item := range decoded.Paths {
			for m, op := range item {
				for status, r := range op.Responses {
					if r.Ref == "" && r.Content["application/problem+json"] != nil {
						require.NotNil(t, r.Codes, "%s %s %s: an inline problem response lists its codes", m, p, status)
						for _, c := range *r.Codes {
							require.Contains(t, op.Codes[status], c, "%s %s %s", m, p, status)
						}
					}
				}
			}
		}

		// The route's own codes, declared once beside the operation.
		require.Equal(t, []string{CodeOrderNotFound}, codes("get", "/orders/{id}", "404"))
		require.Subset(t, codes("post", "/orders", "400"), []string{CodeInvalidEnum, CodeInvalidFormat, CodeInvalidLength,
			apierror.CodeFieldMissing, apierror.CodeValidationFailed})
		for _, op := range [][2]string{{"get", "/webhook_endpoints/{id}"}, {"patch", "/webhook_endpoints/{id}"},
			{"delete", "/webhook_endpoints/{id}"}, {"post", "/webhook_endpoints/{id}/roll_secret"},
			{"get", "/webhook_endpoints/{id}/events"}, {"get", "/webhook_endpoints/{id}/deliveries"},
			{"get", "/webhook_endpoints/{id}/stats"}, {"post", "/webhook_endpoints/{id}/recover"},
			{"delete", "/sandbox/webhook_endpoints/{id}/faults"}} {
			require.Contains(t, codes(op[0], op[1], "404"), producer.CodeEndpointNotFound, "%s %s", op[0], op[1])
		}
		require.Equal(t, []string{apierror.CodeRouteNotFound, producer.CodeEndpointNotFound}, codes("post", "/sandbox/events", "404"),
			"a production key is told the control does not exist")
		require.Contains(t, codes("post", "/version_pin", "409"), versioning.CodeVersionUpgradeFinal)
		require.Equal(t, []string{producer.CodeRangeBusy, apierror.CodeRateLimited}, codes("get", "/webhook_endpoints/{id}/events", "429"))
		// The shared responses' codes, and the middleware's.
		require.Equal(t, []string{apikey.CodeInvalid, apikey.CodeMalformed, apikey.CodeMissing, apikey.CodeSchemeUnsupported},
			codes("get", "/changelog", "401"))
		require.Equal(t, []string{versioning.CodeVersionNotEnabled}, codes("get", "/changelog", "403"))
		require.Subset(t, codes("post", "/orders", "400"), []string{idempotency.CodeKeyMissing, idempotency.CodeKeyInvalid,
			apierror.CodeMalformedJSON, apierror.CodeBodyMissing, apierror.CodeQueryMalformed})
		require.NotContains(t, codes("post", "/webhook_endpoints/{id}/roll_secret", "400"), apierror.CodeBodyMissing,
			"an optional body is never missing")
		require.Subset(t, codes("get", "/orders/{id}", "5XX"), []string{apierror.CodeInternal, apikey.CodeUnavailable,
			versioning.CodePinUnavailable})
		require.NotContains(t, codes("get", "/orders/{id}", "5XX"), idempotency.CodeResponseTooLarge, "no idempotency on a GET")
		require.Equal(t, []string{apierror.CodeQueryMalformed}, codes("get", "/openapi.json", "400"), "public: no credential to refuse")
		require.NotContains(t, codes("post", "/sandbox/credentials", "400"), apierror.CodeDuplicateMember,
			"a body that takes no member cannot name one twice: the first is unknown")
		require.Contains(t, codes("post", "/sandbox/credentials", "400"), apierror.CodeUnknownField)
		require.Equal(t, []string{apierror.CodeRouteNotFound}, codes("post", "/sandbox/credentials", "404"), "without the admin token")
		for p, item := range decoded.Paths {
			for m, op := range item {
				if m+" "+p != "post /"+v+"/sandbox/events" {
					require.NotContains(t, op.Codes["5XX"], idempotency.CodeResponseTooLarge,
						"%s %s: only the trigger's answer can outgrow what an idempotency record stores", m, p)
				}
			}
		}
		require.Contains(t, codes("post", "/sandbox/events", "5XX"), idempotency.CodeResponseTooLarge)
	}
}
