package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/requestlog"
)

// newRequestsAPI serves the request log's read API as the reference server does —
// requestlog.RequestsHandler under /v1, for testKey's licensee — over entries of that licensee and
// of another, and records what svc sends. It returns the URL, the record and the entries' instant
// ("now", to the second).
func newRequestsAPI(t *testing.T) (string, *sentLog, time.Time) {
	t.Helper()
	store, err := requestlog.NewMemoryStore(nil)
	require.NoError(t, err)
	now := time.Now().Truncate(time.Second)
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	require.NoError(t, store.Insert(context.Background(), []requestlog.Entry{
		{RequestID: "req_new", Owner: "lic_test", KeyID: "key_one", Method: "POST", Route: "POST /v1/orders", Status: 201,
			IdempotencyKey: "order-7", Version: "v2", Latency: 3 * time.Millisecond, At: at(time.Minute)},
		{RequestID: "req_replay", Owner: "lic_test", KeyID: "key_one", Method: "POST", Route: "POST /v1/orders", Status: 201,
			IdempotencyKey: "order-7", Replayed: true, Version: "v2", Latency: time.Millisecond, At: at(2 * time.Minute)},
		{RequestID: "req_conflict", Owner: "lic_test", KeyID: "key_two", Method: "POST", Route: "POST /v1/orders", Status: 409,
			Code: "idempotency_key_in_use", IdempotencyKey: strings.Repeat("k", 60), Version: "v2", Latency: 2 * time.Millisecond, At: at(3 * time.Minute)},
		{RequestID: "req_notfound", Owner: "lic_test", KeyID: "key_one", Method: "GET", Route: "GET /v1/orders/{id}", Status: 404,
			Code: "order_not_found", Version: "v2", Latency: time.Millisecond, At: at(4 * time.Minute)},
		{RequestID: "req_unrouted", Owner: "lic_test", KeyID: "key_one", Method: "DELETE", Status: 404, Code: "not_found",
			At: at(5 * time.Minute)},
		{RequestID: "up/stream-1", Owner: "lic_test", Method: "GET", Route: "/v1/health", Status: 200, At: at(6 * time.Minute)},
		{RequestID: "req_old", Owner: "lic_test", KeyID: "key_one", Method: "GET", Route: "GET /v1/orders", Status: 200,
			Version: "v1", Latency: 12 * time.Millisecond, At: at(3 * time.Hour)},
		{RequestID: "req_other", Owner: "lic_other", KeyID: "key_else", Method: "POST", Route: "POST /v1/orders", Status: 201,
			At: at(time.Minute)},
	}))
	h, err := requestlog.NewRequestsHandler(store, func(r *http.Request) (string, error) {
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			return "", apierror.Unauthenticated("api_key_invalid", "the API key is not valid")
		}
		return "lic_test", nil
	}, nil)
	require.NoError(t, err)
	mux := http.NewServeMux()
	h.Register(mux, "v1")
	sent := &sentLog{}
	srv := httptest.NewServer(apierror.WithRequestID(sent.wrap(mux)))
	t.Cleanup(srv.Close)
	return srv.URL, sent, now
}

// regexpRequestLine is the last line of a problem svc prints: the refusal's own request ID.
var regexpRequestLine = regexp.MustCompile(`  request req_[a-z0-9]+\n`)

// queries are the query strings of the requests sent, each parsed.
func queries(t *testing.T, reqs []sentRequest) []url.Values {
	t.Helper()
	out := make([]url.Values, len(reqs))
	for i, r := range reqs {
		require.Equal(t, http.MethodGet, r.Method)
		require.Equal(t, "/v1/requests", r.Path)
		require.Empty(t, r.IdempotencyKey, "a read sends no Idempotency-Key")
		q, err := url.ParseQuery(r.Query)
		require.NoError(t, err)
		out[i] = q
	}
	return out
}

// TestRequestsList lists the log through the real handler: the table, each filter as the query
// parameter the server reads, one page or every page, and --json.
func TestRequestsList(t *testing.T) {
	base, sent, now := newRequestsAPI(t)
	vars := map[string]string{envAPIKey: testKey, envBaseURL: base}
	ts := func(ago time.Duration) string { return now.Add(-ago).UTC().Format(time.RFC3339) }

	t.Run("the table, newest first, the licensee's own requests only", func(t *testing.T) {
		r := runSvc(t, vars, "", "requests", "list")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Equal(t, []url.Values{{}}, queries(t, sent.take()), "no filter, the server's page size")
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		require.Len(t, lines, 8, r.stdout)
		require.Regexp(t, `^TIME +STATUS +CODE +REQUEST +KEY +IDEMPOTENCY KEY +VERSION +LATENCY +ID$`, lines[0])
		for i, want := range []string{
			ts(time.Minute) + ` +201 +- +POST /v1/orders +key_one +order-7 +v2 +3ms +req_new`,
			ts(2*time.Minute) + ` +201 +- +POST /v1/orders +key_one +order-7 \(replayed\) +v2 +1ms +req_replay`,
			ts(3*time.Minute) + ` +409 +idempotency_key_in_use +POST /v1/orders +key_two +k{39}… +v2 +2ms +req_conflict`,
			ts(4*time.Minute) + ` +404 +order_not_found +GET /v1/orders/\{id\} +key_one +- +v2 +1ms +req_notfound`,
			ts(5*time.Minute) + ` +404 +not_found +DELETE \(no route\) +key_one +- +- +0ms +req_unrouted`,
			ts(6*time.Minute) + ` +200 +- +GET /v1/health +- +- +- +0ms +up/stream-1`,
			ts(3*time.Hour) + ` +200 +- +GET /v1/orders +key_one +- +v1 +12ms +req_old`,
		} {
			require.Regexp(t, "^"+want+"$", lines[i+1])
		}
		require.NotContains(t, r.stdout, "req_other")
		require.Empty(t, r.stderr, "nothing more matches")
	})
	t.Run("every filter is sent as the server's parameter", func(t *testing.T) {
		r := runSvc(t, vars, "", "requests", "list", "--status", "4XX", "--code", "order_not_found", "--key", "key_one",
			"--route", "GET /v1/orders/{id}", "--since", "10m", "--until", "1m", "--limit", "5")
		require.Equal(t, exitOK, r.code, r.stderr)
		q := queries(t, sent.take())
		require.Len(t, q, 1)
		since, err := strconv.ParseInt(q[0].Get("since"), 10, 64)
		require.NoError(t, err)
		until, err := strconv.ParseInt(q[0].Get("until"), 10, 64)
		require.NoError(t, err)
		require.InDelta(t, time.Now().Add(-10*time.Minute).Unix(), since, 5)
		require.Equal(t, int64(9*60), until-since)
		q[0].Del("since")
		q[0].Del("until")
		require.Equal(t, url.Values{"status": {"4xx"}, "code": {"order_not_found"}, "api_key": {"key_one"},
			"route": {"GET /v1/orders/{id}"}, "limit": {"5"}}, q[0])
		require.Regexp(t, `\n\S+ +404 +order_not_found +GET /v1/orders/\{id\} .* req_notfound\n$`, r.stdout)
		require.Equal(t, 2, strings.Count(r.stdout, "\n"), "the one request that matches")

		at := now.Add(-150 * time.Second).UTC().Format(time.RFC3339)
		r = runSvc(t, vars, "", "requests", "list", "--status", "201", "--since", at)
		require.Equal(t, exitOK, r.code, r.stderr)
		q = queries(t, sent.take())
		require.Equal(t, url.Values{"status": {"201"}, "since": {strconv.FormatInt(now.Add(-150*time.Second).Unix(), 10)}}, q[0])
		require.Contains(t, r.stdout, "req_new")
		require.Contains(t, r.stdout, "req_replay")
		require.Equal(t, 3, strings.Count(r.stdout, "\n"))

		r = runSvc(t, vars, "", "requests", "list", "--code", "rate_limited")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Equal(t, "no requests match\n", r.stdout)
		sent.take()
	})
	t.Run("one page, and how to read on", func(t *testing.T) {
		r := runSvc(t, vars, "", "requests", "list", "--limit", "2")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Equal(t, []url.Values{{"limit": {"2"}}}, queries(t, sent.take()))
		require.Equal(t, 3, strings.Count(r.stdout, "\n"))
		require.Equal(t, "svc: more requests match: the next page with --starting-after req_replay, or every page with --all\n", r.stderr)

		r = runSvc(t, vars, "", "requests", "list", "--limit", "2", "--starting-after", "req_replay")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Equal(t, []url.Values{{"limit": {"2"}, "starting_after": {"req_replay"}}}, queries(t, sent.take()))
		require.Contains(t, r.stdout, "req_conflict")
		require.Contains(t, r.stdout, "req_notfound")
		require.NotContains(t, r.stdout, "req_new")
	})
	t.Run("--all follows has_more with starting_after", func(t *testing.T) {
		r := runSvc(t, vars, "", "requests", "list", "--all", "--limit", "2")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Equal(t, []url.Values{
			{"limit": {"2"}},
			{"limit": {"2"}, "starting_after": {"req_replay"}},
			{"limit": {"2"}, "starting_after": {"req_notfound"}},
			{"limit": {"2"}, "starting_after": {"up/stream-1"}},
		}, queries(t, sent.take()))
		require.Equal(t, 8, strings.Count(r.stdout, "\n"), "one table of every page")
		require.Empty(t, r.stderr)

		r = runSvc(t, vars, "", "requests", "list", "--all")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Equal(t, []url.Values{{"limit": {"100"}}}, queries(t, sent.take()), "--all reads the largest pages")
	})
	t.Run("--json: the server's answer; with --all, a page a line", func(t *testing.T) {
		r := runSvc(t, vars, "", "requests", "list", "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		var list struct {
			Object  string           `json:"object"`
			Data    []map[string]any `json:"data"`
			HasMore bool             `json:"has_more"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
		require.Equal(t, "list", list.Object)
		require.Len(t, list.Data, 7)
		require.Equal(t, map[string]any{"object": "request", "id": "req_new", "api_key": "key_one", "method": "POST",
			"route": "POST /v1/orders", "status": float64(201), "code": nil, "idempotency_key": "order-7", "replayed": false,
			"version": "v2", "latency_ms": float64(3), "created": float64(now.Add(-time.Minute).Unix())}, list.Data[0])

		r = runSvc(t, vars, "", "requests", "list", "--json", "--all", "--limit", "3")
		require.Equal(t, exitOK, r.code, r.stderr)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		require.Len(t, lines, 3)
		for i, n := range []int{3, 3, 1} {
			require.NoError(t, json.Unmarshal([]byte(lines[i]), &list))
			require.Len(t, list.Data, n)
			require.Equal(t, i < 2, list.HasMore)
		}
		sent.take()
	})
	t.Run("the server's refusal is its problem, exit status 3", func(t *testing.T) {
		r := runSvc(t, map[string]string{envAPIKey: "sk_sandbox_wrong", envBaseURL: base}, "", "requests", "list")
		require.Equal(t, exitRefused, r.code)
		require.Contains(t, r.stderr, "svc: GET "+base+"/v1/requests: 401 Unauthorized (api_key_invalid)\n")
		require.Empty(t, r.stdout)
	})
}

// TestRequestsGet shows one entry with every field, finds an ID that needs escaping in the path, and
// shows another licensee's as the 404 it is.
func TestRequestsGet(t *testing.T) {
	base, sent, now := newRequestsAPI(t)
	vars := map[string]string{envAPIKey: testKey, envBaseURL: base}

	r := runSvc(t, vars, "", "requests", "get", "req_new")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, []sentRequest{{Method: "GET", Path: "/v1/requests/req_new"}}, sent.take())
	require.Equal(t, "request req_new\n"+
		"  time             "+now.Add(-time.Minute).UTC().Format(time.RFC3339)+"\n"+
		"  method           POST\n"+
		"  route            POST /v1/orders\n"+
		"  status           201 Created\n"+
		"  code             none\n"+
		"  api key          key_one\n"+
		"  idempotency key  order-7\n"+
		"  replayed         no\n"+
		"  version          v2\n"+
		"  latency          3 ms\n", r.stdout)

	r = runSvc(t, vars, "", "requests", "get", "req_replay")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "  replayed         yes: the answer stored for its Idempotency-Key was sent again; nothing was done a second time\n")

	r = runSvc(t, vars, "", "requests", "get", "req_unrouted")
	require.Equal(t, exitOK, r.code, r.stderr)
	for _, want := range []string{"route            none (no route served it)\n", "status           404 Not Found\n", "code             not_found\n",
		"idempotency key  none\n", "version          none\n"} {
		require.Contains(t, r.stdout, want)
	}

	r = runSvc(t, vars, "", "requests", "get", "up/stream-1")
	require.Equal(t, exitOK, r.code, r.stderr)
	reqs := sent.take()
	require.Equal(t, "/v1/requests/up%2Fstream-1", reqs[len(reqs)-1].Path, "a / of an adopted ID stays in its path segment")
	require.Contains(t, r.stdout, "request up/stream-1\n")
	require.Contains(t, r.stdout, "api key          none\n")

	r = runSvc(t, vars, "", "requests", "get", "req_new", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var entry map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &entry))
	require.Equal(t, "request", entry["object"])
	require.Equal(t, "req_new", entry["id"])

	r = runSvc(t, vars, "", "requests", "get", "req_other")
	require.Equal(t, exitRefused, r.code)
	require.Equal(t, "svc: GET "+base+"/v1/requests/req_other: 404 Not Found (request_not_found)\n"+
		"  no request of yours has this ID\n"+
		"  - path request_id: names no request of yours (request_not_found)\n", regexpRequestLine.ReplaceAllString(r.stderr, ""))
	require.Regexp(t, `  request req_[a-z0-9]+\n$`, r.stderr, "the refusal's own request ID, to look up in turn")
	require.Empty(t, r.stdout)
}

// Mistakes on the command line are refused before any request, with the usage exit status.
func TestRequestsUsageErrors(t *testing.T) {
	base, sent, _ := newRequestsAPI(t)
	vars := map[string]string{envAPIKey: testKey, envBaseURL: base}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a status class that is not one", []string{"requests", "list", "--status", "4x"}, `--status "4x" must be a status code (404) or a class of them (1xx to 5xx, such as 4xx)`},
		{"a status past 599", []string{"requests", "list", "--status", "600"}, `--status "600" must be a status code`},
		{"a status of words", []string{"requests", "list", "--status", "error"}, `--status "error" must be a status code`},
		{"a limit of 0", []string{"requests", "list", "--limit", "0"}, "--limit 0 must be between 1 and 100"},
		{"a limit past 100", []string{"requests", "list", "--limit", "101", "--all"}, "--limit 101 must be between 1 and 100"},
		{"a limit that is not a number", []string{"requests", "list", "--limit", "ten"}, `invalid value "ten" for flag -limit`},
		{"--since neither a duration nor a time", []string{"requests", "list", "--since", "yesterday"}, `--since "yesterday" is neither a duration back from now (1h, 30m) nor an RFC 3339 time`},
		{"--since a negative duration", []string{"requests", "list", "--since", "-1h"}, `--since "-1h" must be a duration back from now, more than 0`},
		{"--until before --since", []string{"requests", "list", "--since", "1h", "--until", "2h"}, "is not after --since"},
		{"--code with a space", []string{"requests", "list", "--code", "not found"}, `--code "not found" is not a problem code`},
		{"--key of another kind", []string{"requests", "list", "--key", "we_1"}, `--key: "we_1" is not an API key ID`},
		{"--starting-after that is no ID", []string{"requests", "list", "--starting-after", "req x"}, `--starting-after: "req x" is not a request ID`},
		{"list takes no argument", []string{"requests", "list", "req_new"}, `unexpected argument "req_new"`},
		{"get without an ID", []string{"requests", "get"}, "the request's ID is required, req_… (a response's X-Request-Id header, a problem's request_id)"},
		{"get: a path, not an ID", []string{"requests", "get", ".."}, `".." is not a request ID`},
		{"get: two IDs", []string{"requests", "get", "req_a", "req_b"}, `unexpected argument "req_b"`},
		{"get: a key pasted as the ID", []string{"requests", "get", "sk_sandbox_" + strings.Repeat("a", 40)}, "that is shaped like a credential, not a request ID"},
		{"a group alone", []string{"requests"}, "Usage: svc requests <command>"},
		{"an unknown subcommand", []string{"requests", "tail"}, `unknown command "svc requests tail"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runSvc(t, vars, "", tc.args...)
			require.Equal(t, exitUsage, r.code, r.stderr)
			require.Contains(t, r.stderr, tc.want)
		})
	}
	t.Run("--key takes a key's ID, never the key, which is not repeated", func(t *testing.T) {
		secret := "sk_sandbox_" + strings.Repeat("x", 40)
		r := runSvc(t, vars, "", "requests", "list", "--key", secret)
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, "--key takes an API key's ID (key_…, as 'svc keys list' shows), never the key")
		require.Contains(t, r.stderr, "roll a key given there")
		require.NotContains(t, r.stderr, secret)
		r = runSvc(t, vars, "", "requests", "get", "--key", "key_one", "req_new")
		require.Equal(t, exitUsage, r.code, "only list defines --key; elsewhere it is the secret flag it always was")
		require.Contains(t, r.stderr, "there is no -key flag")
	})
	require.Empty(t, sent.take())
}

// --all reads at most maxAllRequests, then says how to narrow the list or read on: a licensee's week
// of requests may be millions.
func TestRequestsListAllIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: reads 100 pages")
	}
	store, err := requestlog.NewMemoryStore(&requestlog.MemoryStoreOptions{MaxEntriesPerOwner: maxAllRequests + 50})
	require.NoError(t, err)
	now := time.Now().Truncate(time.Second)
	entries := make([]requestlog.Entry, maxAllRequests+50)
	for i := range entries {
		entries[i] = requestlog.Entry{RequestID: "req_" + strconv.Itoa(100000+i), Owner: "lic_test", Method: "GET", Route: "GET /v1/orders",
			Status: 200, At: now.Add(-time.Duration(i) * time.Second)}
	}
	require.NoError(t, store.Insert(context.Background(), entries))
	h, err := requestlog.NewRequestsHandler(store, func(*http.Request) (string, error) { return "lic_test", nil }, nil)
	require.NoError(t, err)
	mux := http.NewServeMux()
	h.Register(mux, "v1")
	sent := &sentLog{}
	srv := httptest.NewServer(sent.wrap(mux))
	defer srv.Close()

	r := runSvc(t, map[string]string{envAPIKey: testKey, envBaseURL: srv.URL}, "", "requests", "list", "--all")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Len(t, sent.take(), maxAllRequests/maxRequestsPage)
	require.Equal(t, maxAllRequests+1, strings.Count(r.stdout, "\n"), "the header and every request read")
	last := "req_" + strconv.Itoa(100000+maxAllRequests-1)
	require.Equal(t, "svc: stopped after 10000 requests, and more match: narrow the list (--since, --until, --status, --code, --key, --route), or read on with --starting-after "+last+"\n", r.stderr)
}
