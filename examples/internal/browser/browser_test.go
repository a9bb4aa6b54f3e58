package browser

import (
	"fmt"
	"html"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// The policy the portal's pages are served with: no inline script, no eval, no inline style.
const strictCSP = "default-src 'none'; script-src 'self'; style-src 'self'"

// site is the pages the harness is tested on, all served with strictCSP. It records what forms post.
type site struct {
	mu    sync.Mutex
	posts []url.Values
}

func (s *site) posted() []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]url.Values(nil), s.posts...)
}

func page(title, body string) string {
	return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>` + title + `</title>
<link rel="stylesheet" href="/style.css">
<script src="/app.js"></script>
</head>
<body>
<main>
<h1>` + title + `</h1>
` + body + `
</main>
</body>
</html>`
}

// appJS records every CSP violation the page reports, and tries eval once, which the policy forbids.
const appJS = `window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => window.cspViolations.push(e.violatedDirective + " " + e.blockedURI));
try { new Function("return 1")(); window.evalRan = true; } catch (e) { window.evalRan = false; }
`

const styleCSS = `body { font-family: sans-serif; margin: 2rem; color: #1a1a1a; background: #fff; }
label, input, button { font-size: 1rem; }
.wide { width: 100%; height: 3rem; background: #2a5db0; }
`

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", strictCSP)
	switch r.URL.Path {
	case "/app.js":
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, appJS)
	case "/style.css":
		w.Header().Set("Content-Type", "text/css")
		fmt.Fprint(w, styleCSS)
	case "/bad":
		// Two critical violations (an image without alt, a field without a label), and an inline
		// script that the policy must block.
		fmt.Fprint(w, page("Bad", `<img src="/logo.png" id="logo">
<form method="post" action="/submit"><input type="text" name="nolabel" id="nolabel"></form>
<script>window.inlineRan = true;</script>`))
	case "/clean":
		fmt.Fprint(w, page("Clean", `<p>Nothing here breaks a rule.</p>
<div class="wide"></div>
<form method="post" action="/submit">
<label for="q">Search</label> <input type="text" id="q" name="q">
<button type="submit">Search</button>
</form>`))
	case "/form":
		fmt.Fprint(w, page("Keys", `<p><a href="/clean">Back</a></p>
<form method="post" action="/submit">
<p><label for="name">Name</label> <input type="text" id="name" name="name" autocomplete="off"></p>
<p><label><input type="checkbox" id="admin" name="admin"> Admin</label></p>
<p><button type="submit" id="save">Create key</button> <button type="button" id="cancel">Cancel</button></p>
<p><button type="button" hidden>Cancel</button></p>
</form>`))
	case "/twice":
		fmt.Fprint(w, page("Twice", `<button type="button">Save</button> <button type="button">Save</button>`))
	case "/submit":
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.posts = append(s.posts, r.PostForm)
		s.mu.Unlock()
		http.Redirect(w, r, "/done?name="+url.QueryEscape(r.PostForm.Get("name")), http.StatusSeeOther)
	case "/done":
		fmt.Fprint(w, page("Done", `<p id="result">Saved `+html.EscapeString(r.URL.Query().Get("name"))+`</p>`))
	default:
		http.NotFound(w, r)
	}
}

func TestBrowser(t *testing.T) {
	b := Start(t)

	t.Run("a dark tab sees prefers-color-scheme: dark", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			vp   Viewport
			dark bool
		}{{Laptop(), false}, {Viewport{Width: 1280, Height: 800, Dark: true}, true}} {
			ctx := b.Tab(t, tc.vp)
			_, err := chromedp.Run(ctx, chromedp.Navigate("about:blank"))
			require.NoError(t, err)
			dark, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`matchMedia("(prefers-color-scheme: dark)").matches`))
			require.NoError(t, err)
			require.Equal(t, tc.dark, dark)
		}
	})

	t.Run("axe under a strict CSP", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(&site{})
		defer srv.Close()
		ctx := b.Tab(t, Laptop())
		require.Equal(t, http.StatusOK, Navigate(t, ctx, srv.URL+"/bad"))

		// The policy is in force: the page's own script ran, its inline script and its eval did not.
		state, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](
			`({app: Array.isArray(window.cspViolations), inline: window.inlineRan === true, eval: window.evalRan})`))
		require.NoError(t, err)
		require.Equal(t, map[string]any{"app": true, "inline": false, "eval": false}, state)

		vs := Axe(t, ctx)
		byID := map[string]Violation{}
		for _, v := range vs {
			byID[v.ID] = v
		}
		require.Contains(t, byID, "image-alt", "violations: %v", vs)
		require.Contains(t, byID, "label", "violations: %v", vs)
		require.Equal(t, "critical", byID["image-alt"].Impact)
		require.Equal(t, []string{"#logo"}, byID["image-alt"].Targets)
		require.Equal(t, []string{"#nolabel"}, byID["label"].Targets)
		require.True(t, byID["label"].Blocking())
		require.NotEmpty(t, byID["label"].Help)

		// Running axe broke no rule of the policy: the page saw only its own three violations.
		seen, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.cspViolations`))
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"script-src-elem inline", "script-src eval", "img-src " + srv.URL + "/logo.png"}, seen)

		// A second run reuses the axe already in the page.
		require.Len(t, Axe(t, ctx), len(vs))

		// CheckAxe fails the test over them.
		rec := record(t, func(tb testing.TB) { CheckAxe(tb, ctx, "bad") })
		require.True(t, rec.failed)
		require.Contains(t, rec.String(), "critical image-alt")
		require.Contains(t, rec.String(), "#nolabel")
	})

	t.Run("clean page passes axe", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(&site{})
		defer srv.Close()
		for _, vp := range []Viewport{Laptop(), Phone()} {
			ctx := b.Tab(t, vp)
			require.Equal(t, http.StatusOK, Navigate(t, ctx, srv.URL+"/clean"))
			CheckAxe(t, ctx, fmt.Sprintf("clean at %dx%d", vp.Width, vp.Height))
		}
	})

	t.Run("screenshot is a PNG of the viewport", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(&site{})
		defer srv.Close()
		for _, tc := range []struct {
			name string
			vp   Viewport
			w, h int
		}{
			{"laptop", Laptop(), 1280, 800},
			{"phone", Phone(), 1170, 2532},
		} {
			ctx := b.Tab(t, tc.vp)
			Navigate(t, ctx, srv.URL+"/clean")
			path := Screenshot(t, ctx, tc.name)
			f, err := os.Open(path)
			require.NoError(t, err)
			img, err := png.Decode(f)
			f.Close()
			require.NoError(t, err)
			require.Equal(t, tc.w, img.Bounds().Dx(), tc.name)
			require.Equal(t, tc.h, img.Bounds().Dy(), tc.name)
		}
	})

	t.Run("keyboard alone submits a form", func(t *testing.T) {
		t.Parallel()
		s := &site{}
		srv := httptest.NewServer(s)
		defer srv.Close()
		ctx := b.Tab(t, Laptop())
		Navigate(t, ctx, srv.URL+"/form")

		// The tab order is the link, the name, the checkbox, then the button: three presses reach the
		// checkbox and not the button, and the error names where the focus is.
		err := TabTo(ctx, "#save", 3)
		require.ErrorContains(t, err, `3 Tab presses did not focus it; the focus is on <input id="admin" name="admin">`)
		require.NoError(t, TabTo(ctx, "#save", 1))
		require.NoError(t, TabTo(ctx, "#save", 0), "the focus is there already")
		require.ErrorContains(t, TabTo(ctx, "#nothing", 6), "6 Tab presses did not focus it")

		Navigate(t, ctx, srv.URL+"/form")
		require.NoError(t, TabTo(ctx, "#name", 2))
		Type(t, ctx, "Ada Lovelace")
		require.Equal(t, http.StatusOK, KeyboardSubmit(t, ctx, "#save", 2))
		require.Equal(t, "Saved Ada Lovelace", Text(t, ctx, "#result"))
		require.Equal(t, []url.Values{{"name": {"Ada Lovelace"}}}, s.posted())
	})

	t.Run("mouse fills and submits a form", func(t *testing.T) {
		t.Parallel()
		s := &site{}
		srv := httptest.NewServer(s)
		defer srv.Close()
		ctx := b.Tab(t, Phone())
		Navigate(t, ctx, srv.URL+"/form")
		Fill(t, ctx, "name", "first") // by its name
		Fill(t, ctx, "Name", "Grace") // by its label: replaces what was typed
		Click(t, ctx, "#admin")       // by selector
		ClickButton(t, ctx, "Cancel") // one visible Cancel: the hidden one does not count
		status := ExpectNavigation(t, ctx, func() { ClickButton(t, ctx, "Create key") })
		require.Equal(t, http.StatusOK, status)
		WaitVisible(t, ctx, "#result")
		require.Equal(t, "Saved Grace", Text(t, ctx, "#result"))
		require.Equal(t, []url.Values{{"name": {"Grace"}, "admin": {"on"}}}, s.posted())
		require.Equal(t, http.StatusNotFound, Navigate(t, ctx, srv.URL+"/missing"))
	})

	t.Run("a name that matches two buttons fails", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(&site{})
		defer srv.Close()
		ctx := b.Tab(t, Laptop())
		Navigate(t, ctx, srv.URL+"/twice")
		rec := record(t, func(tb testing.TB) { ClickButton(tb, ctx, "Save") })
		require.True(t, rec.failed)
		require.Contains(t, rec.String(), `2 visible buttons match "Save"; want one`)
	})
}
