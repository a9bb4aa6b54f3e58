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
