package portal

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/svcplatform/conventions/apierror"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// view is what every page's template gets.
type view struct {
	Title   string
	Nav     string // the menu entry to mark current
	Section string // the form a problem is about, on pages with several
	Problem *problemView
	Notice  string
	Data    any

	s      *Session // nil: nobody is signed in
	portal *Portal
}

// Portal is the portal's name (Options.Title).
func (v *view) Portal() string { return v.portal.title }

// Prefix is the path the portal is served under.
func (v *view) Prefix() string { return v.portal.prefix }

// Asset is the path of an embedded asset, versioned by its content so that it may be cached.
func (v *view) Asset(name string) string {
	return v.portal.prefix + "/assets/" + name + "?v=" + v.portal.assetVersion
}

// SignedIn reports whether a session is open.
func (v *view) SignedIn() bool { return v.s != nil }

// Env names the session's environment; Sandbox reports whether it is the sandbox.
func (v *view) Env() string {
	if v.s == nil {
		return ""
	}
	return envName(v.s.Environment)
}

// Sandbox reports whether the session is the sandbox's.
func (v *view) Sandbox() bool { return v.s != nil && v.Env() == "Sandbox" }

// Can reports whether the session has perm.
func (v *view) Can(perm string) bool { return v.s != nil && v.s.can(perm) }

// Key draws the Idempotency-Key of one form of the page: each form shown gets its own, so that the
// same form sent twice acts once, and two forms of one page (a page brought back by the browser's
// Back button, its other form sent) are two requests.
func (v *view) Key() string { return formKeys() }

// problemView is a problem as the pages show it: its summary, and its violations by form field.
type problemView struct {
	Title, Detail, Code, RequestID string
	// Fields holds the violations of each form field; General those of no one field.
	Fields  map[string][]string
	General []string
}

// For returns the messages about field.
func (pv *problemView) For(field string) []string {
	if pv == nil {
		return nil
	}
	return pv.Fields[field]
}

// problemOf is pe as the pages show it; nil for none.
func problemOf(pe *apierror.Error) *problemView {
	if pe == nil {
		return nil
	}
	pv := &problemView{Title: pe.Title, Detail: pe.Detail, Code: pe.Code, RequestID: pe.RequestID, Fields: map[string][]string{}}
	if pv.Title == "" {
		pv.Title = http.StatusText(pe.Status)
	}
	for _, v := range pe.Errors {
		if f := fieldOf(v); f != "" {
			pv.Fields[f] = append(pv.Fields[f], v.Detail)
		} else if v.Detail != pe.Detail {
			pv.General = append(pv.General, v.Detail)
		}
	}
	return pv
}

var funcs = template.FuncMap{
	"unix": formatUnix,
	"unixp": func(t *int64) string {
		if t == nil {
			return ""
		}
		return formatUnix(*t)
	},
	"percent": func(x *float64) string {
		if x == nil {
			return "—"
		}
		return fmt.Sprintf("%.1f%%", math.Floor(*x*1000)/10)
	},
	"deref": func(p *int) string {
		if p == nil {
			return "—"
		}
		return fmt.Sprint(*p)
	},
	"derefs": func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	},
	"pathesc": url.PathEscape,
	"seconds": func(p *int64) string {
		if p == nil {
			return "—"
		}
		return (time.Duration(*p) * time.Second).String()
	},
	"rollExpiries": func() any { return rollExpiries },
	"list":         func(s ...string) []string { return s },
	"fields": func(f endpointForm, pv *problemView, types []eventTypeJSON, versions []string) fieldsData {
		return fieldsData{Form: f, Problem: pv, Types: types, Versions: versions}
	},
	"sectionProblem": func(v *view, section string) *problemView {
		if v.Section != section {
			return nil
		}
		return v.Problem
	},
	"rate": func(name, label, value string, pv *problemView) rateField {
		return rateField{Name: name, Label: label, Value: value, Errors: pv.For(name)}
	},
}

// fieldsData is what the endpoint form's fields template gets.
type fieldsData struct {
	Form     endpointForm
	Problem  *problemView
	Types    []eventTypeJSON
	Versions []string
}

// rateField is one field of the sandbox's fault form.
type rateField struct {
	Name, Label, Value string
	Errors             []string
}

// parsePages parses each page's template with the layout.
func parsePages() (map[string]*template.Template, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/_*.html")
	if err != nil {
		return nil, fmt.Errorf("portal: parsing the layout: %w", err)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".html")
		if base == "layout" || strings.HasPrefix(base, "_") {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, fmt.Errorf("portal: parsing %s: %w", n, err)
		}
		pages[base] = t
	}
	return pages, nil
}

// render writes page with v and status, as HTML.
func (p *Portal) render(w http.ResponseWriter, r *http.Request, status int, page string, v *view) {
	v.portal = p
	var buf bytes.Buffer
	if err := p.pages[page].ExecuteTemplate(&buf, "layout.html", v); err != nil {
		p.log.Error("portal: rendering a page", "page", page, "error", err)
		http.Error(w, "The page could not be shown.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// assetVersion is a short hash of every asset: it changes whenever one does.
func assetVersion() string {
	h := sha256.New()
	_ = fs.WalkDir(assetFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := assetFS.ReadFile(p)
			h.Write([]byte(p))
			h.Write(b)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// asset serves an embedded stylesheet, script or icon.
func (p *Portal) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := assetFS.ReadFile("assets/" + name)
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".svg":
		w.Header().Set("Content-Type", "image/svg+xml")
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	if r.URL.Query().Get("v") == p.assetVersion {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	}
	_, _ = w.Write(b)
}

// sparkline is the day's success rate, hour by hour, drawn as an inline SVG: one path through the
// hours that had attempts (an hour without any breaks it), on a 0–100% scale.
type sparkline struct {
	Path   string // the SVG path's d attribute: numbers and M/L only
	Dots   []point
	Label  string // what it shows, for assistive technology
	Width  int
	Height int
	Empty  bool
}

type point struct{ X, Y string }

// newSparkline draws hours (oldest first) as of now.
func newSparkline(hours []hourJSON, _ time.Time) sparkline {
	const w, h, pad = 120, 28, 2
	s := sparkline{Width: w, Height: h, Empty: true}
	if len(hours) == 0 {
		s.Label = "No statistics"
		return s
	}
	var b strings.Builder
	prev := false
	delivered, attempts := 0, 0
	for i, hr := range hours {
		if hr.Attempts == 0 || hr.SuccessRate == nil {
			prev = false
			continue
		}
		s.Empty = false
		delivered += hr.Delivered
		attempts += hr.Attempts
		x := pad + float64(i)*float64(w-2*pad)/float64(max(len(hours)-1, 1))
		y := pad + (1-*hr.SuccessRate)*float64(h-2*pad)
		xs, ys := fmt.Sprintf("%.1f", x), fmt.Sprintf("%.1f", y)
		if prev {
			b.WriteString(" L" + xs + " " + ys)
		} else {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString("M" + xs + " " + ys)
			s.Dots = append(s.Dots, point{xs, ys})
		}
		prev = true
	}
	s.Path = b.String()
	if s.Empty {
		s.Label = "No deliveries in the last 24 hours"
	} else {
		s.Label = fmt.Sprintf("Success rate over the last 24 hours, hour by hour: %d of %d attempts delivered", delivered, attempts)
	}
	return s
}
