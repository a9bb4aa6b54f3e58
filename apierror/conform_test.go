package apierror_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

func TestCheckRejectsNonConforming(t *testing.T) {
	problem := http.Header{"Content-Type": {"application/problem+json"}, "X-Request-Id": {"req_1"}}
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   string // substring of the failure
	}{
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := apierror.Check(tt.status, tt.header, []byte(tt.body))
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestCheckPassesAndIgnoresNon4xx(t *testing.T) {
	require.NoError(t, apierror.Check(201, http.Header{}, []byte(`{"id":"ord_1"}`)))
	require.NoError(t, apierror.Check(500, http.Header{}, nil))
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
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   string
	}{
		{"no request id header", 404, http.Header{"Content-Type": {"application/problem+json"}},
			`{"type":"x","title":"t","status":404,"detail":"no such order","code":"order_not_found","request_id":"req_1"}`, "X-Request-Id"},
		{"bad pointer escape", 400, problem,
			`{"type":"x","title":"t","status":400,"code":"validation_failed","request_id":"req_1","errors":[{"location":"body","pointer":"/a~2b","code":"x","detail":"y"}]}`, "pointer"},
		{"status text detail", 404, problem,
			`{"type":"x","title":"Not Found","status":404,"detail":"Not Found","code":"not_found","request_id":"req_1"}`, "does not say"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := apierror.Check(tt.status, tt.header, []byte(tt.body))
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}
