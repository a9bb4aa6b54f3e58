package openapi

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

//go:embed conventions.json
var conventionsJSON []byte

// Names of the components, for Ref and Component. The document's own descriptions say what each one
// means on the wire.
const (
	// Schemas.
	SchemaProblem   = "Problem"   // RFC 9457 problem with code, request_id and located errors
	SchemaViolation = "Violation" // one located failure: location, pointer or name, code, detail
	SchemaRequestID = "RequestID" // req_ and 26 base32 characters
	SchemaEvent     = "Event"     // the webhook event envelope
	SchemaEventType = "EventType" // order.created
	SchemaSequence  = "Sequence"  // an event's place in its endpoint's stream, from 1
	SchemaEventList = "EventList" // a page of range retrieval

	// Parameters.
	ParamIdempotencyKey    = "IdempotencyKey"    // header Idempotency-Key, required
	ParamRangeFrom         = "RangeFrom"         // query from, required
	ParamRangeTo           = "RangeTo"           // query to
	ParamRangeLimit        = "RangeLimit"        // query limit, 1–1000, default 100
	ParamWebhookEndpointID = "WebhookEndpointID" // path id

	// Response headers.
	HeaderRequestID          = "X-Request-Id"
	HeaderVersion            = "X-SVC-Version"
	HeaderIdempotentReplayed = "Idempotent-Replayed"
	HeaderRetryAfter         = "Retry-After"          // optional
	HeaderRetryAfterRequired = "Retry-After-Required" // the same header, required (409, 429)
	HeaderWWWAuthenticate    = "WWW-Authenticate"
	HeaderDeprecation        = "Deprecation"
	HeaderSunset             = "Sunset"
	HeaderLink               = "Link"
	HeaderSignature          = "X-SVC-Signature"
	HeaderSequence           = "X-SVC-Sequence"
	HeaderRedelivery         = "X-SVC-Redelivery"       // on a delivery pushed again (resend, recover)
	HeaderCacheControl       = "Cache-Control"          // optional: no-store on replays
	HeaderCacheNoStore       = "Cache-Control-No-Store" // the same header, required to be no-store
	HeaderContentTypeOptions = "X-Content-Type-Options" // nosniff, on every problem
	HeaderAcceptPost         = "Accept-Post"            // application/json, with a 415

	// Responses.
	ResponseBadRequest            = "BadRequest"            // 400
	ResponseUnauthorized          = "Unauthorized"          // 401, with WWW-Authenticate
	ResponseVersionNotEnabled     = "VersionNotEnabled"     // 403 version_not_enabled
	ResponsePermissionDenied      = "PermissionDenied"      // 403 permission_denied, a restricted key's refusal
	ResponseForbidden             = "Forbidden"             // 403 permission_denied or version_not_enabled, in one response
	ResponseNotFound              = "NotFound"              // 404
	ResponseIdempotencyKeyInUse   = "IdempotencyKeyInUse"   // 409, with Retry-After
	ResponseEventsPruned          = "EventsPruned"          // 410 events_pruned
	ResponseContentTooLarge       = "ContentTooLarge"       // 413
	ResponseUnsupportedMediaType  = "UnsupportedMediaType"  // 415
	ResponseIdempotencyKeyReused  = "IdempotencyKeyReused"  // 422
	ResponseTooManyRequests       = "TooManyRequests"       // 429, with Retry-After
	ResponseRangeRequestsInFlight = "RangeRequestsInFlight" // 429 range_requests_in_flight, with Retry-After
	ResponseServerError           = "ServerError"           // 5XX
	ResponseEventList             = "EventList"             // 200 of range retrieval, signed

	// Security schemes.
	SecurityBearer = "BearerAuth"

	// ExtensionProblemCodes lists problem codes, each a problem's code or a violation's (errors[].code):
	// on a problem response, an array of the codes it may carry; on an operation, an object from each
	// of its response keys ("404", "5XX") to every code the operation may answer with there
	// (ListProblemCodes).
	ExtensionProblemCodes = "x-problem-codes"

	// RangePath is the path of range retrieval on v1, as the platform fixes it, and the key of
	// RangeOperation in the conventions' document.
	RangePath = "/v1/webhook_endpoints/{id}/events"
)

// Component sections, the keys of an OpenAPI 3.1 Components Object that this package fills.
const (
	Schemas         = "schemas"
	Parameters      = "parameters"
	Headers         = "headers"
	Responses       = "responses"
	SecuritySchemes = "securitySchemes"
)

// ErrConflict is what Merge returns when the document already defines one of the conventions'
// component names differently.
var ErrConflict = errors.New("openapi: the document defines a convention's component differently")

// JSON returns the conventions as a standalone OpenAPI 3.1 document: range retrieval under its
// path (RangePath), the generic webhook delivery under webhooks ("event"), and every component. Tools that do not run Go reference it
// directly ($ref: conventions.json#/components/responses/BadRequest). The slice is a fresh copy.
func JSON() []byte { return slices.Clone(conventionsJSON) }

// document decodes the embedded document. It is decoded on every call, so that every caller owns
// what it gets and nothing shared can be changed by one of them.
func document() map[string]any {
	var doc map[string]any
	if err := json.Unmarshal(conventionsJSON, &doc); err != nil {
		panic("openapi: the embedded conventions.json does not decode: " + err.Error()) // caught by the tests
	}
	return doc
}

// Components returns the conventions' Components Object (schemas, parameters, headers, responses,
// securitySchemes) as decoded JSON: maps, slices, strings, float64 and bools. Every call
// returns a fresh copy that the caller may change.
func Components() map[string]any {
	return document()["components"].(map[string]any)
}

// Component returns one component, a fresh copy, or nil when the section has no such name:
// Component(Schemas, SchemaProblem) is the problem schema.
func Component(section, name string) map[string]any {
	sec, _ := Components()[section].(map[string]any)
	c, _ := sec[name].(map[string]any)
	return c
}

// Ref returns a Reference Object to one of the document's components:
// Ref(Responses, ResponseBadRequest) is {"$ref": "#/components/responses/BadRequest"}.
func Ref(section, name string) map[string]any {
	return map[string]any{"$ref": "#/components/" + section + "/" + escapePointer(name)}
}

// escapePointer escapes a JSON Pointer token (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Merge adds the conventions' components to doc, a decoded OpenAPI 3.1 document, so that its
// operations can reference them (Ref). A name doc already defines is kept when it is identical and
// is an error (ErrConflict, naming it) when it differs: a document cannot redefine what a Problem is
// while claiming the platform's conventions. doc must declare OpenAPI 3.1 ("openapi": "3.1.x"): the
// components use its webhooks, path items and JSON Schema 2020-12 keywords. On error doc is unchanged.
func Merge(doc map[string]any) error {
	if doc == nil {
		return errors.New("openapi: Merge: the document is nil")
	}
	v, _ := doc["openapi"].(string)
	if !strings.HasPrefix(v, "3.1.") {
		return fmt.Errorf("openapi: Merge: the document declares openapi %q; the conventions need 3.1.x", v)
	}
	comps, ok := doc["components"].(map[string]any)
	if !ok && doc["components"] != nil {
		return errors.New("openapi: Merge: the document's components is not an object")
	}
	add := Components()
	merged := make(map[string]any, len(comps)+len(add))
	maps.Copy(merged, comps)
	for _, section := range slices.Sorted(maps.Keys(add)) {
		ours := add[section].(map[string]any)
		theirs, ok := merged[section].(map[string]any)
		if !ok && merged[section] != nil {
			return fmt.Errorf("openapi: Merge: the document's components.%s is not an object", section)
		}
		out := make(map[string]any, len(theirs)+len(ours))
		maps.Copy(out, theirs)
		for _, name := range slices.Sorted(maps.Keys(ours)) {
			if have, ok := out[name]; ok && !reflect.DeepEqual(have, ours[name]) {
				return fmt.Errorf("%w: components.%s.%s", ErrConflict, section, name)
			}
			out[name] = ours[name]
		}
		merged[section] = out
	}
	doc["components"] = merged
	return nil
}

// MergeJSON is Merge for a document kept as JSON: it returns the document with the conventions'
// components added.
func MergeJSON(doc []byte) ([]byte, error) {
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("openapi: MergeJSON: %w", err)
	}
	if err := Merge(d); err != nil {
		return nil, err
	}
	return json.Marshal(d)
}

// ListProblemCodes completes the problem codes of every operation in doc's paths, so that a client
// reads in one place each code an operation may answer with: an operation's x-problem-codes
// (ExtensionProblemCodes) becomes an object from each of its problem responses' keys ("400", "5XX")
// to the sorted union of that response's codes — its own x-problem-codes, or its component's for a
// $ref — and of the codes the operation already lists there itself: those only its route answers
// (order_not_found), which a shared response cannot name. Call it after Merge, which brings the
// components the $refs name, and after the responses are final. A problem response is one with
// application/problem+json content; the codes of a shared one are those every operation that uses
// it may answer (NotFound lists none), and each operation adds its own.
//
// It refuses the document, which it leaves unchanged, and names every mistake: a problem response
// without x-problem-codes, or with a code that is not snake_case; a $ref to no response component;
// an operation that lists codes under a key that is not one of its problem responses; and a problem
// response with no code at all once the operation's are added, since a client could not tell what it
// means. Calling it again changes nothing.
func ListProblemCodes(doc map[string]any) error {
	if doc == nil {
		return errors.New("openapi: ListProblemCodes: the document is nil")
	}
	components, _ := doc["components"].(map[string]any)
	shared, _ := components[Responses].(map[string]any)
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("openapi: ListProblemCodes: "+format, args...))
	}
	// listed returns the codes a response lists and whether it is a problem response.
	listed := func(where string, resp map[string]any) ([]string, bool) {
		content, _ := resp["content"].(map[string]any)
		if _, ok := content["application/problem+json"]; !ok {
			return nil, false
		}
		raw, ok := resp[ExtensionProblemCodes].([]any)
		if !ok {
			bad("%s is a problem response without %s, an array of the codes it may carry", where, ExtensionProblemCodes)
			return nil, true
		}
		codes := make([]string, 0, len(raw))
		for _, c := range raw {
			code, _ := c.(string)
			if !snakeCase(code) {
				bad("%s lists %v in %s, which is no snake_case code", where, c, ExtensionProblemCodes)
				continue
			}
			codes = append(codes, code)
		}
		return codes, true
	}
	// The shared responses are checked once, whichever operations refer to them.
	type sharedCodes struct {
		codes   []string
		problem bool
	}
	byName := make(map[string]sharedCodes, len(shared))
	for _, name := range slices.Sorted(maps.Keys(shared)) {
		if r, ok := shared[name].(map[string]any); ok {
			codes, problem := listed("components.responses."+name, r)
			byName[name] = sharedCodes{codes, problem}
		}
	}
	codesOf := func(where string, resp map[string]any) ([]string, bool) {
		ref, isRef := resp["$ref"].(string)
		if !isRef {
			return listed(where, resp)
		}
		name, found := strings.CutPrefix(ref, "#/components/"+Responses+"/")
		c, known := byName[unescapePointer(name)]
		if !found || !known {
			bad("%s refers to %s, which is no response component of the document", where, ref)
		}
		return c.codes, c.problem
	}

	paths, _ := doc["paths"].(map[string]any)
	type result struct{ op, codes map[string]any }
	var done []result // each operation's complete codes, set once the whole document is checked
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		item, _ := paths[p].(map[string]any)
		for _, m := range operationMethods {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			where := strings.ToUpper(m) + " " + p
			responses, _ := op["responses"].(map[string]any)
			all := map[string][]string{}
			for _, key := range slices.Sorted(maps.Keys(responses)) {
				resp, _ := responses[key].(map[string]any)
				if codes, problem := codesOf(where+" "+key, resp); problem {
					all[key] = codes
				}
			}
			own, isMap := op[ExtensionProblemCodes].(map[string]any)
			if op[ExtensionProblemCodes] != nil && !isMap {
				bad("%s: %s is not an object from response keys to codes", where, ExtensionProblemCodes)
			}
			for _, key := range slices.Sorted(maps.Keys(own)) {
				if _, ok := all[key]; !ok {
					bad("%s lists codes under %s, which is not one of its problem responses", where, key)
					continue
				}
				list, _ := own[key].([]any)
				if list == nil && own[key] != nil {
					bad("%s: %s.%s is not an array of codes", where, ExtensionProblemCodes, key)
				}
				for _, c := range list {
					code, _ := c.(string)
					if !snakeCase(code) {
						bad("%s lists %v under %s, which is no snake_case code", where, c, key)
						continue
					}
					all[key] = append(all[key], code)
				}
			}
			out := make(map[string]any, len(all))
			for _, key := range slices.Sorted(maps.Keys(all)) {
				codes := slices.Compact(slices.Sorted(slices.Values(all[key])))
				if len(codes) == 0 {
					bad("%s answers %s with a problem whose codes nothing lists: add them to the response or to the operation's %s", where, key, ExtensionProblemCodes)
				}
				list := make([]any, len(codes))
				for i, c := range codes {
					list[i] = c
				}
				out[key] = list
			}
			done = append(done, result{op, out})
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, r := range done {
		if len(r.codes) == 0 {
			delete(r.op, ExtensionProblemCodes)
			continue
		}
		r.op[ExtensionProblemCodes] = r.codes
	}
	return nil
}

// operationMethods are the members of a Path Item Object that hold an operation.
var operationMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// unescapePointer undoes escapePointer (RFC 6901).
func unescapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// snakeCase reports whether s is a problem code: lowercase words of letters and digits joined by
// single underscores, starting with a letter (apierror's rule for codes).
func snakeCase(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '_' && s[i-1] != '_':
		default:
			return false
		}
	}
	return true
}

// Webhook returns the path item of one event type's delivery, for the document's webhooks: the
// generic delivery (the signature and sequence headers, the envelope) with type fixed to eventType
// and data described by the schema data (a Schema Object or a Ref; nil leaves it any object).
//
//	doc["webhooks"] = map[string]any{"order.created": openapi.Webhook("order.created", openapi.Ref(openapi.Schemas, "Order"))}
func Webhook(eventType string, data map[string]any) map[string]any {
	item := document()["webhooks"].(map[string]any)["event"].(map[string]any)
	post := item["post"].(map[string]any)
	post["summary"] = eventType
	post["operationId"] = "webhook_" + strings.NewReplacer(".", "_", "-", "_").Replace(eventType)
	props := map[string]any{"type": map[string]any{"const": eventType}}
	if data != nil {
		props["data"] = data
	}
	schema := post["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	allOf := schema["allOf"].([]any)
	allOf[len(allOf)-1].(map[string]any)["properties"] = props
	return item
}

// RangeOperation returns range retrieval's Operation Object (GET, a fresh copy) for a document's
// paths: the endpoint ID, from, to and limit parameters, Bearer security, and the answers — the
// signed EventList, 400, 401, 404, 410 events_pruned, 429 range_requests_in_flight
// (ResponseRangeRequestsInFlight: producer.RangeHandler's bound on a licensee's requests in progress)
// and 5XX. A service adds its own further answers (a version pin's 403) before putting it under its
// path (RangePath on v1); one whose rate limit also answers 429 describes both codes in that one
// response, since a status has one.
//
// The conventions are not kept as components.pathItems, which OpenAPI 3.1 allows: kin-openapi, the
// validator the examples check every document with, refuses that member (v0.153).
func RangeOperation() map[string]any {
	return document()["paths"].(map[string]any)[RangePath].(map[string]any)["get"].(map[string]any)
}

// Deprecation describes a deprecated API version for Deprecate. It is a plain value; the zero value
// names no successor.
type Deprecation struct {
	// Successor is the version to move to ("v2"), named in the operations' descriptions; empty names
	// none.
	Successor string
}

// Deprecate marks a per-version document as a deprecated version's: every operation in its paths is
// deprecated, and every response — inline in the paths or among the components, which in a
// per-version document belong to that version alone — documents the Deprecation, Sunset and Link
// headers a versioning.Router sends. Call it after Merge.
func Deprecate(doc map[string]any, d Deprecation) {
	comps, _ := doc["components"].(map[string]any)
	if comps == nil {
		comps = map[string]any{}
		doc["components"] = comps
	}
	hdrs, _ := comps[Headers].(map[string]any)
	if hdrs == nil {
		hdrs = map[string]any{}
		comps[Headers] = hdrs
	}
	all := Components()[Headers].(map[string]any)
	for _, h := range []string{HeaderDeprecation, HeaderSunset, HeaderLink} {
		hdrs[h] = all[h]
	}
	addHeaders := func(resp map[string]any) {
		if _, isRef := resp["$ref"]; isRef {
			return
		}
		rh, _ := resp["headers"].(map[string]any)
		if rh == nil {
			rh = map[string]any{}
			resp["headers"] = rh
		}
		for _, h := range []string{HeaderDeprecation, HeaderSunset, HeaderLink} {
			rh[h] = Ref(Headers, h)
		}
	}
	if rs, ok := comps[Responses].(map[string]any); ok {
		for _, r := range rs {
			if r, ok := r.(map[string]any); ok {
				addHeaders(r)
			}
		}
	}
	paths, _ := doc["paths"].(map[string]any)
	for _, item := range paths {
		item, _ := item.(map[string]any)
		for _, m := range operationMethods {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			if op["deprecated"] == true {
				continue // marked already: Deprecate twice changes nothing
			}
			op["deprecated"] = true
			if d.Successor != "" {
				desc, _ := op["description"].(string)
				op["description"] = strings.TrimSpace(desc + "\n\nThis version is deprecated: move to " + d.Successor +
					" before the date in the Sunset header.")
			}
			if rs, ok := op["responses"].(map[string]any); ok {
				for _, r := range rs {
					if r, ok := r.(map[string]any); ok {
						addHeaders(r)
					}
				}
			}
		}
	}
}
