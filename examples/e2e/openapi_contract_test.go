package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/versioning"
)

// The server's own OpenAPI document is a contract the tests hold it to: every request the tests send
// and every answer they get (request.send) is validated against the document of the version in its
// path, and so is every webhook delivery countingConsumer receives; a problem answer's codes must be
// among those its operation lists for the status (x-problem-codes). At the end of the package run,
// TestMain checks that the tests exercised every response the documents promise.

// contract is the checker request.send and countingConsumer use. It is package-level because the
// coverage rule spans every test of the run; the harness's own tests use checkers of their own.
var contract = newContractChecker()

// contractChecker validates exchanges against the documents the servers serve, and records which
// document entries they exercised. It is safe for concurrent use; the zero value is not usable.
type contractChecker struct {
	mu        sync.Mutex
	docs      map[string]*versionDoc // by base URL and version
	entries   map[string]bool        // every entry of every document loaded, by hit.entry
	hits      map[hit]bool
	validated int // exchanges validated, deliveries included
}

func newContractChecker() *contractChecker {
	return &contractChecker{docs: map[string]*versionDoc{}, entries: map[string]bool{}, hits: map[hit]bool{}}
}

// versionDoc is one server's document for one API version, loaded once.
type versionDoc struct {
	once    sync.Once
	version string
	doc     *openapi3.T    // nil when the server serves no document for the version (an unknown one)
	router  routers.Router // nil with doc
	// webhookSpec is what a delivery's operation is validated in: the document's components without
	// its API-wide security, since a delivery proves itself by its signature (a header parameter the
	// webhook entry describes), not by the API's Bearer scheme.
	webhookSpec *openapi3.T
	err         error
}

// hit is one validated response or delivery: what it matched in which version's document.
type hit struct {
	version   string
	method    string // "" for a delivery
	path      string // the template, as in the document: "/v1/orders/{id}"
	key       string // the response key it matched: "404", or "4XX" when only the range is declared
	component string // the responses component the key refers to, or ""
	webhook   string // a delivery's event type, or ""
}

// entry is the document entry a hit exercises. A shared response counts once whichever operation and
// version used it; an inline one is the operation's own, the same in v1 and v2.
func (h hit) entry() string {
	switch {
	case h.webhook != "":
		return "webhook " + h.webhook
	case h.component != "":
		return "response component " + h.component
	default:
		return h.method + " " + strings.TrimPrefix(h.path, "/"+h.version) + " " + h.key
	}
}

// bearerPresent stands in for the server's authentication: the document can only say that a
// credential is required, not which one is valid, so any Bearer credential satisfies it.
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	tok, ok := strings.CutPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(tok) == "" {
		return in.NewError(errors.New("no Bearer credential"))
	}
	return nil
}

// check validates one exchange: req as sent, body its body, and r the answer read.
func (c *contractChecker) check(req *http.Request, body []byte, r response) error {
	version := versionOf(req.URL.Path)
	var p struct{ Code string }
	_ = json.Unmarshal(r.Body, &p)
	if (p.Code == versioning.CodeVersionUnknown && r.Status == http.StatusNotFound) ||
		(p.Code == versioning.CodeVersionSunset && r.Status == http.StatusGone) {
		// The server says itself that no document describes this version. Asking for one anyway would
		// be a request the tests did not send, which the server counts (TestTelemetryFlags counts them).
		// (The pin endpoint's 400s carry the same codes for the version a body names: those are
		// answers of a version that has a document.)
		return c.validate(&versionDoc{version: version}, req, body, r)
	}
	d, err := c.document(req.URL.Scheme+"://"+req.URL.Host, version)
	if err != nil {
		return err
	}
	return c.validate(d, req, body, r)
}

// versionOf is the version segment of a path ("/v1/orders" → "v1"), or "" for none.
func versionOf(path string) string {
	v, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return v
}

// document returns the server's document for version, fetching it on first use.
func (c *contractChecker) document(base, version string) (*versionDoc, error) {
	c.mu.Lock()
	d := c.docs[base+" "+version]
	if d == nil {
		d = &versionDoc{version: version}
		c.docs[base+" "+version] = d
	}
	c.mu.Unlock()
	first := false
	d.once.Do(func() {
		first = true
		d.err = c.load(d, base)
	})
	if d.err != nil && !first {
		// The first caller got the whole error; every later exchange of the version fails shortly.
		return nil, fmt.Errorf("contract: %s/%s/openapi.json did not load (see the first failure)", base, version)
	}
	return d, d.err
}

// load fetches and validates a version's document and builds its router. A version the server
// answers 401, 404 or 410 for has no document: every route under it is outside the contract.
func (c *contractChecker) load(d *versionDoc, base string) error {
	if d.version == "" {
		return nil
	}
	req, err := http.NewRequest("GET", base+"/"+d.version+"/openapi.json", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("contract: fetching the document: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("contract: fetching the document: %w", err)
	}
	switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); {
	case resp.StatusCode == http.StatusOK && mt == "application/json":
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound ||
		resp.StatusCode == http.StatusGone:
		if err := apierror.Check(resp.StatusCode, resp.Header, b); err != nil {
			return fmt.Errorf("contract: GET %s answered %d: %w", req.URL, resp.StatusCode, err)
		}
		return nil
	default:
		return fmt.Errorf("contract: GET %s answered %d %s, want 200 application/json", req.URL, resp.StatusCode, mt)
	}

	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = false // the document must stand alone
	doc, err := loader.LoadFromData(b)
	if err != nil {
		return fmt.Errorf("contract: loading the %s document: %w", d.version, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return fmt.Errorf("contract: THE %s DOCUMENT OF %s IS INVALID: %w", d.version, base, err)
	}
	// Routes are matched on the path alone: servers names the address the server was started with,
	// and what is checked here is the operations under it.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return fmt.Errorf("contract: routing the %s document: %w", d.version, err)
	}
	d.doc, d.router = doc, router
	d.webhookSpec = &openapi3.T{OpenAPI: doc.OpenAPI, Info: doc.Info, Components: doc.Components}

	c.mu.Lock()
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for key, ref := range op.Responses.Map() {
				c.entries[hit{version: d.version, method: method, path: path, key: key, component: componentOf(ref)}.entry()] = true
			}
		}
	}
	for typ := range doc.Webhooks {
		c.entries[hit{version: d.version, webhook: typ}.entry()] = true
	}
	c.mu.Unlock()

	// The fetch was an exchange like any other: it answers GET /{version}/openapi.json.
	if err := c.validate(d, req, nil, response{Status: resp.StatusCode, Header: resp.Header, Body: b}); err != nil {
		return fmt.Errorf("contract: GET %s: %w", req.URL, err)
	}
	return nil
}

// componentOf is the name of the responses component ref refers to, or "" for an inline response.
func componentOf(ref *openapi3.ResponseRef) string {
	name, _ := strings.CutPrefix(ref.Ref, "#/components/responses/")
	if name == ref.Ref {
		return ""
	}
	return name
}

// validate checks an exchange against the version's document and records what it exercised.
func (c *contractChecker) validate(d *versionDoc, req *http.Request, body []byte, r response) error {
	c.mu.Lock()
	c.validated++
	c.mu.Unlock()
	err := routers.ErrPathNotFound
	var route *routers.Route
	var params map[string]string
	if d.router != nil {
		route, params, err = d.router.FindRoute(req)
	}
	if err != nil {
		return outsideTheDocument(err, r)
	}

	ctx := context.Background()
	in := &openapi3filter.RequestValidationInput{Request: withBody(req, body), PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: bearerPresent}}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil && r.Status/100 != 4 {
		return fmt.Errorf("the document says this request is invalid, but the server answered %d: %w", r.Status, err)
	}
	// An invalid request's answer is checked too: the refusal must be one the operation documents.
	h := hit{version: d.version, method: req.Method, path: route.Path}
	var ref *openapi3.ResponseRef
	h.key, ref = responseFor(route.Operation, r.Status)
	opts := &openapi3filter.Options{IncludeResponseStatus: true}
	// A replay whose body held a secret comes without it, as the Idempotent-Body-Omitted header the
	// response documents says: no body, so no Content-Type for the document's content to match.
	if ref != nil && ref.Value.Headers["Idempotent-Body-Omitted"] != nil &&
		r.Header.Get("Idempotent-Body-Omitted") == "true" && len(r.Body) == 0 {
		opts.ExcludeResponseBody = true
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: r.Status, Header: r.Header,
		Body: io.NopCloser(bytes.NewReader(r.Body)), Options: opts}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return err
	}
	if ref == nil { // kin passes a few statuses (301, 304, 307, 308) without looking them up
		return fmt.Errorf("status %d is not documented", r.Status)
	}
	if err := undocumentedHeaders(ref.Value, r.Header); err != nil {
		return err
	}
	if err := undeclaredCodes(req.Method+" "+route.Path, route.Operation, h.key, r); err != nil {
		return err
	}
	h.component = componentOf(ref)
	c.record(h)
	return nil
}

// conventionHeaders are the response headers that carry the API's conventions, as opposed to those
// of HTTP itself (Content-Type, Content-Length, Date): an answer that sends one must document it, so
// that the document tells a client everything it may rely on. kin checks only the headers a response
// documents.
var conventionHeaders = []string{"Accept-Post", "Allow", "Cache-Control", "Deprecation", "Link", "Location",
	"Retry-After", "Sunset", "WWW-Authenticate"}

// undocumentedHeaders reports a convention header (or any X- or Idempotent- header) that the answer
// sends and its documented response does not list.
func undocumentedHeaders(resp *openapi3.Response, h http.Header) error {
	var missing []string
	for name := range h {
		if !slices.Contains(conventionHeaders, name) && !strings.HasPrefix(name, "X-") && !strings.HasPrefix(name, "Idempotent-") {
			continue
		}
		documented := false
		for d := range resp.Headers {
			documented = documented || http.CanonicalHeaderKey(d) == name
		}
		if !documented {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("the answer sends %s, which its documented response does not list", strings.Join(missing, ", "))
	}
	return nil
}

// undeclaredCodes reports a problem answer whose code, or a violation's (errors[].code), the
// operation's x-problem-codes does not list under key, the response the status matched: the
// document must tell a client every code it may meet, each one documented at its type URI.
func undeclaredCodes(operation string, op *openapi3.Operation, key string, r response) error {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/problem+json" {
		return nil
	}
	var p struct {
		Code   string
		Errors []struct{ Code string }
	}
	if err := json.Unmarshal(r.Body, &p); err != nil {
		return fmt.Errorf("a problem answer that is no JSON object: %w", err)
	}
	var listed map[string][]string
	if raw, err := json.Marshal(op.Extensions["x-problem-codes"]); err == nil {
		_ = json.Unmarshal(raw, &listed)
	}
	codes := []string{p.Code}
	for _, v := range p.Errors {
		codes = append(codes, v.Code)
	}
	var missing []string
	for _, c := range codes {
		if !slices.Contains(listed[key], c) && !slices.Contains(missing, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s answered %d with code %s, which its x-problem-codes does not list under %s (it lists %v)",
			operation, r.Status, strings.Join(missing, ", "), key, listed[key])
	}
	return nil
}

// responseFor is the key of op's responses that status matches, as ValidateResponse picks it: the
// exact status, else its range ("5XX"), else default; nil when none is declared.
func responseFor(op *openapi3.Operation, status int) (string, *openapi3.ResponseRef) {
	key := strconv.Itoa(status)
	if ref := op.Responses.Value(key); ref != nil {
		return key, ref
	}
	if ref := op.Responses.Value(key[:1] + "XX"); ref != nil {
		return key[:1] + "XX", ref
	}
	return "default", op.Responses.Default()
}

// outsideTheDocument checks the answer to a request no operation of the document describes (an
// unknown path, version or method): it must be a refusal, as a problem. 401 counts as one because
// authentication runs before routing, so an unknown route asked without a valid credential is
// refused like any other request, revealing nothing.
func outsideTheDocument(routeErr error, r response) error {
	switch r.Status {
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusUnauthorized, http.StatusGone:
		if err := apierror.Check(r.Status, r.Header, r.Body); err != nil {
			return fmt.Errorf("route not in the document (%v), and the refusal is no problem: %w", routeErr, err)
		}
		var p struct{ Code string }
		_ = json.Unmarshal(r.Body, &p)
		if r.Status != http.StatusGone || p.Code == versioning.CodeVersionSunset {
			return nil
		}
	}
	return fmt.Errorf("route not in the document (%v), but the server answered %d", routeErr, r.Status)
}

// withBody is req ready to be read again by the validator: the client consumed its body.
func withBody(req *http.Request, body []byte) *http.Request {
	v := req.Clone(context.Background())
	v.Body, v.ContentLength = http.NoBody, 0
	if len(body) > 0 {
		v.Body, v.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	return v
}

func (c *contractChecker) record(h hit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hits[h] = true
}

// checkDelivery validates a webhook delivery that base's server sent against the webhooks entry of
// its event type, in the document of the event's api_version.
func (c *contractChecker) checkDelivery(base string, req *http.Request, body []byte) error {
	var ev struct {
		Type       string `json:"type"`
		APIVersion string `json:"api_version"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return fmt.Errorf("contract: a delivery that is no JSON object: %w", err)
	}
	d, err := c.document(base, ev.APIVersion)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.validated++
	c.mu.Unlock()
	var item *openapi3.PathItem
	if d.doc != nil {
		item = d.doc.Webhooks[ev.Type]
	}
	if item == nil || item.Post == nil {
		return fmt.Errorf("contract: a %s delivery of type %q, which the %[1]s document's webhooks do not describe", ev.APIVersion, ev.Type)
	}
	in := &openapi3filter.RequestValidationInput{Request: withBody(req, body),
		Route:   &routers.Route{Spec: d.webhookSpec, Path: ev.Type, PathItem: item, Method: "POST", Operation: item.Post},
		Options: &openapi3filter.Options{AuthenticationFunc: bearerPresent}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return fmt.Errorf("contract: a %s delivery of %s: %w", ev.APIVersion, ev.Type, err)
	}
	c.record(hit{version: ev.APIVersion, webhook: ev.Type})
	return nil
}

// coverage returns the entries of the loaded documents that no exchange exercised, sorted, and how
// many there are in all.
func (c *contractChecker) coverage() (unexercised []string, total, validated int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	done := map[string]bool{}
	for h := range c.hits {
		done[h.entry()] = true
	}
	for e := range c.entries {
		if !done[e] {
			unexercised = append(unexercised, e)
		}
	}
	slices.Sort(unexercised)
	return unexercised, len(c.entries), c.validated
}

// reportContract prints the run's contract summary and, when the whole package ran against real
// PostgreSQL and Redis (some entries — 5XX, 409 — are reached only there), applies the coverage rule.
// It returns the exit code the rule asks for.
func reportContract(w io.Writer) int {
	unexercised, total, validated := contract.coverage()
	fmt.Fprintf(w, "contract: %d exchanges validated against the servers' OpenAPI documents; %d of %d document entries exercised\n",
		validated, total-len(unexercised), total)
	why := ""
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			why = "-" + name + " is set"
		}
	}
	switch {
	case why != "":
	case testing.Short():
		why = "-test.short is set"
	case os.Getenv(testenv.EnvPostgres) == "":
		why = testenv.EnvPostgres + " is unset"
	case os.Getenv(testenv.EnvRedis) == "":
		why = testenv.EnvRedis + " is unset"
	}
	if why != "" {
		fmt.Fprintf(w, "contract: coverage not checked: %s, so not every test ran\n", why)
		return 0
	}
	if len(unexercised) == 0 {
		return 0
	}
	fmt.Fprintf(w, "contract: FAIL: %d document entries no test exercised:\n", len(unexercised))
	for _, e := range unexercised {
		fmt.Fprintln(w, "\t"+e)
	}
	return 1
}

// TestWebhookDeliveriesMatchTheDocument: a real delivery of each documented event type reaches a
// consumer in process, which validates it against the document's webhooks entry (countingConsumer).
func TestWebhookDeliveriesMatchTheDocument(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	key := issueCredentials(t, srv)
	consumer, received := countingConsumer(t, srv.URL)
	registerEndpoint(t, srv.URL, key, consumer.URL+"/webhooks")
	createOrder(t, srv.URL, key, orderBody)
	request{Method: "POST", URL: srv.URL + "/v1/sandbox/events", Auth: bearer(key), Key: newKey(), Body: `{}`}.do(t).
		expectJSON(t, http.StatusCreated)
	eventually(t, deliveryTimeout, func() bool { return received.Load() >= 2 }, "the order.created and sandbox.test deliveries")
}

// The harness's own tests run against a tiny hand-written document, not the orderserver's.

const tinyProblem = `{"description": "A problem.", "headers": {"X-Request-Id": {"$ref": "#/components/headers/X-Request-Id"}},
	"content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}}`

var tinyDoc = `{
  "openapi": "3.1.0",
  "info": {"title": "tiny", "version": "v1"},
  "servers": [{"url": "http://example.invalid"}],
  "security": [{"bearer": []}],
  "paths": {
    "/v1/openapi.json": {"get": {"security": [], "responses": {
      "200": {"description": "This document.", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
    "/v1/things/{id}": {
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^th_"}}],
      "get": {"x-problem-codes": {"400": ["id_malformed"], "404": ["thing_not_found"], "5XX": ["unavailable", "upstream_failed"]},
        "responses": {
        "200": {"description": "The thing.", "headers": {"X-Request-Id": {"$ref": "#/components/headers/X-Request-Id"}},
          "content": {"application/json": {"schema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}}}},
        "400": {"$ref": "#/components/responses/BadRequest"},
        "404": {"$ref": "#/components/responses/NotFound"},
        "5XX": {"$ref": "#/components/responses/ServerError"}}}},
    "/v1/things": {"post": {"x-problem-codes": {"400": ["body_missing"]}, "responses": {
      "201": {"description": "Created; a replay may omit the body.",
        "headers": {"Idempotent-Body-Omitted": {"schema": {"const": "true"}}},
        "content": {"application/json": {"schema": {"type": "object"}}}},
      "400": {"$ref": "#/components/responses/BadRequest"}}}}
  },
  "webhooks": {"thing.created": {"post": {
    "parameters": [{"name": "X-SVC-Sequence", "in": "header", "required": true, "schema": {"type": "string", "pattern": "^[1-9][0-9]*$"}}],
    "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object",
      "required": ["type", "api_version"], "properties": {"type": {"const": "thing.created"}}}}}},
    "responses": {"2XX": {"description": "Acknowledged."}}}}},
  "components": {
    "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    "headers": {"X-Request-Id": {"required": true, "schema": {"type": "string", "pattern": "^req_"}}},
    "schemas": {"Problem": {"type": "object", "required": ["type", "title", "status", "code", "request_id"],
      "properties": {"status": {"type": "integer", "minimum": 400}, "code": {"type": "string"}}}},
    "responses": {"BadRequest": ` + tinyProblem + `, "NotFound": ` + tinyProblem + `, "ServerError": ` + tinyProblem + `}
  }
}`

// problem is a conforming problem answer, as the platform writes them.
func problem(status int, code string) response {
	return response{Status: status,
		Header: http.Header{"Content-Type": {"application/problem+json"}, "X-Request-Id": {"req_1"}},
		Body: fmt.Appendf(nil, `{"type":"https://errors.example/%s","title":"%s","status":%d,"code":%q,"detail":"the thing %s","request_id":"req_1"}`,
			code, http.StatusText(status), status, code, code)}
}

// withViolation is p with one violation of code, at the path parameter id.
func withViolation(p response, code string) response {
	var body map[string]any
	if err := json.Unmarshal(p.Body, &body); err != nil {
		panic(err)
	}
	body["errors"] = []any{map[string]any{"location": "path", "name": "id", "code": code, "detail": "the thing " + code}}
	p.Body, _ = json.Marshal(body)
	return p
}

// tinyServer serves doc as v1's document and nothing else: every other version is unknown.
func tinyServer(t *testing.T, doc string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/openapi.json" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, doc)
			return
		}
		p := problem(http.StatusNotFound, "version_unknown")
		for k, v := range p.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(p.Status)
		_, _ = w.Write(p.Body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestContractChecker(t *testing.T) {
	thing := response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req_1"}},
		Body: []byte(`{"id":"th_1"}`)}
	for _, tc := range []struct {
		name, method, path, auth, body string
		answer                         response
		wantErr                        string // "" when the exchange conforms
	}{
		{"a documented response", "GET", "/v1/things/th_1", "Bearer k", "", thing, ""},
		{"a documented problem", "GET", "/v1/things/th_1", "Bearer k", "", problem(404, "thing_not_found"), ""},
		{"a status in a documented range", "GET", "/v1/things/th_1", "Bearer k", "", problem(503, "unavailable"), ""},
		{"an undocumented status", "GET", "/v1/things/th_1", "Bearer k", "", problem(409, "conflict"), "status is not supported"},
		{"an undocumented status kin passes by", "GET", "/v1/things/th_1", "Bearer k", "",
			response{Status: 304, Header: thing.Header}, "status 304 is not documented"},
		{"a body that breaks the schema", "GET", "/v1/things/th_1", "Bearer k", "",
			response{Status: 200, Header: thing.Header, Body: []byte(`{"name":"x"}`)}, "response body doesn't match schema"},
		{"a problem that breaks the problem schema", "GET", "/v1/things/th_1", "Bearer k", "",
			response{Status: 404, Header: problem(404, "x").Header, Body: []byte(`{"code":"x"}`)}, "response body doesn't match schema"},
		{"a missing required response header", "GET", "/v1/things/th_1", "Bearer k", "",
			response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: thing.Body},
			`response header "X-Request-Id" missing`},
		{"an undocumented convention header", "GET", "/v1/things/th_1", "Bearer k", "",
			response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req_1"},
				"Retry-After": {"1"}, "X-Other": {"x"}}, Body: thing.Body},
			"the answer sends Retry-After, X-Other, which its documented response does not list"},
		{"a replay that omits its body as documented", "POST", "/v1/things", "Bearer k", "",
			response{Status: 201, Header: http.Header{"Idempotent-Body-Omitted": {"true"}}}, ""},
		{"an empty body where one is documented", "POST", "/v1/things", "Bearer k", "",
			response{Status: 201, Header: http.Header{}}, "Content-Type"},
		{"an invalid request answered 2xx", "GET", "/v1/things/nope", "Bearer k", "", thing,
			"the document says this request is invalid, but the server answered 200"},
		{"a request without credentials answered 2xx", "GET", "/v1/things/th_1", "", "", thing,
			"the document says this request is invalid, but the server answered 200"},
		{"an invalid request refused with 400", "GET", "/v1/things/nope", "Bearer k", "", problem(400, "id_malformed"), ""},
		{"a problem code the operation does not list", "GET", "/v1/things/th_1", "Bearer k", "", problem(404, "order_not_found"),
			"GET /v1/things/{id} answered 404 with code order_not_found, which its x-problem-codes does not list under 404"},
		{"a code listed under another status", "GET", "/v1/things/th_1", "Bearer k", "", problem(404, "id_malformed"),
			"code id_malformed, which its x-problem-codes does not list under 404"},
		{"a violation code the operation does not list", "GET", "/v1/things/th_1", "Bearer k", "",
			withViolation(problem(404, "thing_not_found"), "gone_away"), "code gone_away, which its x-problem-codes does not list"},
		{"a violation code the operation lists", "GET", "/v1/things/th_1", "Bearer k", "",
			withViolation(problem(404, "thing_not_found"), "thing_not_found"), ""},
		{"an unknown route refused with a 404 problem", "GET", "/v1/nothing", "Bearer k", "", problem(404, "route_not_found"), ""},
		{"an undocumented method refused with a 405 problem", "DELETE", "/v1/things/th_1", "Bearer k", "",
			problem(405, "method_not_allowed"), ""},
		{"an unknown version refused with a 404 problem", "GET", "/v3/things/th_1", "Bearer k", "", problem(404, "version_unknown"), ""},
		{"an unknown version refused before routing", "GET", "/v3/things/th_1", "", "", problem(401, "credential_missing"), ""},
		{"an unknown version answered 200", "GET", "/v3/things/th_1", "Bearer k", "", thing, "route not in the document"},
		{"an unknown route answered 200", "GET", "/v1/nothing", "Bearer k", "", thing, "route not in the document"},
		{"an unknown route refused with a 410 that is no sunset", "GET", "/v1/nothing", "Bearer k", "",
			problem(410, "gone"), "route not in the document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tinyServer(t, tinyDoc)
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			err = newContractChecker().check(req, []byte(tc.body), tc.answer)
			if tc.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.wantErr)
			}
		})
	}
}

// An invalid document fails the first exchange that needs it with the validator's whole error, and
// every later one shortly.
func TestContractCheckerInvalidDocument(t *testing.T) {
	srv := tinyServer(t, strings.Replace(tinyDoc, `"version": "v1"`, `"version": ""`, 1))
	c := newContractChecker()
	req, err := http.NewRequest("GET", srv.URL+"/v1/things/th_1", nil)
	require.NoError(t, err)
	require.ErrorContains(t, c.check(req, nil, problem(404, "thing_not_found")), "THE v1 DOCUMENT OF "+srv.URL+" IS INVALID: ")
	require.ErrorContains(t, c.check(req, nil, problem(404, "thing_not_found")), "did not load (see the first failure)")
}

func TestContractCheckerDeliveries(t *testing.T) {
	srv := tinyServer(t, tinyDoc)
	deliver := func(seq, body string) error {
		req := httptest.NewRequest("POST", "/webhooks", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if seq != "" {
			req.Header.Set("X-SVC-Sequence", seq)
		}
		return newContractChecker().checkDelivery(srv.URL, req, []byte(body))
	}
	require.NoError(t, deliver("1", `{"type":"thing.created","api_version":"v1"}`))
	require.ErrorContains(t, deliver("", `{"type":"thing.created","api_version":"v1"}`), "X-SVC-Sequence")
	require.ErrorContains(t, deliver("1", `{"type":"thing.deleted","api_version":"v1"}`), "webhooks do not describe")
}

func TestContractCoverage(t *testing.T) {
	srv := tinyServer(t, tinyDoc)
	c := newContractChecker()
	exchange := func(method, path string, r response) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer k")
		require.NoError(t, c.check(req, nil, r))
	}
	exchange("GET", "/v1/things/th_1", response{Status: 200,
		Header: http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req_1"}}, Body: []byte(`{"id":"th_1"}`)})
	exchange("GET", "/v1/things/th_1", problem(502, "upstream_failed")) // 5XX: the ServerError component
	exchange("POST", "/v1/things", problem(400, "body_missing"))        // BadRequest, through another operation

	unexercised, total, validated := c.coverage()
	require.Equal(t, []string{
		"POST /things 201",            // inline, never answered
		"response component NotFound", // shared, never answered by any operation
		"webhook thing.created",       // never delivered
	}, unexercised)
	require.Equal(t, 7, total, "three inline responses, three components and one webhook")
	require.Equal(t, 4, validated, "the three exchanges and the document's own fetch")
}
