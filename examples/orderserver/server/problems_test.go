package server

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
)

// TestServerProblemCodesDocumented: every code constant this package declares has documentation in
// the server's registry, and every code the registry documents beyond the library's is one the
// package declares: nothing undocumented, nothing stale.
func TestServerProblemCodesDocumented(t *testing.T) {
	docs, err := newProblemDocs()
	require.NoError(t, err)
	declared := map[string]bool{}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		f, err := parser.ParseFile(fset, name, src, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range spec.Names {
				if !strings.HasPrefix(id.Name, "Code") || i >= len(spec.Values) {
					continue
				}
				if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					code, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					declared[code] = true
					_, ok := docs.Lookup(code)
					require.True(t, ok, "%s: code %q (%s) has no documentation in serverProblemDocs", fset.Position(id.Pos()), code, id.Name)
				}
			}
			return true
		})
	}
	require.NotEmpty(t, declared)
	for _, d := range serverProblemDocs {
		require.True(t, declared[d.Code], "serverProblemDocs documents %q, which this package no longer declares", d.Code)
	}
}

// TestOpenAPIProblemCodesDocumented: every code an operation of either version's document lists in
// x-problem-codes, and every code a shared response lists, has documentation in the server's
// registry under a status of the response it is listed for ("5XX": any 5xx), and its type URI's page
// is served: a client that reads a code in the document finds what it means.
func TestOpenAPIProblemCodesDocumented(t *testing.T) {
	ts := newTestServer(t)
	docs, err := newProblemDocs()
	require.NoError(t, err)
	matches := func(key string, statuses []int) bool {
		for _, s := range statuses {
			if k := strconv.Itoa(s); k == key || (strings.HasSuffix(key, "XX") && k[:1] == key[:1]) {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	check := func(where, key string, codes []string) {
		t.Helper()
		require.NotEmpty(t, codes, "%s %s lists no code", where, key)
		for _, code := range codes {
			doc, ok := docs.Lookup(code)
			require.True(t, ok, "%s lists %s under %s, which the server's registry does not document (newProblemDocs)", where, code, key)
			require.True(t, matches(key, doc.Statuses), "%s lists %s under %s, which the registry documents for %v", where, code, key, doc.Statuses)
			seen[code] = true
		}
	}
	for _, v := range []string{"v1", "v2"} {
		w := ts.do(http.MethodGet, "/"+v+"/openapi.json", "", "", "")
		require.Equal(t, http.StatusOK, w.Code)
		var doc struct {
			Paths      map[string]map[string]json.RawMessage `json:"paths"`
			Components struct {
				Responses map[string]struct {
					Codes *[]string `json:"x-problem-codes"`
				} `json:"responses"`
			} `json:"components"`
		}
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &doc))
		operations := 0
		for path, item := range doc.Paths {
			for method, raw := range item {
				var op struct {
					Responses map[string]json.RawMessage `json:"responses"`
					Codes     map[string][]string        `json:"x-problem-codes"`
				}
				require.NoError(t, json.Unmarshal(raw, &op))
				where := strings.ToUpper(method) + " " + path
				for key := range op.Responses {
					if key[0] == '4' || key[0] == '5' {
						require.Contains(t, op.Codes, key, "%s answers %s, and lists no code for it", where, key)
					}
				}
				for key, codes := range op.Codes {
					check(where, key, codes)
				}
				operations++
			}
		}
		require.Greater(t, operations, 30, v)
		for name, r := range doc.Components.Responses {
			if r.Codes != nil {
				for _, code := range *r.Codes {
					_, ok := docs.Lookup(code)
					require.True(t, ok, "%s: components.responses.%s lists %s, which the registry does not document", v, name, code)
				}
			}
		}
	}
	// Each code's type URI is a page of the server's.
	for code := range seen {
		r := httptest.NewRequest(http.MethodGet, ProblemsPath+code, nil)
		rec := httptest.NewRecorder()
		ts.Handler().ServeHTTP(rec, r)
		require.Equal(t, http.StatusOK, rec.Code, "%s%s", ProblemsPath, code)
	}
}

// TestProblemTypeResolves: the type URI of a problem the server answers is an address of the
// server's own, which answers 200 with the code's documentation, HTML to a browser and JSON
// otherwise, without a credential; an unknown code is a located 404.
func TestProblemTypeResolves(t *testing.T) {
	s, err := New(Config{BaseURL: "https://orders.example.test", Now: func() time.Time { return time.Unix(1767225600, 0) },
		Webhooks: WebhookOptions{SandboxGuard: loopbackGuard()}})
	require.NoError(t, err)
	c, err := s.IssueCredentials(context.Background(), apikey.Sandbox)
	require.NoError(t, err)
	ts := &testServer{Server: s, key: c.APIKey}

	w := ts.do("GET", "/v2/orders/ord_nobody", ts.key, "", "")
	require.Equal(t, http.StatusNotFound, w.Code)
	var p apierror.Error
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
	require.Equal(t, "https://orders.example.test/problems/"+CodeOrderNotFound, p.Type)
	u, err := url.Parse(p.Type)
	require.NoError(t, err)

	get := func(path, accept string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, r)
		return rec
	}
	page := get(u.Path, "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8")
	require.Equal(t, http.StatusOK, page.Code, page.Body.String())
	require.True(t, strings.HasPrefix(page.Header().Get("Content-Type"), "text/html"))
	require.Contains(t, page.Body.String(), "Order not found")

	js := get(u.Path, "")
	require.Equal(t, http.StatusOK, js.Code)
	var doc struct {
		Code, Title, Description, Fix, Type string
	}
	require.NoError(t, json.Unmarshal(js.Body.Bytes(), &doc))
	require.Equal(t, CodeOrderNotFound, doc.Code)
	require.Equal(t, p.Type, doc.Type)
	require.NotEmpty(t, doc.Fix)

	// A library code resolves the same way.
	w = ts.do("GET", "/v2/orders/ord_1", "", "", "")
	require.Equal(t, http.StatusUnauthorized, w.Code)
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
	u, err = url.Parse(p.Type)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, get(u.Path, "").Code, p.Type)

	index := get(strings.TrimSuffix(ProblemsPath, "/"), "")
	require.Equal(t, http.StatusOK, index.Code)
	require.Contains(t, index.Body.String(), CodeEventsQuotaExceeded)

	missing := get(ProblemsPath+"no_such_code", "")
	require.Equal(t, http.StatusNotFound, missing.Code)
	require.NoError(t, apierror.Check(missing.Code, missing.Header(), missing.Body.Bytes()))
}
