package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/svcplatform/conventions/apierror"
)

// The request log's read API (requestlog.RequestsHandler on the server): what support, or the
// developer, reads to learn what became of a request.

// requestsHelp is what 'svc requests --help' says beyond the list of its commands.
const requestsHelp = `A request's ID comes with its answer: every response carries it in the X-Request-Id header, and
every problem in its request_id member (svc prints it under a problem, as "request req_…"). The
server keeps what it recorded of each request for a while (7 days by default): the status, the
problem's code, the API key's ID, the Idempotency-Key and whether it replayed an earlier answer,
the version and the latency; never a body, a query string or a credential.

  svc requests get req_2vq4mxd1k8c0f6hz7t3w9bn5ya
  svc requests list --status 4xx --since 1h`

// Bounds of the list, the server's (requestlog.MaxListLimit) and svc's own for --all.
const (
	maxRequestsPage = 100
	// maxAllRequests bounds what --all reads (and keeps, to align the table): a licensee's week of
	// requests may be millions, and narrowing the filters is the better way to find one.
	maxAllRequests = 10_000
)

// requestJSON is one entry of the request log as the server sends it; members without a value are
// null.
type requestJSON struct {
	ID             string  `json:"id"`
	APIKey         *string `json:"api_key"`
	Method         string  `json:"method"`
	Route          *string `json:"route"`
	Status         int     `json:"status"`
	Code           *string `json:"code"`
	IdempotencyKey *string `json:"idempotency_key"`
	Replayed       bool    `json:"replayed"`
	Version        *string `json:"version"`
	LatencyMS      int64   `json:"latency_ms"`
	Created        int64   `json:"created"`
}

// requestsPage is one page of the list, each entry kept as sent for --json.
type requestsPage struct {
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
}

func runRequestsList(ctx context.Context, e env, args []string) error {
	var (
		cm      common
		rf      requestsFilter
		jsonOut bool
	)
	f := newFlags(e, "svc requests list", "[--status 4xx|404] [--code C] [--key key_…] [--route R] [--since DURATION|TIME] [--until DURATION|TIME] [--limit N] [--all] [flags]", `
List the requests the server recorded for the key's licensee, newest first: when each arrived, its
status and problem code, what it asked (the method and the route pattern that served it), the API
key's ID, its Idempotency-Key (and whether the answer was a replay of the first request's), the
version and how long it took, and its ID, for 'svc requests get'. Without --all, one page: when
more match, svc says how to read on.

--since and --until take a duration back from now (1h, 30m, 72h) or a time (2026-01-02T15:04:05Z).
--route takes a pattern as the list shows it, quoted: --route 'POST /v1/orders'.
--json prints the server's answer; with --all, one page's answer per line (jq -c '.data[]' reads
either).

  svc requests list --status 4xx --since 1h
  svc requests list --key key_… --code idempotency_key_in_use --all`)
	cm.register(f.FlagSet)
	f.StringVar(&rf.status, "status", "", "only this status (404) or class of them (4xx)")
	f.StringVar(&rf.code, "code", "", "only requests answered with this problem code, such as version_not_enabled")
	f.StringVar(&rf.key, "key", "", "only the requests of this API key, by its ID (key_…, as 'svc keys list' shows): never the key itself")
	f.StringVar(&rf.route, "route", "", "only requests served by this route pattern, such as 'POST /v1/orders'")
	f.StringVar(&rf.since, "since", "", "only requests at or after this: a duration back from now (1h) or an RFC 3339 time")
	f.StringVar(&rf.until, "until", "", "only requests before this: a duration back from now or an RFC 3339 time")
	f.IntVar(&rf.limit, "limit", 0, fmt.Sprintf("requests per page, 1 to %d (default: the server's, 20; %d with --all)", maxRequestsPage, maxRequestsPage))
	f.BoolVar(&rf.all, "all", false, fmt.Sprintf("read every page, following has_more (at most %d requests)", maxAllRequests))
	f.StringVar(&rf.after, "starting-after", "", "the page after this request ID: the last one of the page before")
	f.BoolVar(&jsonOut, "json", false, "print the server's answer as JSON")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	q, err := rf.query(f, time.Now())
	if err != nil {
		return err
	}
	_, c, err := apiClient(e, cm)
	if err != nil {
		return err
	}
	var (
		rows []requestJSON
		more bool
	)
	for {
		path := "/requests"
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		resp, err := c.do(ctx, http.MethodGet, path, nil, "")
		if err != nil {
			return err
		}
		var page requestsPage
		if err := resp.decode(&page); err != nil {
			return err
		}
		if jsonOut {
			if err := printJSON(e.stdout, resp.body); err != nil {
				return err
			}
		}
		for _, raw := range page.Data {
			var r requestJSON
			if err := json.Unmarshal(raw, &r); err != nil {
				return fmt.Errorf("the server's answer is not the expected JSON: %w", err)
			}
			rows = append(rows, r)
		}
		more = page.HasMore && len(page.Data) > 0
		if !rf.all || !more || len(rows) >= maxAllRequests {
			break
		}
		q.Set("starting_after", rows[len(rows)-1].ID)
	}
	if !jsonOut {
		printRequests(e.stdout, rows)
	}
	switch {
	case more && rf.all:
		fmt.Fprintf(e.stderr, "svc: stopped after %d requests, and more match: narrow the list (--since, --until, --status, --code, --key, --route), or read on with --starting-after %s\n",
			len(rows), clean(rows[len(rows)-1].ID))
	case more:
		fmt.Fprintf(e.stderr, "svc: more requests match: the next page with --starting-after %s, or every page with --all\n", clean(rows[len(rows)-1].ID))
	}
	return nil
}

// requestsFilter are the list's flags.
type requestsFilter struct {
	status, code, key, route, since, until, after string
	limit                                         int
	all                                           bool
}

// query checks the list's flags, before any request, and turns them into the query.
func (rf *requestsFilter) query(f *flags, now time.Time) (url.Values, error) {
	q := url.Values{}
	name := f.Name()
	status, code, key, route, since, until, after, limit := rf.status, rf.code, rf.key, rf.route, rf.since, rf.until, rf.after, rf.limit
	if status != "" {
		if !validStatusFilter(status) {
			return nil, usagef("%s: --status %q must be a status code (404) or a class of them (1xx to 5xx, such as 4xx)", name, status)
		}
		q.Set("status", strings.ToLower(status))
	}
	if code != "" {
		if len(code) > 64 || !isWord(code) {
			return nil, usagef("%s: --code %q is not a problem code: up to 64 letters, digits and underscores, such as version_not_enabled", name, code)
		}
		q.Set("code", code)
	}
	if key != "" {
		if strings.HasPrefix(key, "sk_") || apierror.LooksLikeCredential(key) {
			// Not repeated: it is a secret, now in the shell's history.
			return nil, usagef("%s: --key takes an API key's ID (key_…, as 'svc keys list' shows), never the key: a command line is visible to every user of the machine (ps), so roll a key given there ('svc keys roll')", name)
		}
		if err := checkKeyID(key); err != nil {
			return nil, usagef("%s: --key: %v", name, err)
		}
		q.Set("api_key", key)
	}
	if route != "" {
		if len(route) > 256 || strings.ContainsFunc(route, func(r rune) bool { return r < 0x20 || r == 0x7f }) || !utf8.ValidString(route) {
			return nil, usagef("%s: --route must be a route pattern such as 'POST /v1/orders', up to 256 bytes", name)
		}
		q.Set("route", route)
	}
	var from, to time.Time
	var err error
	if since != "" {
		if from, err = parseWhen(since, now); err != nil {
			return nil, usagef("%s: --since %v", name, err)
		}
		q.Set("since", strconv.FormatInt(from.Unix(), 10))
	}
	if until != "" {
		if to, err = parseWhen(until, now); err != nil {
			return nil, usagef("%s: --until %v", name, err)
		}
		if since != "" && to.Unix() <= from.Unix() {
			return nil, usagef("%s: --until %s is not after --since %s", name, to.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339))
		}
		q.Set("until", strconv.FormatInt(to.Unix(), 10))
	}
	given := false
	f.Visit(func(fl *flag.Flag) { given = given || fl.Name == "limit" })
	switch {
	case given && (limit < 1 || limit > maxRequestsPage):
		return nil, usagef("%s: --limit %d must be between 1 and %d: the requests of one page (--all reads every page)", name, limit, maxRequestsPage)
	case given:
		q.Set("limit", strconv.Itoa(limit))
	case rf.all:
		q.Set("limit", strconv.Itoa(maxRequestsPage))
	}
	if after != "" {
		if err := checkRequestID(after); err != nil {
			return nil, usagef("%s: --starting-after: %v", name, err)
		}
		q.Set("starting_after", after)
	}
	return q, nil
}

// validStatusFilter: a status code (100 to 599) or a class of them ("4xx").
func validStatusFilter(s string) bool {
	if len(s) != 3 || s[0] < '1' || s[0] > '5' {
		return false
	}
	if l := strings.ToLower(s[1:]); l == "xx" {
		return true
	}
	return s[1] >= '0' && s[1] <= '9' && s[2] >= '0' && s[2] <= '9'
}

// isWord: letters, digits and underscores, at least one.
func isWord(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_')
	})
}

// parseWhen reads a time flag: a duration back from now ("1h") or an RFC 3339 time.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("%q must be a duration back from now, more than 0 (such as 1h)", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration back from now (1h, 30m) nor an RFC 3339 time (2026-01-02T15:04:05Z)", s)
	}
	if t.Before(time.Unix(0, 0)) {
		return time.Time{}, fmt.Errorf("%q is before 1970", s)
	}
	return t, nil
}

// checkRequestID refuses, before any request, an ID that cannot be one: it goes into a URL path.
// The alphabet is apierror's for request IDs (a server may adopt one from a layer in front).
func checkRequestID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("the request's ID is required, req_… (a response's X-Request-Id header, a problem's request_id)")
	case len(id) > 128 || id == "." || id == ".." || !isWord(strings.Map(func(r rune) rune {
		if strings.ContainsRune("-.:/", r) {
			return '_'
		}
		return r
	}, id)):
		return fmt.Errorf("%q is not a request ID: they look like req_…", id)
	case apierror.LooksLikeCredential(id):
		return fmt.Errorf("that is shaped like a credential, not a request ID: they look like req_…")
	}
	return nil
}

// printRequests prints the list as a table, one request a row.
func printRequests(w io.Writer, rows []requestJSON) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no requests match")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSTATUS\tCODE\tREQUEST\tKEY\tIDEMPOTENCY KEY\tVERSION\tLATENCY\tID")
	for _, r := range rows {
		idem := orDash(r.IdempotencyKey)
		if utf8.RuneCountInString(idem) > 40 { // a key may be 255 bytes; get shows it whole
			idem = string([]rune(idem)[:39]) + "…"
		}
		if r.Replayed {
			idem += " (replayed)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%dms\t%s\n", unixTime(&r.Created), r.Status, orDash(r.Code), requestLine(&r),
			orDash(r.APIKey), clean(idem), orDash(r.Version), r.LatencyMS, clean(r.ID))
	}
	_ = tw.Flush()
}

// requestLine is what a request asked: its method and the route pattern that served it. A pattern
// names its method ("POST /v1/orders") unless it serves every method.
func requestLine(r *requestJSON) string {
	switch {
	case r.Route == nil:
		return clean(r.Method) + " (no route)"
	case strings.Contains(*r.Route, " "):
		return clean(*r.Route)
	}
	return clean(r.Method + " " + *r.Route)
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return clean(*s)
}

func runRequestsGet(ctx context.Context, e env, args []string) error {
	var (
		cm      common
		jsonOut bool
	)
	f := newFlags(e, "svc requests get", "REQUEST_ID [flags]", `
Show what the server recorded of one request: when it arrived, its method and route, its status and
problem code, the API key's ID, its Idempotency-Key and whether the answer was a replay of the first
request's, the API version and the latency. The ID is in the response's X-Request-Id header, and in
a problem's request_id. Another licensee's request is not found, like an unknown one.`)
	cm.register(f.FlagSet)
	f.BoolVar(&jsonOut, "json", false, "print the server's answer as JSON")
	if err := f.parse(args, 1); err != nil {
		return err
	}
	id := f.arg(0)
	if err := checkRequestID(id); err != nil {
		return usagef("%s: %v", f.Name(), err)
	}
	_, c, err := apiClient(e, cm)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodGet, "/requests/"+url.PathEscape(id), nil, "")
	if err != nil {
		return err
	}
	if jsonOut {
		return printJSON(e.stdout, resp.body)
	}
	var r requestJSON
	if err := resp.decode(&r); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "request %s\n", clean(r.ID))
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	route := "none (no route served it)"
	if r.Route != nil {
		route = clean(*r.Route)
	}
	status := strconv.Itoa(r.Status)
	if t := http.StatusText(r.Status); t != "" {
		status += " " + t
	}
	replayed := "no"
	if r.Replayed {
		replayed = "yes: the answer stored for its Idempotency-Key was sent again; nothing was done a second time"
	}
	fmt.Fprintf(tw, "  time\t%s\n  method\t%s\n  route\t%s\n  status\t%s\n  code\t%s\n", unixTime(&r.Created), clean(r.Method), route, status, orNoneP(r.Code))
	fmt.Fprintf(tw, "  api key\t%s\n  idempotency key\t%s\n  replayed\t%s\n", orNoneP(r.APIKey), orNoneP(r.IdempotencyKey), replayed)
	fmt.Fprintf(tw, "  version\t%s\n  latency\t%d ms\n", orNoneP(r.Version), r.LatencyMS)
	return tw.Flush()
}

func orNoneP(s *string) string {
	if s == nil {
		return "none"
	}
	return orNone(clean(*s))
}
