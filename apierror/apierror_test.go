package apierror_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

// render writes err through Write and returns the recorded response.
func render(t *testing.T, err error) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
	apierror.Write(rec, req, err)
	return rec.Result()
}

func decodeBody(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	return m
}

func TestBuilders(t *testing.T) {
	tests := []struct {
		name     string
		err      *apierror.Error
		status   int
		code     string
		location string
		where    string // pointer or name of the first violation, "-" for none
		header   [2]string
	}{
		{"missing field", apierror.MissingField("/account"), 400, "field_missing", "body", "/account", [2]string{}},
		{"invalid field", apierror.Invalid(apierror.Body("/side", "invalid_enum", "must be one of buy, sell")), 400, "invalid_enum", "body", "/side", [2]string{}},
		{"missing header", apierror.MissingHeader("Idempotency-Key"), 400, "header_missing", "header", "Idempotency-Key", [2]string{}},
		{"invalid header", apierror.Invalid(apierror.Header("Idempotency-Key", "idempotency_key_invalid", "must be 1-255 visible ASCII bytes")), 400, "idempotency_key_invalid", "header", "Idempotency-Key", [2]string{}},
		{"missing query", apierror.MissingQuery("from"), 400, "query_missing", "query", "from", [2]string{}},
		{"invalid query", apierror.Invalid(apierror.Query("limit", "out_of_range", "must be between 1 and 1000")), 400, "out_of_range", "query", "limit", [2]string{}},
		{"invalid path", apierror.Invalid(apierror.Path("version", "version_malformed", "must look like v1")), 400, "version_malformed", "path", "version", [2]string{}},
		{"malformed json", apierror.MalformedJSON(17, "invalid character 'x'"), 400, "malformed_json", "body", "", [2]string{}},
		{"wrong type", apierror.WrongType("/items/3/qty", "number", "string"), 400, "wrong_type", "body", "/items/3/qty", [2]string{}},
		{"unknown field", apierror.UnknownField("/sied"), 400, "unknown_field", "body", "/sied", [2]string{}},
		{"body too large", apierror.BodyTooLarge(1 << 20), 413, "body_too_large", "body", "", [2]string{}},
		{"unauthenticated", apierror.Unauthenticated("credential_missing", "an Authorization: Bearer credential is required",
			apierror.Header("Authorization", "header_missing", "header Authorization is required")), 401, "credential_missing", "header", "Authorization", [2]string{"WWW-Authenticate", `Bearer realm="svcplatform"`}},
		{"forbidden", apierror.Forbidden("version_not_enabled", "this licensee is pinned to v1",
			apierror.Path("version", "version_not_enabled", "pinned to v1")), 403, "version_not_enabled", "path", "version", [2]string{}},
		{"not found", apierror.NotFound("order_not_found", "no order ord_123 for this credential",
			apierror.Path("id", "order_not_found", "no such order")), 404, "order_not_found", "path", "id", [2]string{}},
		{"conflict", apierror.Conflict("idempotency_key_in_use", "a request with this Idempotency-Key is still being processed",
			apierror.Header("Idempotency-Key", "idempotency_key_in_use", "still in flight")).WithHeader("Retry-After", "1"), 409, "idempotency_key_in_use", "header", "Idempotency-Key", [2]string{"Retry-After", "1"}},
		{"gone", apierror.Gone("version_sunset", "v0 was sunset", apierror.Path("version", "version_sunset", "sunset")), 410, "version_sunset", "path", "version", [2]string{}},
		{"unprocessable", apierror.Unprocessable("idempotency_key_reused", "this Idempotency-Key was used with a different request",
			apierror.Header("Idempotency-Key", "idempotency_key_reused", "used with another request")), 422, "idempotency_key_reused", "header", "Idempotency-Key", [2]string{}},
		{"rate limited", apierror.RateLimited(1500*time.Millisecond, ""), 429, "rate_limited", "", "-", [2]string{"Retry-After", "2"}},
		{"unavailable", apierror.Unavailable(3*time.Second, "store_unavailable", "the idempotency store is unreachable; the request was not carried out"), 503, "store_unavailable", "", "-", [2]string{"Retry-After", "3"}},
		{"internal", apierror.Internal(), 500, "internal_error", "", "-", [2]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := render(t, tt.err)
			require.Equal(t, tt.status, resp.StatusCode)
			require.Equal(t, apierror.MediaType, resp.Header.Get("Content-Type"))
			require.NotEmpty(t, resp.Header.Get(apierror.HeaderRequestID))
			if tt.header[0] != "" {
				require.Equal(t, tt.header[1], resp.Header.Get(tt.header[0]))
			}
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, apierror.Check(resp.StatusCode, resp.Header, raw), "every 4xx the package builds conforms")

			var m map[string]any
			require.NoError(t, json.Unmarshal(raw, &m))
			require.Equal(t, tt.code, m["code"])
			require.Equal(t, float64(tt.status), m["status"])
			require.Equal(t, "https://svcplatform.dev/problems/"+tt.code, m["type"])
			require.Equal(t, resp.Header.Get(apierror.HeaderRequestID), m["request_id"])
			require.NotEmpty(t, m["title"])
			require.NotEmpty(t, m["detail"])
			if tt.where == "-" {
				require.NotContains(t, m, "errors")
				return
			}
			v := m["errors"].([]any)[0].(map[string]any)
			require.Equal(t, tt.location, v["location"])
			if tt.location == "body" {
				require.Equal(t, tt.where, v["pointer"])
			} else {
				require.Equal(t, tt.where, v["name"])
			}
		})
	}
}

func TestWriteOpaqueInternal(t *testing.T) {
	secret := "sk_live_do_not_leak"
	resp := render(t, fmt.Errorf("db: password=%s refused", secret))
	require.Equal(t, 500, resp.StatusCode)
	raw, _ := io.ReadAll(resp.Body)
	require.NotContains(t, string(raw), secret)
	require.NotContains(t, string(raw), "password")
	var p apierror.Error
	require.NoError(t, json.Unmarshal(raw, &p))
	require.Equal(t, "internal_error", p.Code)
	require.NotEmpty(t, p.RequestID)
}

func TestWriteWrappedAndReused(t *testing.T) {
	shared := apierror.NotFound("order_not_found", "no such order")
	for range 2 {
		resp := render(t, fmt.Errorf("lookup: %w", shared))
		require.Equal(t, 404, resp.StatusCode)
	}
	require.Empty(t, shared.RequestID, "Write must not mutate a problem the caller may reuse")
}

func TestWriteUnmarshalableExtension(t *testing.T) {
	resp := render(t, apierror.NotFound("x_missing", "no x").With("bad", func() {}))
	require.Equal(t, 500, resp.StatusCode)
	require.Equal(t, "internal_error", decodeBody(t, resp)["code"])
}

func TestWithReservedPanics(t *testing.T) {
	require.Panics(t, func() { apierror.NotFound("a", "b").With("status", 1) })
}

func TestRequestID(t *testing.T) {
	var seen, client string
	h := apierror.WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = apierror.RequestIDFromContext(r.Context())
		client = apierror.ClientRequestIDFromContext(r.Context())
		apierror.Write(w, r, apierror.MissingField("/account"))
	}))
	liveKey := "sk_live_" + strings.Repeat("a1b2", 8)
	tests := []struct {
		name, sent string
		kept       bool // kept for the server's logs (never echoed)
	}{
		{"well-formed is kept for logs", "trace-1234.abc:9", true},
		{"absent", "", false},
		{"too long", strings.Repeat("a", 129), false},
		{"injection", "abc\r\nSet-Cookie: x", false},
		{"spaces", "a b", false},
		{"a live key", liveKey, false},
		{"a webhook secret inside", "trace:whsec_" + strings.Repeat("Z", 20), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/", nil)
			if tt.sent != "" {
				req.Header[apierror.HeaderRequestID] = []string{tt.sent}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			got := rec.Header().Get(apierror.HeaderRequestID)
			require.Equal(t, seen, got)
			require.True(t, strings.HasPrefix(got, "req_"), got)
			require.Len(t, got, len("req_")+26)
			if tt.sent != "" {
				require.NotContains(t, rec.Body.String(), tt.sent, "the client's ID is never echoed")
				for _, vs := range rec.Header() {
					for _, v := range vs {
						require.NotContains(t, v, tt.sent)
					}
				}
			}
			if tt.kept {
				require.Equal(t, tt.sent, client)
			} else {
				require.Empty(t, client)
			}
			var p apierror.Error
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
			require.Equal(t, got, p.RequestID)
		})
	}
}

// A detail, title, instance or violation detail that quotes a credential-shaped input never repeats
// it, in the body or in Error(); other text is untouched.
func TestWriteRedactsCredentials(t *testing.T) {
	key := "sk_live_" + strings.Repeat("Q7", 16)
	secret := "whsec_" + strings.Repeat("x9", 12)
	p := apierror.NotFound("webhook_endpoint_not_found", `no webhook endpoint "`+key+`"`)
	p.Instance = "/v1/webhook_endpoints/" + secret
	p.Errors = []apierror.Violation{apierror.Path("id", "not_found", "no endpoint "+secret+" here")}
	rec := httptest.NewRecorder()
	apierror.Write(rec, httptest.NewRequest(http.MethodGet, "/", nil), p)
	body := rec.Body.String()
	require.NotContains(t, body, key)
	require.NotContains(t, body, secret)
	require.NotContains(t, p.Error(), key)
	require.Contains(t, body, `no webhook endpoint \"`+apierror.Redacted+`\"`)
	require.Contains(t, p.Detail, key, "the problem itself is not mutated")

	for _, tt := range []struct {
		in   string
		want bool
	}{
		{key, true},
		{"sk_sandbox_abcdefghijklmnop", true},
		{"rk_test_abcdefghijklmnop", true},
		{"Bearer " + key, true},
		{"pk_id", false},
		{"risk_level", false},
		{"sk_live_…", false},
		{"ask_price is not a known field", false},
		{"", false},
	} {
		require.Equal(t, tt.want, apierror.LooksLikeCredential(tt.in), tt.in)
		if !tt.want {
			require.Equal(t, tt.in, apierror.Redact(tt.in))
		}
	}
	require.Equal(t, "a "+apierror.Redacted+" b "+apierror.Redacted, apierror.Redact("a "+key+" b "+secret))
}

func TestInvalidSeveral(t *testing.T) {
	var c apierror.Collector
	require.NoError(t, c.Err())
	c.Require("/account", false)
	c.Require("/present", true)
	c.Check(false, apierror.Body("/side", "invalid_enum", "must be one of buy, sell"))
	c.Check(true, apierror.Body("/never", "x", "y"))
	err := c.Err()
	require.Error(t, err)
	var p *apierror.Error
	require.True(t, errors.As(err, &p))
	require.Equal(t, "validation_failed", p.Code)
	require.Equal(t, "body /account: is required (and 1 more)", p.Detail)
	require.Len(t, p.Violations(), 2)
	require.Len(t, c.Violations(), 2)
}

func TestInvalidNeedsAViolation(t *testing.T) {
	require.Panics(t, func() { apierror.Invalid() })
}

func TestPointer(t *testing.T) {
	require.Equal(t, "", apierror.Pointer())
	require.Equal(t, "/items/3/qty", apierror.Pointer("items", "3", "qty"))
	require.Equal(t, "/a~1b/m~0n", apierror.Pointer("a/b", "m~n"))
}

func TestRetryAfter(t *testing.T) {
	require.Equal(t, "1", apierror.RetryAfter(0))
	require.Equal(t, "1", apierror.RetryAfter(-time.Second))
	require.Equal(t, "1", apierror.RetryAfter(time.Millisecond))
	require.Equal(t, "2", apierror.RetryAfter(1001*time.Millisecond))
	require.Equal(t, "30", apierror.RetryAfter(30*time.Second))
}

func TestMarshalRoundTrip(t *testing.T) {
	in := apierror.Invalid(
		apierror.Body("/a\"b", "c", "line\nbreak \u2028 <tag> \x01 "+string([]byte{0xff})),
		apierror.Query("limit", "out_of_range", "too big"),
	).With("supported_versions", []string{"v1", "v2"})
	in.Instance = "/v1/orders/ord_1"
	in.RequestID = "req_x"
	raw, err := json.Marshal(in)
	require.NoError(t, err)
	require.True(t, json.Valid(raw), string(raw))
	var out apierror.Error
	require.NoError(t, json.Unmarshal(raw, &out))
	require.Equal(t, in.Code, out.Code)
	require.Equal(t, in.Instance, out.Instance)
	require.Equal(t, in.RequestID, out.RequestID)
	require.Equal(t, "/a\"b", out.Errors[0].Pointer)
	require.Equal(t, "line\nbreak \u2028 <tag> \x01 \ufffd", out.Errors[0].Detail)
	require.Equal(t, []any{"v1", "v2"}, out.Extensions["supported_versions"])
	require.Equal(t, "limit", out.Errors[1].Name)
	require.Equal(t, "apierror: 400 validation_failed: "+in.Detail, in.Error())
}

func TestParse(t *testing.T) {
	resp := render(t, apierror.Unprocessable("idempotency_key_reused", "reused with another body",
		apierror.Header("Idempotency-Key", "idempotency_key_reused", "used with another request")))
	p, err := apierror.Parse(resp)
	require.NoError(t, err)
	require.Equal(t, 422, p.Status)
	require.Equal(t, "idempotency_key_reused", p.Code)
	require.Equal(t, "Idempotency-Key", p.Errors[0].Name)
	require.Equal(t, resp.Header.Get(apierror.HeaderRequestID), p.RequestID)

	plain := &http.Response{StatusCode: 400, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"error":"invalid request"}`))}
	_, err = apierror.Parse(plain)
	require.ErrorIs(t, err, apierror.ErrNotProblem)

	broken := &http.Response{StatusCode: 400, Header: http.Header{"Content-Type": {"application/problem+json"}},
		Body: io.NopCloser(strings.NewReader(`{"status":"four hundred"}`))}
	_, err = apierror.Parse(broken)
	require.Error(t, err)
}

// The type URI is TypeBase and the code, both escaped, whether or not the writer's base needs escaping.
func TestWriteTypeURIFromBaseAndCode(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
	apierror.Writer{TypeBase: `https://example.test/"p"/`}.Write(rec, req, apierror.NotFound("order_not_found", "no such order"))
	m := decodeBody(t, rec.Result())
	require.Equal(t, `https://example.test/"p"/order_not_found`, m["type"])

	p := apierror.NotFound("order_not_found", "no such order")
	p.Type = "https://example.test/own"
	m = decodeBody(t, render(t, p))
	require.Equal(t, "https://example.test/own", m["type"], "an explicit Type wins over the base")
}

// The request ID on the response header is always the one in the body: a stale header value set
// before Write is replaced, and the value WithRequestID already set is kept.
func TestWriteRequestIDHeaderMatchesBody(t *testing.T) {
	for _, preset := range []string{"", "req_stale", "req_ctx"} {
		rec := httptest.NewRecorder()
		if preset != "" {
			rec.Header().Set(apierror.HeaderRequestID, preset)
		}
		req := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
		req = req.WithContext(apierror.NewRequestIDContext(req.Context(), "req_ctx"))
		apierror.Write(rec, req, apierror.NotFound("order_not_found", "no such order"))
		resp := rec.Result()
		require.Equal(t, []string{"req_ctx"}, resp.Header.Values(apierror.HeaderRequestID), "preset %q", preset)
		require.Equal(t, "req_ctx", decodeBody(t, resp)["request_id"])
		require.Equal(t, apierror.MediaType, resp.Header.Get("Content-Type"))
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	}
}

// Without WithRequestID in front, the request ID in the log line is the one the client gets, so that an
// operator can find the cause from what the client reports.
func TestWriteLogsTheRequestIDItSends(t *testing.T) {
	var logs strings.Builder
	wr := apierror.Writer{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	rec := httptest.NewRecorder()
	wr.Write(rec, httptest.NewRequest(http.MethodPost, "/v1/orders", nil), errors.New("db down"))
	var line struct {
		RequestID string `json:"request_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(logs.String()), &line))
	require.Equal(t, rec.Header().Get(apierror.HeaderRequestID), line.RequestID)
	require.Equal(t, line.RequestID, decodeBody(t, rec.Result())["request_id"])

	// A nil request (tolerated for the ID) does not make the logging path panic.
	require.NotPanics(t, func() { wr.Write(httptest.NewRecorder(), nil, errors.New("x")) })
}

// A problem without a valid error status is a programming error: it becomes the opaque 500 instead of a
// panic in WriteHeader (status 0) or a "problem" sent with a 2xx or 3xx status.
func TestWriteInvalidStatusIsInternal(t *testing.T) {
	for _, status := range []int{0, 99, 200, 302, 600, 1000} {
		var resp *http.Response
		require.NotPanics(t, func() { resp = render(t, &apierror.Error{Status: status, Code: "x", Detail: "d"}) }, "status %d", status)
		require.Equal(t, 500, resp.StatusCode, "status %d", status)
		require.Equal(t, "internal_error", decodeBody(t, resp)["code"])
	}
}

// Parse refuses what is not a problem object, and odd responses do not make it panic.
func TestParseRefusesNonProblems(t *testing.T) {
	h := http.Header{"Content-Type": {"application/problem+json"}}
	for _, body := range []string{`null`, `[]`, `"x"`, `1`, ``, `{"type":"x"} {}`} {
		_, err := apierror.Parse(&http.Response{StatusCode: 400, Header: h, Body: io.NopCloser(strings.NewReader(body))})
		require.Error(t, err, "%q", body)
	}
	require.NotPanics(t, func() {
		_, err := apierror.Parse(&http.Response{StatusCode: 400, Header: h})
		require.Error(t, err)
		_, err = apierror.Parse(&http.Response{StatusCode: 400})
		require.ErrorIs(t, err, apierror.ErrNotProblem)
	})
}
