package openapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/openapi"
	"github.com/svcplatform/conventions/webhook/producer"
)

// resolve follows a local JSON Pointer reference ("#/components/…") in doc.
func resolve(doc map[string]any, ref string) (any, bool) {
	ptr, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var cur any = doc
	for tok := range strings.SplitSeq(ptr, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// refs lists every $ref in v.
func refs(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" {
				*out = append(*out, s)
			}
			refs(x, out)
		}
	case []any:
		for _, x := range v {
			refs(x, out)
		}
	}
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var d map[string]any
	require.NoError(t, json.Unmarshal(b, &d))
	return d
}

// TestEveryRefResolves: the document is self-contained, so a team can reference any part of it.
// (The examples module validates it with kin-openapi as well.)
func TestEveryRefResolves(t *testing.T) {
	doc := decode(t, openapi.JSON())
	require.Equal(t, "3.1.0", doc["openapi"])
	var all []string
	refs(doc, &all)
	require.NotEmpty(t, all)
	for _, r := range all {
		_, ok := resolve(doc, r)
		require.True(t, ok, "unresolved $ref %s", r)
	}
}

// TestNamedComponentsExist: every exported name is in the document, so Ref never points nowhere.
func TestNamedComponentsExist(t *testing.T) {
	c := openapi.Components()
	for section, names := range map[string][]string{
		openapi.Schemas: {openapi.SchemaProblem, openapi.SchemaViolation, openapi.SchemaRequestID, openapi.SchemaEvent,
			openapi.SchemaEventType, openapi.SchemaSequence, openapi.SchemaEventList},
		openapi.Parameters: {openapi.ParamIdempotencyKey, openapi.ParamRangeFrom, openapi.ParamRangeTo,
			openapi.ParamRangeLimit, openapi.ParamWebhookEndpointID},
		openapi.Headers: {openapi.HeaderRequestID, openapi.HeaderVersion, openapi.HeaderIdempotentReplayed,
			openapi.HeaderRetryAfter, openapi.HeaderRetryAfterRequired, openapi.HeaderWWWAuthenticate,
			openapi.HeaderDeprecation, openapi.HeaderSunset, openapi.HeaderLink, openapi.HeaderSignature, openapi.HeaderSequence,
			openapi.HeaderRedelivery,
			openapi.HeaderCacheControl, openapi.HeaderCacheNoStore, openapi.HeaderContentTypeOptions, openapi.HeaderAcceptPost},
		openapi.Responses: {openapi.ResponseBadRequest, openapi.ResponseUnauthorized, openapi.ResponseVersionNotEnabled,
			openapi.ResponsePermissionDenied, openapi.ResponseForbidden,
			openapi.ResponseNotFound, openapi.ResponseIdempotencyKeyInUse, openapi.ResponseEventsPruned,
			openapi.ResponseContentTooLarge, openapi.ResponseUnsupportedMediaType, openapi.ResponseIdempotencyKeyReused,
			openapi.ResponseTooManyRequests, openapi.ResponseRangeRequestsInFlight, openapi.ResponseServerError,
			openapi.ResponseEventList},
		openapi.SecuritySchemes: {openapi.SecurityBearer},
	} {
		sec := c[section].(map[string]any)
		require.Len(t, sec, len(names), "components.%s has a name without a constant", section)
		for _, n := range names {
			require.Contains(t, sec, n, "components.%s", section)
			require.NotNil(t, openapi.Component(section, n))
		}
	}
	require.Nil(t, openapi.Component(openapi.Schemas, "Nope"))
	require.Equal(t, map[string]any{"$ref": "#/components/responses/BadRequest"}, openapi.Ref(openapi.Responses, openapi.ResponseBadRequest))
	require.Equal(t, map[string]any{"$ref": "#/components/schemas/a~1b~0c"}, openapi.Ref(openapi.Schemas, "a/b~c"))
}

// TestFreshCopies: what one caller changes, no other caller sees.
func TestFreshCopies(t *testing.T) {
	c := openapi.Components()
	c[openapi.Schemas].(map[string]any)[openapi.SchemaProblem] = "changed"
	openapi.Component(openapi.Schemas, openapi.SchemaEvent)["type"] = "changed"
	openapi.RangeOperation()["responses"] = nil
	b := openapi.JSON()
	b[0] = 'x'
	require.IsType(t, map[string]any{}, openapi.Components()[openapi.Schemas].(map[string]any)[openapi.SchemaProblem])
	require.Equal(t, "object", openapi.Component(openapi.Schemas, openapi.SchemaEvent)["type"])
	require.NotNil(t, openapi.RangeOperation()["responses"])
	require.Equal(t, byte('{'), openapi.JSON()[0])
}

func newDoc() map[string]any {
	return map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "Payments", "version": "v1"},
		"paths": map[string]any{"/v1/payments": map[string]any{"post": map[string]any{
			"parameters": []any{openapi.Ref(openapi.Parameters, openapi.ParamIdempotencyKey)},
			"responses": map[string]any{
				"201": map[string]any{"description": "created"},
				"400": openapi.Ref(openapi.Responses, openapi.ResponseBadRequest),
			},
		}}},
		"components": map[string]any{"schemas": map[string]any{"Payment": map[string]any{"type": "object"}}},
	}
}

func TestMerge(t *testing.T) {
	t.Run("adds every component and keeps the document's own", func(t *testing.T) {
		doc := newDoc()
		require.NoError(t, openapi.Merge(doc))
		comps := doc["components"].(map[string]any)
		require.Contains(t, comps[openapi.Schemas], "Payment")
		for section, names := range openapi.Components() {
			for name := range names.(map[string]any) {
				require.Contains(t, comps[section], name)
			}
		}
		var all []string
		refs(doc, &all)
		for _, r := range all {
			_, ok := resolve(doc, r)
			require.True(t, ok, "unresolved $ref %s after Merge", r)
		}
	})
	t.Run("twice, or with identical definitions, is fine", func(t *testing.T) {
		doc := newDoc()
		doc["components"].(map[string]any)[openapi.Schemas].(map[string]any)[openapi.SchemaProblem] =
			openapi.Component(openapi.Schemas, openapi.SchemaProblem)
		require.NoError(t, openapi.Merge(doc))
		require.NoError(t, openapi.Merge(doc))
	})
	t.Run("a convention defined differently is refused, and the document left alone", func(t *testing.T) {
		doc := newDoc()
		doc["components"].(map[string]any)["responses"] = map[string]any{"BadRequest": map[string]any{"description": "mine"}}
		before, _ := json.Marshal(doc)
		err := openapi.Merge(doc)
		require.ErrorIs(t, err, openapi.ErrConflict)
		require.ErrorContains(t, err, "components.responses.BadRequest")
		after, _ := json.Marshal(doc)
		require.JSONEq(t, string(before), string(after))
	})
	for name, mutate := range map[string]func(map[string]any){
		"not 3.1":               func(d map[string]any) { d["openapi"] = "3.0.3" },
		"no version":            func(d map[string]any) { delete(d, "openapi") },
		"components not object": func(d map[string]any) { d["components"] = []any{} },
		"section not object":    func(d map[string]any) { d["components"] = map[string]any{"schemas": "x"} },
	} {
		t.Run(name, func(t *testing.T) {
			doc := newDoc()
			mutate(doc)
			require.Error(t, openapi.Merge(doc))
		})
	}
	require.Error(t, openapi.Merge(nil))
}

func TestMergeJSON(t *testing.T) {
	in, err := json.Marshal(newDoc())
	require.NoError(t, err)
	out, err := openapi.MergeJSON(in)
	require.NoError(t, err)
	doc := decode(t, out)
	require.Contains(t, doc["components"].(map[string]any)[openapi.Schemas], openapi.SchemaProblem)

	_, err = openapi.MergeJSON([]byte(`{"openapi":`))
	require.ErrorContains(t, err, "openapi: MergeJSON")
	_, err = openapi.MergeJSON([]byte(`{"openapi":"3.0.0"}`))
	require.ErrorContains(t, err, "3.1")
}

func TestWebhook(t *testing.T) {
	item := openapi.Webhook("payment.created", openapi.Ref(openapi.Schemas, "Payment"))
	post := item["post"].(map[string]any)
	require.Equal(t, "payment.created", post["summary"])
	require.Equal(t, "webhook_payment_created", post["operationId"])
	var names []string
	for _, p := range post["parameters"].([]any) {
		p := p.(map[string]any)
		require.Equal(t, "header", p["in"])
		require.Equal(t, p["name"] != openapi.HeaderRedelivery, p["required"], "only X-SVC-Redelivery is optional")
		names = append(names, p["name"].(string))
	}
	require.ElementsMatch(t, []string{"X-SVC-Signature", "X-SVC-Sequence", "X-SVC-Redelivery"}, names)
	schema := post["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	allOf := schema["allOf"].([]any)
	require.Equal(t, map[string]any{"$ref": "#/components/schemas/Event"}, allOf[0])
	props := allOf[1].(map[string]any)["properties"].(map[string]any)
	require.Equal(t, map[string]any{"const": "payment.created"}, props["type"])
	require.Equal(t, map[string]any{"$ref": "#/components/schemas/Payment"}, props["data"])

	generic := openapi.Webhook("x.y", nil)["post"].(map[string]any)
	gs := generic["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	require.NotContains(t, gs["allOf"].([]any)[1].(map[string]any)["properties"], "data")
}

func TestRangeOperation(t *testing.T) {
	op := openapi.RangeOperation()
	require.Equal(t, "listWebhookEvents", op["operationId"])
	rs := op["responses"].(map[string]any)
	for _, status := range []string{"200", "400", "401", "404", "410", "429", "5XX"} {
		require.Contains(t, rs, status)
	}
	require.Equal(t, []any{map[string]any{openapi.SecurityBearer: []any{}}}, op["security"])

	// The RangeHandler's bound on a licensee's requests in flight: 429 with its code and Retry-After.
	require.Equal(t, openapi.Ref(openapi.Responses, openapi.ResponseRangeRequestsInFlight), rs["429"])
	busy := openapi.Component(openapi.Responses, openapi.ResponseRangeRequestsInFlight)
	require.Equal(t, openapi.Ref(openapi.Headers, openapi.HeaderRetryAfterRequired), busy["headers"].(map[string]any)[openapi.HeaderRetryAfter])
	schema := busy["content"].(map[string]any)["application/problem+json"].(map[string]any)["schema"].(map[string]any)
	code := schema["allOf"].([]any)[1].(map[string]any)["properties"].(map[string]any)["code"]
	require.Equal(t, map[string]any{"const": producer.CodeRangeBusy}, code)
	require.Contains(t, busy["description"], producer.CodeRangeBusy)
}

func TestDeprecate(t *testing.T) {
	doc := newDoc()
	require.NoError(t, openapi.Merge(doc))
	openapi.Deprecate(doc, openapi.Deprecation{Successor: "v2"})
	post := doc["paths"].(map[string]any)["/v1/payments"].(map[string]any)["post"].(map[string]any)
	require.Equal(t, true, post["deprecated"])
	require.Contains(t, post["description"], "move to v2")
	created := post["responses"].(map[string]any)["201"].(map[string]any)
	for _, h := range []string{openapi.HeaderDeprecation, openapi.HeaderSunset, openapi.HeaderLink} {
		require.Equal(t, openapi.Ref(openapi.Headers, h), created["headers"].(map[string]any)[h])
		// A shared response is the version's own in a per-version document: it gets them too.
		bad := doc["components"].(map[string]any)[openapi.Responses].(map[string]any)[openapi.ResponseBadRequest].(map[string]any)
		require.Contains(t, bad["headers"], h)
	}
	// A reference in the paths is left as it is: a $ref has no siblings to add to.
	require.Equal(t, openapi.Ref(openapi.Responses, openapi.ResponseBadRequest), post["responses"].(map[string]any)["400"])

	desc := post["description"]
	openapi.Deprecate(doc, openapi.Deprecation{Successor: "v2"})
	require.Equal(t, desc, post["description"], "twice changes nothing")

	bare := map[string]any{"openapi": "3.1.0"}
	openapi.Deprecate(bare, openapi.Deprecation{})
	require.Contains(t, bare["components"].(map[string]any)[openapi.Headers], openapi.HeaderSunset)
}

// BenchmarkMerge is the cost of building a document with the conventions: once per version at a
// server's start, never per request (the reference server serves the bytes it built).
func BenchmarkMerge(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := openapi.Merge(newDoc()); err != nil {
			b.Fatal(err)
		}
	}
}
