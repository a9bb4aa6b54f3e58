package apierror_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

// orderDocs stand for a service's own entries.
var orderDocs = []apierror.ProblemDoc{{
	Code: "order_not_found", Statuses: []int{404}, Title: "Order not found",
	Description: "No order of this account has the ID in the path.",
	Fix:         "Use the ID returned when the order was created.",
}}

func testDocs(t *testing.T, extra ...apierror.ProblemDoc) *apierror.ProblemDocs {
	t.Helper()
	docs, err := apierror.NewProblemDocs(slices.Concat(apierror.LibraryProblemDocs(), orderDocs, extra)...)
	require.NoError(t, err)
	return docs
}

func TestNewProblemDocsRefusesBadEntries(t *testing.T) {
	good := orderDocs[0]
	with := func(change func(*apierror.ProblemDoc)) apierror.ProblemDoc {
		d := good
		d.Statuses = slices.Clone(good.Statuses)
		change(&d)
		return d
	}
	tests := []struct {
		name string
		docs []apierror.ProblemDoc
		want []string // each must be in the error
	}{
		{"empty title", []apierror.ProblemDoc{with(func(d *apierror.ProblemDoc) { d.Title = "" })},
			[]string{`entry 0 (code "order_not_found"): the title is empty`}},
		{"blank description", []apierror.ProblemDoc{with(func(d *apierror.ProblemDoc) { d.Description = " \n\t" })},
			[]string{`entry 0 (code "order_not_found"): the description is empty`}},
		{"empty fix", []apierror.ProblemDoc{with(func(d *apierror.ProblemDoc) { d.Fix = "" })},
			[]string{`entry 0 (code "order_not_found"): the fix is empty`}},
		{"empty code", []apierror.ProblemDoc{with(func(d *apierror.ProblemDoc) { d.Code = "" })},
			[]string{`entry 0 (code ""): the code is not a snake_case identifier`}},
		{"upper-case code", []apierror.ProblemDoc{with(func(d *apierror.ProblemDoc) { d.Code = "OrderNotFound" })},
			[]string{`entry 0 (code "OrderNotFound"): the code is not a snake_case identifier`}},
		{"kebab-case code", []apierror.ProblemDoc{with(func(d *apierror.ProblemDoc) { d.Code = "order-not-found" })},
			[]string{`(code "order-not-found"): the code is not a snake_case identifier`}},
		{"markup in the code", []apierror.ProblemDoc{with(func(d *apierror.ProblemDoc) { d.Code = "<script>" })},
			[]string{`(code "<script>"): the code is not a snake_case identifier`}},
		{"no status", []apierror.ProblemDoc{with(func(d *apierror.ProblemDoc) { d.Statuses = nil })},
			[]string{`entry 0 (code "order_not_found"): no status`}},
		{"a 2xx", []apierror.ProblemDoc{with(func(d *apierror.ProblemDoc) { d.Statuses = []int{200} })},
			[]string{`status 200 is not a 4xx or 5xx`}},
		{"399", []apierror.ProblemDoc{with(func(d *apierror.ProblemDoc) { d.Statuses = []int{404, 399} })},
			[]string{`status 399 is not a 4xx or 5xx`}},
		{"600", []apierror.ProblemDoc{with(func(d *apierror.ProblemDoc) { d.Statuses = []int{600} })},
			[]string{`status 600 is not a 4xx or 5xx`}},
		{"status twice", []apierror.ProblemDoc{with(func(d *apierror.ProblemDoc) { d.Statuses = []int{404, 404} })},
			[]string{`status 404 is listed twice`}},
		{"duplicate code", []apierror.ProblemDoc{good, with(func(d *apierror.ProblemDoc) {})},
			[]string{`entry 1 (code "order_not_found"): the code is documented already, by entry 0`}},
		{"a library code again", append(apierror.LibraryProblemDocs(), with(func(d *apierror.ProblemDoc) { d.Code = "rate_limited" })),
			[]string{`(code "rate_limited"): the code is documented already`}},
		{"every fault reported", []apierror.ProblemDoc{
			with(func(d *apierror.ProblemDoc) { d.Title, d.Fix = "", "" }),
			good,
			with(func(d *apierror.ProblemDoc) { d.Code = "x_" }),
		}, []string{"entry 0", "the title is empty", "the fix is empty", `entry 2 (code "x_")`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := apierror.NewProblemDocs(tt.docs...)
			require.Error(t, err)
			require.Nil(t, docs)
			require.ErrorIs(t, err, apierror.ErrInvalidProblemDoc)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestProblemDocsIsACopy(t *testing.T) {
	in := []apierror.ProblemDoc{
		{Code: "b_code", Statuses: []int{409, 400}, Title: "B", Description: "b happened", Fix: "fix b"},
		{Code: "a_code", Statuses: []int{500}, Title: "A", Description: "a happened", Fix: "fix a"},
	}
	docs, err := apierror.NewProblemDocs(in...)
	require.NoError(t, err)
	in[0].Title, in[0].Statuses[0] = "changed", 599

	all := docs.All()
	require.Equal(t, []string{"a_code", "b_code"}, []string{all[0].Code, all[1].Code}, "sorted by code")
	require.Equal(t, []int{400, 409}, all[1].Statuses, "statuses sorted, the caller's change not seen")
	all[1].Statuses[0] = 418

	b, ok := docs.Lookup("b_code")
	require.True(t, ok)
	require.Equal(t, "B", b.Title)
	require.Equal(t, []int{400, 409}, b.Statuses)
	b.Statuses[0] = 418
	b, _ = docs.Lookup("b_code")
	require.Equal(t, []int{400, 409}, b.Statuses)

	_, ok = docs.Lookup("c_code")
	require.False(t, ok)
}

func TestLibraryProblemDocs(t *testing.T) {
	lib := apierror.LibraryProblemDocs()
	docs, err := apierror.NewProblemDocs(lib...)
	require.NoError(t, err)
	require.Len(t, docs.All(), len(lib))

	// Every call is a new slice: a service that appends to or edits it changes no one else's.
	lib[0].Title = "changed"
	require.NotEqual(t, "changed", apierror.LibraryProblemDocs()[0].Title)

	for _, d := range apierror.LibraryProblemDocs() {
		require.NotContains(t, d.Description+d.Fix, "  ", "%s: a double space", d.Code)
		for _, s := range []string{d.Title, d.Description, d.Fix} {
			require.Equal(t, strings.TrimSpace(s), s, "%s: leading or trailing space", d.Code)
		}
		require.False(t, strings.HasSuffix(d.Title, "."), "%s: a title is not a sentence", d.Code)
		require.True(t, strings.HasSuffix(d.Description, "."), "%s: the description ends its sentence", d.Code)
		require.True(t, strings.HasSuffix(d.Fix, "."), "%s: the fix ends its sentence", d.Code)
	}

	// The statuses documented for apierror's own problems are the ones its builders write.
	for _, p := range []*apierror.Error{
		apierror.MissingField("/a"), apierror.MissingHeader("X-A"), apierror.MissingQuery("a"),
		apierror.MalformedJSON(1, "x"), apierror.WrongType("/a", "string", "number"), apierror.UnknownField("/a"),
		apierror.BodyTooLarge(10), apierror.RateLimited(time.Second, ""), apierror.Internal(),
		apierror.Unavailable(time.Second, "", "down"), apierror.RouteNotFound(), apierror.MethodNotAllowed("PUT", "GET"),
		apierror.Invalid(apierror.Body("/a", "x", "y"), apierror.Body("/b", "x", "y")),
	} {
		d, ok := docs.Lookup(p.Code)
		require.True(t, ok, p.Code)
		require.Contains(t, d.Statuses, p.Status, p.Code)
	}
}

// get serves one request through the docs handler, behind the Writer of a service whose TypeBase is
// https://api.example.com/problems/.
func get(t *testing.T, docs *apierror.ProblemDocs, method, target, accept string) *http.Response {
	t.Helper()
	problems := apierror.Writer{TypeBase: "https://api.example.com/problems/"}
	mux := http.NewServeMux()
	mux.Handle("/problems/", docs.Handler(problems))
	mux.Handle("/problems", docs.Handler(problems))
	req := httptest.NewRequest(method, target, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	apierror.WithRequestID(problems.ServeMux(mux)).ServeHTTP(rec, req)
	return rec.Result()
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

func TestProblemDocsNegotiatesContent(t *testing.T) {
	docs := testDocs(t)
	tests := []struct {
		name   string
		accept []string
		html   bool
	}{
		{"no Accept", nil, false},
		{"*/*", []string{"*/*"}, false},
		{"application/json", []string{"application/json"}, false},
		{"text/html", []string{"text/html"}, true},
		{"a browser's", []string{browserAccept}, true},
		{"curl's", []string{"*/*"}, false},
		{"text/*", []string{"text/*"}, true},
		{"case-insensitive", []string{"TEXT/HTML"}, true},
		{"html refused with q=0", []string{"text/html;q=0"}, false},
		{"html refused, anything else welcome", []string{"text/html;q=0, */*"}, false},
		{"html refused beside a browser's ranges", []string{"text/html;q=0,application/xhtml+xml,*/*;q=0.8"}, false},
		{"json weighs more", []string{"text/html;q=0.4, application/json;q=0.5"}, false},
		{"html weighs more", []string{"application/json;q=0.5, text/html"}, true},
		{"a tie is JSON", []string{"application/json, text/html"}, false},
		{"the most specific range decides", []string{"text/html;q=0.2, */*;q=1"}, false},
		{"text/* below an exact json", []string{"text/*;q=0.9, application/json"}, false},
		{"spaces and a level", []string{"text/html ; level=1 ; q=0.7 , application/json ; q=0.6"}, true},
		{"an invalid weight is ignored", []string{"text/html;q=1.5"}, false},
		{"a weight with four decimals is ignored", []string{"text/html;q=0.5000, application/json;q=0.1"}, false},
		{"a weight of 1.000", []string{"text/html;q=1.000, application/json;q=0.999"}, true},
		{"several Accept headers", []string{"application/json;q=0.1", "text/html"}, true},
		{"neither acceptable", []string{"image/png"}, false},
		{"garbage", []string{";;,/,q=,text/"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, target := range []string{"/problems/order_not_found", "/problems/"} {
				req := httptest.NewRequest(http.MethodGet, target, nil)
				for _, a := range tt.accept {
					req.Header.Add("Accept", a)
				}
				rec := httptest.NewRecorder()
				docs.Handler(apierror.Writer{TypeBase: "https://api.example.com/problems/"}).ServeHTTP(rec, req)
				require.Equal(t, http.StatusOK, rec.Code, target)
				ct := rec.Header().Get("Content-Type")
				if tt.html {
					require.Equal(t, "text/html; charset=utf-8", ct, target)
					require.True(t, strings.HasPrefix(rec.Body.String(), "<!DOCTYPE html>"), target)
				} else {
					require.Equal(t, "application/json", ct, target)
					require.True(t, json.Valid(rec.Body.Bytes()), target)
				}
				require.Equal(t, []string{"Accept"}, rec.Header().Values("Vary"))
			}
		})
	}
}

func TestProblemDocsJSON(t *testing.T) {
	resp := get(t, testDocs(t), http.MethodGet, "/problems/body_too_large", "application/json")
	body := readBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, strconv.Itoa(len(body)), resp.Header.Get("Content-Length"))
	require.Equal(t, "Accept", resp.Header.Get("Vary"))
	require.Equal(t, "public, max-age=3600", resp.Header.Get("Cache-Control"))
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")

	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	d, _ := testDocs(t).Lookup("body_too_large")
	require.Equal(t, map[string]any{
		"object": "problem_type", "code": "body_too_large", "statuses": []any{413.0}, "title": d.Title,
		"description": d.Description, "fix": d.Fix, "type": "https://api.example.com/problems/body_too_large",
	}, got)
	// The members come in the order documented.
	require.True(t, strings.HasPrefix(body, `{"object":"problem_type","code":"body_too_large","statuses":[413],"title":`), body)

	// The type a problem is written with is the address of its page.
	rec := httptest.NewRecorder()
	apierror.Writer{TypeBase: "https://api.example.com/problems/"}.Write(rec, httptest.NewRequest(http.MethodPost, "/", nil), apierror.BodyTooLarge(10))
	var p struct{ Type string }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
	require.Equal(t, got["type"], p.Type)
}

func TestProblemDocsIndexListsEveryCode(t *testing.T) {
	docs := testDocs(t)
	all := docs.All()
	for _, target := range []string{"/problems/", "/problems"} {
		t.Run("json "+target, func(t *testing.T) {
			resp := get(t, docs, http.MethodGet, target, "")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			var list struct {
				Object  string `json:"object"`
				Data    []map[string]any
				HasMore *bool `json:"has_more"`
			}
			require.NoError(t, json.Unmarshal([]byte(readBody(t, resp)), &list))
			require.Equal(t, "list", list.Object)
			require.NotNil(t, list.HasMore)
			require.False(t, *list.HasMore)
			require.Len(t, list.Data, len(all))
			for i, d := range all {
				require.Equal(t, d.Code, list.Data[i]["code"])
				require.Equal(t, "problem_type", list.Data[i]["object"])
				require.Equal(t, "https://api.example.com/problems/"+d.Code, list.Data[i]["type"])
			}
		})
		t.Run("html "+target, func(t *testing.T) {
			resp := get(t, docs, http.MethodGet, target, browserAccept)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			body := readBody(t, resp)
			for _, d := range all {
				require.Contains(t, body, `<a href="/problems/`+d.Code+`"><code>`+d.Code+`</code></a>`)
			}
			require.Equal(t, len(all), strings.Count(body, "<tr><td>"))
			require.Contains(t, body, `<html lang="en">`)
			require.Contains(t, body, "<title>Problem types</title>")
			require.Contains(t, body, "<main>")
			require.Contains(t, body, "<h1>Problem types</h1>")
			require.Contains(t, body, `<th scope="col">Code</th>`)
		})
	}
}

func TestProblemDocsHTMLPage(t *testing.T) {
	resp := get(t, testDocs(t), http.MethodGet, "/problems/version_unknown", browserAccept)
	body := readBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, strconv.Itoa(len(body)), resp.Header.Get("Content-Length"))
	require.Equal(t, "Accept", resp.Header.Get("Vary"))
	require.Equal(t, "public, max-age=3600", resp.Header.Get("Cache-Control"))
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	for _, want := range []string{
		`<html lang="en">`, `<meta charset="utf-8">`, "<title>version_unknown: Unknown API version</title>",
		`<nav aria-label="Problem types"><a href="/problems/">All problem types</a></nav>`,
		"<main>", "<h1>Unknown API version</h1>", "<dd><code>version_unknown</code></dd>",
		"<dd>400 Bad Request, 404 Not Found</dd>",
		"<dd><code>https://api.example.com/problems/version_unknown</code></dd>",
		"<h2>What happened</h2>", "<h2>How to fix it</h2>",
	} {
		require.Contains(t, body, want)
	}
	require.NotContains(t, body, "<script")
}

func TestProblemDocsCSPAllowsOnlyItsStyle(t *testing.T) {
	resp := get(t, testDocs(t), http.MethodGet, "/problems/rate_limited", "text/html")
	body := readBody(t, resp)
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"} {
		require.Contains(t, csp, want)
	}
	require.NotContains(t, csp, "script-src")
	require.NotContains(t, csp, "unsafe")
	styles := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindAllStringSubmatch(body, -1)
	require.Len(t, styles, 1)
	sum := sha256.Sum256([]byte(styles[0][1]))
	require.Contains(t, csp, "style-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'",
		"the CSP's hash must be the inline style's: update problemDocsCSP")
}

func TestProblemDocsEscapesHTML(t *testing.T) {
	const evil = `<script>alert("x")</script> & 'quotes' <img src=x onerror=alert(1)>`
	docs := testDocs(t, apierror.ProblemDoc{
		Code: "evil_doc", Statuses: []int{400}, Title: "T " + evil, Description: "D " + evil, Fix: "F " + evil,
	})
	for _, target := range []string{"/problems/evil_doc", "/problems/"} {
		body := readBody(t, get(t, docs, http.MethodGet, target, "text/html"))
		require.NotContains(t, body, "<script")
		require.NotContains(t, body, "<img")
		require.Contains(t, body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &#39;quotes&#39; &lt;img")
	}
	body := readBody(t, get(t, docs, http.MethodGet, "/problems/evil_doc", "application/json"))
	require.NotContains(t, body, "<script", "JSON escapes <, > and & too")
	var got struct{ Title, Description, Fix string }
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Equal(t, "F "+evil, got.Fix)
}

func TestProblemDocsUnknownCode(t *testing.T) {
	docs := testDocs(t)
	tests := []struct {
		name, target, code string
	}{
		{"unknown code", "/problems/no_such_code", apierror.CodeProblemTypeNotFound},
		{"markup", "/problems/%3Cscript%3Ealert(1)%3C%2Fscript%3E", apierror.CodeProblemTypeNotFound},
		{"a key pasted", "/problems/sk_live_0123456789abcdefghij", apierror.CodeProblemTypeNotFound},
		{"a deeper path", "/problems/rate_limited/more", apierror.CodeProblemTypeNotFound},
		{"upper case", "/problems/RATE_LIMITED", apierror.CodeProblemTypeNotFound},
	}
	for _, tt := range tests {
		for _, accept := range []string{"", browserAccept} {
			t.Run(tt.name+" "+accept, func(t *testing.T) {
				resp := get(t, docs, http.MethodGet, tt.target, accept)
				require.Equal(t, http.StatusNotFound, resp.StatusCode)
				p := conforming(t, resp)
				require.Equal(t, tt.code, p.Code)
				require.Len(t, p.Errors, 1)
				require.Equal(t, apierror.LocationPath, p.Errors[0].Location)
				require.Equal(t, "code", p.Errors[0].Name)
				body, _ := json.Marshal(p)
				require.NotContains(t, string(body), "script")
				require.NotContains(t, string(body), "sk_live")
				require.NotContains(t, string(body), "no_such_code")
				require.Empty(t, resp.Header.Get("Cache-Control"))
			})
		}
	}

	// A path outside the type base's is not the docs' to answer.
	rec := httptest.NewRecorder()
	docs.Handler(apierror.Writer{TypeBase: "https://api.example.com/problems/"}).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/errors/rate_limited", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	p := conforming(t, rec.Result())
	require.Equal(t, apierror.CodeRouteNotFound, p.Code)
}

func TestProblemDocsHead(t *testing.T) {
	docs := testDocs(t)
	for _, target := range []string{"/problems/rate_limited", "/problems/"} {
		for _, accept := range []string{"", "text/html"} {
			getResp := get(t, docs, http.MethodGet, target, accept)
			getBody := readBody(t, getResp)
			resp := get(t, docs, http.MethodHead, target, accept)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Empty(t, readBody(t, resp), "HEAD %s", target)
			require.Equal(t, strconv.Itoa(len(getBody)), resp.Header.Get("Content-Length"))
			for _, h := range []string{"Content-Type", "Vary", "Cache-Control", "X-Content-Type-Options", "Content-Security-Policy"} {
				require.Equal(t, getResp.Header.Get(h), resp.Header.Get(h), h)
			}
		}
	}
}

func TestProblemDocsOtherMethods(t *testing.T) {
	docs := testDocs(t)
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		for _, target := range []string{"/problems/rate_limited", "/problems/"} {
			resp := get(t, docs, method, target, "")
			require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", method, target)
			require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
			p := conforming(t, resp)
			require.Equal(t, apierror.CodeMethodNotAllowed, p.Code)
		}
	}
}

func TestProblemDocsTypeBaseFromContext(t *testing.T) {
	docs := testDocs(t)
	service := apierror.Writer{TypeBase: "https://pay.example/docs/errors/"}
	h := service.Handler(docs.Handler(apierror.Writer{}))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/docs/errors/order_not_found", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	var got struct{ Type string }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	require.Equal(t, "https://pay.example/docs/errors/order_not_found", got.Type)

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/docs/errors/no_such_code", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	var p struct{ Type string }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
	require.Equal(t, "https://pay.example/docs/errors/problem_type_not_found", p.Type, "the 404's own type is documented")

	// Without a Writer anywhere, DefaultTypeBase: the docs answer under /problems/.
	rec = httptest.NewRecorder()
	docs.Handler(apierror.Writer{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/problems/rate_limited", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	require.Equal(t, apierror.DefaultTypeBase+"rate_limited", got.Type)
}

func TestProblemDocsZeroValue(t *testing.T) {
	for name, docs := range map[string]*apierror.ProblemDocs{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			_, ok := docs.Lookup("rate_limited")
			require.False(t, ok)
			require.Empty(t, docs.All())
			resp := get(t, docs, http.MethodGet, "/problems/", "")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.JSONEq(t, `{"object":"list","data":[],"has_more":false}`, readBody(t, resp))
			resp = get(t, docs, http.MethodGet, "/problems/rate_limited", "")
			require.Equal(t, http.StatusNotFound, resp.StatusCode)
		})
	}
}

func TestProblemDocsErrorsAreJoined(t *testing.T) {
	_, err := apierror.NewProblemDocs(apierror.ProblemDoc{}, apierror.ProblemDoc{})
	var joined interface{ Unwrap() []error }
	require.True(t, errors.As(err, &joined))
	require.Greater(t, len(joined.Unwrap()), 2, "one error per fault")
}
