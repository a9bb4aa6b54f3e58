package openapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
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

// TestComponentsListTheirProblemCodes: every problem response of the conventions lists the codes it
// may carry — among them every code its schema allows — each one the library documents (its
// problem type URI resolves); and the other responses list none.
func TestComponentsListTheirProblemCodes(t *testing.T) {
	docs, err := apierror.NewProblemDocs(apierror.LibraryProblemDocs()...)
	require.NoError(t, err)
	for name, r := range openapi.Components()[openapi.Responses].(map[string]any) {
		r := r.(map[string]any)
		content := r["content"].(map[string]any)
		problem, isProblem := content["application/problem+json"].(map[string]any)
		if !isProblem {
			require.NotContains(t, r, openapi.ExtensionProblemCodes, name)
			continue
		}
		raw, ok := r[openapi.ExtensionProblemCodes].([]any)
		require.True(t, ok, "%s lists no %s", name, openapi.ExtensionProblemCodes)
		var codes []string
		for _, c := range raw {
			codes = append(codes, c.(string))
			_, documented := docs.Lookup(c.(string))
			require.True(t, documented, "%s lists %s, which apierror.LibraryProblemDocs does not document", name, c)
		}
		require.IsIncreasing(t, codes, "%s: sorted, each once", name)
		// The codes the schema allows, where it narrows them.
		var allowed []any
		if all, ok := problem["schema"].(map[string]any)["allOf"].([]any); ok {
			code, _ := all[1].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)
			if c, ok := code["const"]; ok {
				allowed = append(allowed, c)
			}
			if e, ok := code["enum"].([]any); ok {
				allowed = append(allowed, e...)
			}
		}
		for _, c := range allowed {
			require.Contains(t, raw, c, "%s allows code %s, which its %s lacks", name, c, openapi.ExtensionProblemCodes)
		}
	}
	require.Equal(t, []any{}, openapi.Component(openapi.Responses, openapi.ResponseNotFound)[openapi.ExtensionProblemCodes],
		"a 404's code names what was not found: no operation shares it")
}

// TestRangeOperationListsItsProblemCodes: range retrieval lists every code it may answer with, its
// own (the RangeHandler's 400s and 404) with those of its shared responses, as ListProblemCodes
// completes them; each is documented.
func TestRangeOperationListsItsProblemCodes(t *testing.T) {
	op := openapi.RangeOperation()
	listed := op[openapi.ExtensionProblemCodes]
	doc := newDoc()
	doc["paths"] = map[string]any{openapi.RangePath: map[string]any{"get": op}}
	require.NoError(t, openapi.Merge(doc))
	require.NoError(t, openapi.ListProblemCodes(doc))
	require.Equal(t, listed, op[openapi.ExtensionProblemCodes], "the conventions' document lists them complete")
	require.Equal(t, []any{producer.CodeEndpointNotFound}, op[openapi.ExtensionProblemCodes].(map[string]any)["404"])
	require.Contains(t, op[openapi.ExtensionProblemCodes].(map[string]any)["400"], producer.CodeRangeInverted)
	docs, err := apierror.NewProblemDocs(apierror.LibraryProblemDocs()...)
	require.NoError(t, err)
	for status, codes := range op[openapi.ExtensionProblemCodes].(map[string]any) {
		for _, c := range codes.([]any) {
			_, ok := docs.Lookup(c.(string))
			require.True(t, ok, "%s: %s is not documented", status, c)
		}
	}
}

func TestListProblemCodes(t *testing.T) {
	problem := func(codes ...any) map[string]any {
		r := map[string]any{"description": "A problem.", "content": map[string]any{"application/problem+json": map[string]any{
			"schema": openapi.Ref(openapi.Schemas, openapi.SchemaProblem)}}}
		if codes != nil {
			r[openapi.ExtensionProblemCodes] = codes
		}
		return r
	}
	// doc has one operation, GET /v1/payments/{id}, with the responses and own codes given.
	doc := func(responses map[string]any, own any) map[string]any {
		op := map[string]any{"responses": responses}
		if own != nil {
			op[openapi.ExtensionProblemCodes] = own
		}
		d := newDoc()
		d["paths"] = map[string]any{"/v1/payments/{id}": map[string]any{"get": op}}
		require.NoError(t, openapi.Merge(d))
		return d
	}
	codesOf := func(d map[string]any) any {
		return d["paths"].(map[string]any)["/v1/payments/{id}"].(map[string]any)["get"].(map[string]any)[openapi.ExtensionProblemCodes]
	}
	ok := map[string]any{"description": "The payment."}

	t.Run("the union of the responses' codes and the operation's own, sorted", func(t *testing.T) {
		d := doc(map[string]any{
			"200": ok,
			"400": openapi.Ref(openapi.Responses, openapi.ResponseBadRequest),
			"404": openapi.Ref(openapi.Responses, openapi.ResponseNotFound),
			"422": problem("payment_declined", "idempotency_key_reused"),
			"5XX": openapi.Ref(openapi.Responses, openapi.ResponseServerError),
		}, map[string]any{"400": []any{"amount_invalid", "query_malformed"}, "404": []any{"payment_not_found"}})
		require.NoError(t, openapi.ListProblemCodes(d))
		want := map[string]any{
			"400": []any{"amount_invalid", "query_malformed"},
			"404": []any{"payment_not_found"},
			"422": []any{"idempotency_key_reused", "payment_declined"},
			"5XX": []any{apierror.CodeInternal},
		}
		require.Equal(t, want, codesOf(d))
		require.NoError(t, openapi.ListProblemCodes(d))
		require.Equal(t, want, codesOf(d), "again, nothing changes")
	})
	t.Run("an operation without problems lists nothing", func(t *testing.T) {
		d := doc(map[string]any{"200": ok}, nil)
		require.NoError(t, openapi.ListProblemCodes(d))
		require.Nil(t, codesOf(d))
	})
	for _, tc := range []struct {
		name      string
		responses map[string]any
		own       any
		wantErr   string
	}{
		{"a problem response that lists no codes", map[string]any{"409": problem()}, nil,
			"GET /v1/payments/{id} 409 is a problem response without x-problem-codes"},
		{"a code that is not snake_case", map[string]any{"409": problem("Conflict")}, nil, `lists Conflict in x-problem-codes`},
		{"own codes under a status with no problem response", map[string]any{"200": ok, "409": problem("busy")},
			map[string]any{"200": []any{"busy"}}, "lists codes under 200, which is not one of its problem responses"},
		{"own codes that are not an object", map[string]any{"409": problem("busy")}, []any{"busy"}, "is not an object"},
		{"own codes under a status that are no array", map[string]any{"409": problem("busy")}, map[string]any{"409": "busy"},
			"x-problem-codes.409 is not an array"},
		{"a problem status without a code", map[string]any{"404": openapi.Ref(openapi.Responses, openapi.ResponseNotFound)}, nil,
			"answers 404 with a problem whose codes nothing lists"},
		{"a $ref to no component", map[string]any{"404": openapi.Ref(openapi.Responses, "Nope")}, nil,
			"refers to #/components/responses/Nope, which is no response component"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := doc(tc.responses, tc.own)
			before, err := json.Marshal(d)
			require.NoError(t, err)
			require.ErrorContains(t, openapi.ListProblemCodes(d), tc.wantErr)
			after, err := json.Marshal(d)
			require.NoError(t, err)
			require.JSONEq(t, string(before), string(after), "a refused document is left as it was")
		})
	}
	t.Run("a shared response without codes is named, once", func(t *testing.T) {
		d := doc(map[string]any{"200": ok, "400": openapi.Ref(openapi.Responses, openapi.ResponseBadRequest)},
			map[string]any{"400": []any{"amount_invalid"}})
		delete(d["components"].(map[string]any)[openapi.Responses].(map[string]any)[openapi.ResponseBadRequest].(map[string]any),
			openapi.ExtensionProblemCodes)
		err := openapi.ListProblemCodes(d)
		require.ErrorContains(t, err, "components.responses.BadRequest is a problem response without x-problem-codes")
		require.Equal(t, 1, strings.Count(err.Error(), "BadRequest"), err.Error())
	})
	require.Error(t, openapi.ListProblemCodes(nil))
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
