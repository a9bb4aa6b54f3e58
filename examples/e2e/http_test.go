package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

// client is a plain net/http client: the contract is checked the way any evaluator's client sees it.
var client = &http.Client{Timeout: 30 * time.Second}

// response is one answer, read completely.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// request describes one call; empty fields are left out of the request.
type request struct {
	Method, URL string
	Auth        string // the Authorization value ("Bearer …"), or "" for none
	Key         string // the Idempotency-Key, or "" for none
	Body        string
	Header      http.Header
}

func (rq request) do(t *testing.T) response {
	t.Helper()
	r, err := rq.send()
	require.NoError(t, err)
	return r
}

// send is do for goroutines other than the test's, which must not call t.FailNow. Every exchange is
// checked against the server's own OpenAPI document (contract): one that breaks it is an error.
func (rq request) send() (response, error) {
	var body io.Reader
	if rq.Body != "" {
		body = strings.NewReader(rq.Body)
	}
	req, err := http.NewRequest(rq.Method, rq.URL, body)
	if err != nil {
		return response{}, err
	}
	for k, vs := range rq.Header {
		req.Header[k] = vs
	}
	if rq.Auth != "" {
		req.Header.Set("Authorization", rq.Auth)
	}
	if rq.Key != "" {
		req.Header.Set("Idempotency-Key", rq.Key)
	}
	if rq.Body != "" && req.Header.Get("Content-Type") == "" { // rq.Header may send another on purpose
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	if resp.Header.Get("X-Request-Id") == "" {
		return response{}, fmt.Errorf("%s %s: no X-Request-Id: every response must carry one", rq.Method, rq.URL)
	}
	r := response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if err := contract.check(req, []byte(rq.Body), r); err != nil {
		return response{}, fmt.Errorf("%s %s answered %d, against the server's OpenAPI document: %w\nbody: %.500s",
			rq.Method, rq.URL, r.Status, err, b)
	}
	return r, nil
}

func bearer(key string) string { return "Bearer " + key }

// object decodes a JSON object body.
func (r response) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), "body: %s", r.Body)
	return m
}

// expectJSON checks a successful answer and decodes it.
func (r response) expectJSON(t *testing.T, status int) map[string]any {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	return r.object(t)
}

// expectProblem checks a problem answer: the status, the code, and that the body conforms to the
// platform's error rules (apierror.Check: problem+json, request_id, the failing input named and why).
func (r response) expectProblem(t *testing.T, status int, code string) map[string]any {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	require.NoError(t, apierror.Check(r.Status, r.Header, r.Body))
	p := r.object(t)
	require.Equal(t, code, p["code"], "body: %s", r.Body)
	require.Equal(t, r.Header.Get("X-Request-Id"), p["request_id"])
	return p
}

// locates reports whether a problem has a violation at the given location and pointer or name.
func locates(p map[string]any, location, where string) bool {
	errs, _ := p["errors"].([]any)
	for _, e := range errs {
		v, _ := e.(map[string]any)
		if v["location"] == location && (v["pointer"] == where || v["name"] == where) {
			return true
		}
	}
	return false
}
