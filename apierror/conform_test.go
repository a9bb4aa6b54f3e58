package apierror_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

func TestCheckRejectsNonConforming(t *testing.T) {
	problem := http.Header{"Content-Type": {"application/problem+json"}, "X-Request-Id": {"req_1"}}
	tests := []nonConforming{
		{"generic json error", 400, http.Header{"Content-Type": {"application/json"}}, `{"error":"invalid request"}`, "Content-Type"},
		{"generic problem", 400, problem, `{"type":"about:blank","title":"Bad Request","status":400,"detail":"Invalid request","code":"invalid_request","request_id":"req_1"}`, "names no failing input"},
		{"no code", 400, problem, `{"type":"x","title":"t","status":400,"detail":"account is required","request_id":"req_1"}`, "snake_case"},
		{"status mismatch", 404, problem, `{"type":"x","title":"t","status":400,"detail":"no such order","code":"order_not_found","request_id":"req_1"}`, "status"},
		{"no request id", 404, problem, `{"type":"x","title":"t","status":404,"detail":"no such order","code":"order_not_found"}`, "request_id"},
		{"request id mismatch", 404, problem, `{"type":"x","title":"t","status":404,"detail":"no such order","code":"order_not_found","request_id":"req_2"}`, "X-Request-Id"},
		{"unlocated violation", 400, problem, `{"type":"x","title":"t","status":400,"code":"validation_failed","request_id":"req_1","errors":[{"location":"body","code":"field_missing","detail":"is required"}]}`, "pointer"},
		{"violation without name", 400, problem, `{"type":"x","title":"t","status":400,"code":"validation_failed","request_id":"req_1","errors":[{"location":"header","code":"x","detail":"y"}]}`, "without a name"},
		{"bad location", 400, problem, `{"type":"x","title":"t","status":400,"code":"validation_failed","request_id":"req_1","errors":[{"location":"cookie","name":"a","code":"x","detail":"y"}]}`, "location"},
		{"empty violation detail", 400, problem, `{"type":"x","title":"t","status":400,"code":"validation_failed","request_id":"req_1","errors":[{"location":"query","name":"a","code":"x","detail":" "}]}`, "detail is empty"},
		{"not json", 400, problem, `oops`, "not a JSON"},
	}
	requireNonConforming(t, tests)
}

func TestCheckPassesAndIgnoresNon4xx(t *testing.T) {
	require.NoError(t, apierror.Check(201, http.Header{}, []byte(`{"id":"ord_1"}`)))
	require.NoError(t, apierror.Check(304, http.Header{}, nil))
	require.NoError(t, apierror.CheckResponse(render(t, apierror.Internal())), "the opaque 500 conforms")
	resp := render(t, apierror.MissingField("/account"))
	require.NoError(t, apierror.CheckResponse(resp))
	body, err := io.ReadAll(resp.Body) // CheckResponse puts the body back
	require.NoError(t, err)
	require.True(t, strings.Contains(string(body), `"pointer":"/account"`))
}

// D1: every response carries X-Request-Id and the body repeats it; a body whose pointer is not an
// RFC 6901 pointer, or whose detail is just the status text, does not conform.
func TestCheckRejectsMoreNonConforming(t *testing.T) {
	problem := http.Header{"Content-Type": {"application/problem+json"}, "X-Request-Id": {"req_1"}}
	tests := []nonConforming{
		{"no request id header", 404, http.Header{"Content-Type": {"application/problem+json"}},
			`{"type":"x","title":"t","status":404,"detail":"no such order","code":"order_not_found","request_id":"req_1"}`, "X-Request-Id"},
		{"bad pointer escape", 400, problem,
			`{"type":"x","title":"t","status":400,"code":"validation_failed","request_id":"req_1","errors":[{"location":"body","pointer":"/a~2b","code":"x","detail":"y"}]}`, "pointer"},
		{"status text detail", 404, problem,
			`{"type":"x","title":"Not Found","status":404,"detail":"Not Found","code":"not_found","request_id":"req_1"}`, "does not say"},
	}
	requireNonConforming(t, tests)
}

// What Check let through before: a type that is no URI reference, a detail that is only a stock
// phrase (with or without violations, at 4xx and 5xx), a code or violation code that is not strict
// snake_case, and a 5xx that is not a problem at all.
func TestCheckCatchesWhatItLetThrough(t *testing.T) {
	problem := http.Header{"Content-Type": {"application/problem+json"}, "X-Request-Id": {"req_1"}}
	ok := `{"type":"https://svcplatform.dev/problems/order_not_found","title":"Not Found","status":404,` +
		`"detail":"no order ord_1 in this account","code":"order_not_found","request_id":"req_1"}`
	require.NoError(t, apierror.Check(404, problem, []byte(ok)))
	tests := []nonConforming{
		{"type with spaces", 404, problem,
			`{"type":"order not found","title":"t","status":404,"detail":"no order ord_1","code":"order_not_found","request_id":"req_1"}`, "URI reference"},
		{"type with a bad escape", 404, problem,
			`{"type":"https://x/%zz","title":"t","status":404,"detail":"no order ord_1","code":"order_not_found","request_id":"req_1"}`, "URI reference"},
		{"type with a bad scheme", 404, problem,
			`{"type":"1http://x","title":"t","status":404,"detail":"no order ord_1","code":"order_not_found","request_id":"req_1"}`, "URI reference"},
		{"stock phrase", 404, problem,
			`{"type":"x","title":"t","status":404,"detail":"Oops! Something went wrong.","code":"order_not_found","request_id":"req_1"}`, "does not say"},
		{"another status's text", 409, problem,
			`{"type":"x","title":"t","status":409,"detail":"Bad Request","code":"order_conflict","request_id":"req_1"}`, "does not say"},
		{"stock phrase beside violations", 400, problem,
			`{"type":"x","title":"t","status":400,"detail":"Something went wrong","code":"validation_failed","request_id":"req_1","errors":[{"location":"body","pointer":"/a","code":"field_missing","detail":"is required"}]}`, "stock phrase"},
		{"stock violation detail", 400, problem,
			`{"type":"x","title":"t","status":400,"code":"validation_failed","request_id":"req_1","errors":[{"location":"body","pointer":"/a","code":"field_missing","detail":"Invalid"}]}`, "stock phrase"},
		{"code with a double underscore", 404, problem,
			`{"type":"x","title":"t","status":404,"detail":"no order ord_1","code":"order__not_found","request_id":"req_1"}`, "snake_case"},
		{"code with a trailing underscore", 404, problem,
			`{"type":"x","title":"t","status":404,"detail":"no order ord_1","code":"order_","request_id":"req_1"}`, "snake_case"},
		{"violation code in camel case", 400, problem,
			`{"type":"x","title":"t","status":400,"code":"validation_failed","request_id":"req_1","errors":[{"location":"body","pointer":"/a","code":"fieldMissing","detail":"is required"}]}`, "snake_case"},
		{"5xx that is not a problem", 500, http.Header{"Content-Type": {"text/plain"}}, `Internal Server Error`, "Content-Type"},
		{"5xx with a stock detail", 503, problem,
			`{"type":"x","title":"t","status":503,"detail":"Something went wrong","code":"store_unavailable","request_id":"req_1"}`, "stock phrase"},
	}
	requireNonConforming(t, tests)
	for _, ref := range []string{"about:blank", "/problems/x", "x", "https://svcplatform.dev/problems/a_b?x=1#f", "urn:svc:problem:x", "tag:svc,2026:x"} {
		require.NoError(t, apierror.Check(404, problem, []byte(`{"type":"`+ref+`","title":"t","status":404,"detail":"no order ord_1","code":"order_not_found","request_id":"req_1"}`)), ref)
	}
}

// nonConforming is an error response Check must refuse, with a substring of its complaint.
type nonConforming struct {
	name   string
	status int
	header http.Header
	body   string
	want   string
}

func requireNonConforming(t *testing.T, tests []nonConforming) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := apierror.Check(tt.status, tt.header, []byte(tt.body))
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

// Issue 30: Check accepted a 4xx whose detail was a generic "Invalid request body". Without a located
// violation, a 4xx conforms only when its code and its detail both name something beyond the words
// any failure could use (request, body, invalid, field, value, a status text, …); with violations,
// they name the input.
func TestCheckRequiresTheFailingInputNamed(t *testing.T) {
	problem := http.Header{"Content-Type": {"application/problem+json"}, "X-Request-Id": {"req_1"}}
	body := func(status int, code, detail string) string {
		return `{"type":"https://svcplatform.dev/problems/x","title":"t","status":` + strconv.Itoa(status) +
			`,"detail":"` + detail + `","code":"` + code + `","request_id":"req_1"}`
	}
	tests := []nonConforming{
		{"generic detail, generic code", 400, problem, body(400, "invalid_request_body", "Invalid request body"), "does not name"},
		{"generic detail, specific code", 400, problem, body(400, "order_invalid", "Invalid request body"), "does not name"},
		{"generic sentence", 422, problem, body(422, "order_rejected", "The request body is malformed."), "does not name"},
		{"generic validation", 400, problem, body(400, "validation_failed", "Validation failed for one or more fields"), "does not name"},
		{"required field missing", 400, problem, body(400, "field_missing", "Required field missing"), "does not name"},
		{"invalid parameter value", 400, problem, body(400, "parameter_invalid", "Invalid value for a parameter"), "does not name"},
		{"no such resource", 404, problem, body(404, "resource_not_found", "The requested resource does not exist"), "does not name"},
		{"status-text code", 404, problem, body(404, "not_found", "no order ord_1 in this account"), "names no failing input"},
		{"generic words, hyphenated", 400, problem, body(400, "bad_request_body", "Bad request-body"), "names no failing input"},
	}
	requireNonConforming(t, tests)
	for _, ok := range []struct {
		status       int
		code, detail string
	}{
		{404, "order_not_found", "no order ord_1 in this account"},
		{404, "order_not_found", "no such order"},
		{400, "account_invalid", "body /account: must be an account ID"},
		{401, "api_key_invalid", "the API key is missing, unknown, expired or revoked"},
		{429, "rate_limited", "too many requests; retry after the number of seconds in Retry-After"},
		{409, "order_conflict", "the order is already cancelled"},
		{422, "endpoint_limit_reached", "this licensee has 10 webhook endpoints, the most it may have"},
		{400, "currency_unsupported", "Währung nicht unterstützt"},
		// Words of status texts that name the one part of a request they are about.
		{405, "method_not_allowed", "DELETE is not allowed here; allowed: GET, POST"},
		{404, "version_unknown", "the version v3 is unknown; supported: v1, v2"},
	} {
		require.NoError(t, apierror.Check(ok.status, problem, []byte(body(ok.status, ok.code, ok.detail))), ok.detail)
	}
	// The library's own problems without violations conform.
	for _, p := range []*apierror.Error{
		apierror.RateLimited(time.Second, ""),
		apierror.Unauthenticated("api_key_invalid", "the API key is missing, unknown, expired or revoked"),
	} {
		require.NoError(t, apierror.CheckResponse(render(t, p)), p.Detail)
	}
}
