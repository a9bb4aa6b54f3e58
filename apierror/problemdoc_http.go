package apierror

import (
	"bytes"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// CodeProblemTypeNotFound is the code of the 404 ProblemDocs.Handler answers for a path under its
// prefix that names no documented code.
const CodeProblemTypeNotFound = "problem_type_not_found"

// objectProblemType is the "object" member of a problem type's JSON documentation.
const objectProblemType = "problem_type"

// problemDocsCacheControl lets browsers and shared caches keep a page for an hour: the docs change
// only with a deployment.
const problemDocsCacheControl = "public, max-age=3600"

// problemDocsCSS is the pages' only style. It is inline, allowed by its hash in problemDocsCSP, so
// that the policy needs no 'unsafe-inline' and no other source; the pages read as well without it.
const problemDocsCSS = `body{font-family:system-ui,sans-serif;line-height:1.5;max-width:46rem;margin:0 auto;padding:1rem}` +
	`code{font-family:ui-monospace,monospace}table{border-collapse:collapse}` +
	`th,td{text-align:left;vertical-align:top;padding:.25rem .75rem .25rem 0}dt{font-weight:bold}`

// problemDocsCSP allows the inline style above and nothing else: no script, image, frame, form or
// base URI. TestProblemDocsCSPAllowsOnlyItsStyle keeps the hash in step with problemDocsCSS.
const problemDocsCSP = "default-src 'none'; style-src 'sha256-hC3bGU5FnD2TyMHhkfy0RnUlMJIqChpESszJHpuWA/M='; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// problemDocsTemplates are parsed on first use, so that a program that serves no docs never pays
// for them. Both pages are plain HTML with landmarks and headings, readable without the style.
var problemDocsTemplates = sync.OnceValue(func() *template.Template {
	t := template.New("").Funcs(template.FuncMap{"statusText": http.StatusText})
	template.Must(t.New("head").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.PageTitle}}</title>
<style>` + problemDocsCSS + `</style>
</head>
<body>
`))
	template.Must(t.New("statuses").Parse(
		`{{range $i, $s := .}}{{if $i}}, {{end}}{{$s}} {{statusText $s}}{{end}}`))
	template.Must(t.New("doc").Parse(`{{template "head" .}}<header>
<nav aria-label="Problem types"><a href="{{.Index}}">All problem types</a></nav>
</header>
<main>
<h1>{{.Doc.Title}}</h1>
<dl>
<dt>Code</dt>
<dd><code>{{.Doc.Code}}</code></dd>
<dt>HTTP status</dt>
<dd>{{template "statuses" .Doc.Statuses}}</dd>
<dt>Type URI</dt>
<dd><code>{{.Type}}</code></dd>
</dl>
<h2>What happened</h2>
<p>{{.Doc.Description}}</p>
<h2>How to fix it</h2>
<p>{{.Doc.Fix}}</p>
</main>
</body>
</html>
`))
	template.Must(t.New("index").Parse(`{{template "head" .}}<main>
<h1>Problem types</h1>
<p>Every error response of this API is a problem (RFC 9457) whose <code>code</code> is one of these;
its <code>type</code> is the address of the code's page.</p>
<table>
<thead>
<tr><th scope="col">Code</th><th scope="col">HTTP status</th><th scope="col">Title</th></tr>
</thead>
<tbody>
{{range .Docs}}<tr><td><a href="{{$.Index}}{{.Code}}"><code>{{.Code}}</code></a></td><td>{{template "statuses" .Statuses}}</td><td>{{.Title}}</td></tr>
{{end}}</tbody>
</table>
</main>
</body>
</html>
`))
	return t
})

// problemDocsPage is what the templates are given.
type problemDocsPage struct {
	PageTitle string
	Index     string       // the path of the index, which prefixes every code's page
	Type      string       // the type URI of Doc
	Doc       ProblemDoc   // the page's code
	Docs      []ProblemDoc // the index's codes
}

// problemTypeJSON is a ProblemDoc on the wire.
type problemTypeJSON struct {
	Object      string `json:"object"`
	Code        string `json:"code"`
	Statuses    []int  `json:"statuses"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Fix         string `json:"fix"`
	Type        string `json:"type"`
}

func problemTypeOf(doc ProblemDoc, base string) problemTypeJSON {
	return problemTypeJSON{Object: objectProblemType, Code: doc.Code, Statuses: doc.Statuses, Title: doc.Title,
		Description: doc.Description, Fix: doc.Fix, Type: base + doc.Code}
}

// Handler serves the documentation at the address the problems' type URIs name: for a Writer whose
// TypeBase is "https://api.example.com/problems/", mount it at "/problems/" (without
// http.StripPrefix: it reads the path of TypeBase from the request's path):
//
//	problems := apierror.Writer{TypeBase: "https://api.example.com/problems/"}
//	mux.Handle("/problems/", docs.Handler(problems))
//
// GET /problems/<code> answers the code's page, and GET /problems/ (or /problems, when the router
// passes it on) an index of every code. Both are HTML when the request's Accept ranks text/html above application/json (as
// a browser's does), and otherwise JSON:
//
//	{"object":"problem_type","code":"body_too_large","statuses":[413],"title":"…","description":"…",
//	 "fix":"…","type":"https://api.example.com/problems/body_too_large"}
//	{"object":"list","data":[{"object":"problem_type",…},…],"has_more":false}
//
// Answers carry Vary: Accept, Cache-Control: public, max-age=3600, nosniff and a
// Content-Security-Policy that allows no script. HEAD answers the headers alone. A path under the
// prefix that names no documented code is the 404 problem problem_type_not_found, which never repeats
// the path; a path outside it is route_not_found; any other method is 405 with Allow: GET, HEAD. The
// problems are written with problems, and a field of it left empty is taken from the Writer in the
// request's context (Writer.Handler), the type base included.
func (d *ProblemDocs) Handler(problems Writer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wr := problems
		if wr.TypeBase == "" {
			wr = wr.withDefaults(r.Context())
		}
		base := wr.TypeBase
		if base == "" {
			base = DefaultTypeBase
		}
		prefix := "/"
		if u, err := url.Parse(base); err == nil && u.Path != "" {
			prefix = u.Path
		}
		p := r.URL.Path
		var doc ProblemDoc
		index := p == prefix || p+"/" == prefix
		if !index {
			rest, under := strings.CutPrefix(p, prefix)
			if !under {
				wr.Write(w, r, RouteNotFound())
				return
			}
			var ok bool
			if doc, ok = d.Lookup(rest); !ok {
				const detail = "no problem type is documented at this address; the index of problem types lists every documented code"
				wr.Write(w, r, NotFound(CodeProblemTypeNotFound, detail,
					Path("code", CodeProblemTypeNotFound, "names no documented problem type")))
				return
			}
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			wr.Write(w, r, MethodNotAllowed(r.Method, http.MethodGet, http.MethodHead))
			return
		}
		var buf bytes.Buffer
		var err error
		html := prefersHTML(r.Header.Values("Accept"))
		switch {
		case html && index:
			err = problemDocsTemplates().ExecuteTemplate(&buf, "index",
				problemDocsPage{PageTitle: "Problem types", Index: prefix, Docs: d.All()})
		case html:
			err = problemDocsTemplates().ExecuteTemplate(&buf, "doc",
				problemDocsPage{PageTitle: doc.Code + ": " + doc.Title, Index: prefix, Type: base + doc.Code, Doc: doc})
		case index:
			all := d.All()
			list := struct {
				Object  string            `json:"object"`
				Data    []problemTypeJSON `json:"data"`
				HasMore bool              `json:"has_more"`
			}{Object: "list", Data: make([]problemTypeJSON, len(all))}
			for i, doc := range all {
				list.Data[i] = problemTypeOf(doc, base)
			}
			err = json.NewEncoder(&buf).Encode(list)
		default:
			err = json.NewEncoder(&buf).Encode(problemTypeOf(doc, base))
		}
		if err != nil {
			wr.Write(w, r, err) // a template that fails is a bug: the opaque 500, logged
			return
		}
		h := w.Header()
		if html {
			h.Set("Content-Type", "text/html; charset=utf-8")
		} else {
			h.Set("Content-Type", "application/json")
		}
		h.Set("Content-Length", strconv.Itoa(buf.Len()))
		h.Add("Vary", "Accept")
		h.Set("Cache-Control", problemDocsCacheControl)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", problemDocsCSP)
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(buf.Bytes())
		}
	})
}

// prefersHTML reports whether Accept ranks text/html above application/json (RFC 9110 §12.5.1): each
// takes the weight of the most specific range that matches it (text/html, then text/*, then */*),
// and one that no range matches weighs 0. A tie — no Accept, or */* alone — is JSON.
func prefersHTML(accept []string) bool {
	return acceptWeight(accept, "text", "html") > acceptWeight(accept, "application", "json")
}

// acceptWeight is the weight Accept gives the media type typ/sub, in thousandths.
func acceptWeight(accept []string, typ, sub string) int {
	weight, specificity := 0, -1
	for _, v := range accept {
		for mr := range strings.SplitSeq(v, ",") {
			mt, params, _ := strings.Cut(mr, ";")
			t, s, ok := strings.Cut(strings.TrimSpace(mt), "/")
			if !ok {
				continue
			}
			var spec int
			switch {
			case strings.EqualFold(t, typ) && strings.EqualFold(s, sub):
				spec = 2
			case strings.EqualFold(t, typ) && s == "*":
				spec = 1
			case t == "*" && s == "*":
				spec = 0
			default:
				continue
			}
			q, ok := qValue(params)
			if !ok {
				continue // a malformed weight: the range is ignored
			}
			if spec > specificity || spec == specificity && q > weight {
				weight, specificity = q, spec
			}
		}
	}
	return weight
}

// qValue reads the weight among a media range's parameters ("q=0.8;level=1"), in thousandths: 1000
// when there is none, and ok false when it is not an RFC 9110 qvalue (0 to 1, at most three decimals).
func qValue(params string) (q int, ok bool) {
	for p := range strings.SplitSeq(params, ";") {
		name, value, _ := strings.Cut(p, "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		value = strings.TrimSpace(value)
		whole, frac, _ := strings.Cut(value, ".")
		if len(frac) > 3 || (whole != "0" && whole != "1") {
			return 0, false
		}
		n := 0
		for i := range 3 {
			d := byte('0')
			if i < len(frac) {
				d = frac[i]
			}
			if d < '0' || d > '9' {
				return 0, false
			}
			n = n*10 + int(d-'0')
		}
		if whole == "1" {
			if n != 0 {
				return 0, false
			}
			return 1000, true
		}
		return n, true
	}
	return 1000, true
}
