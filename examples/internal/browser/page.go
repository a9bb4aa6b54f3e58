package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The helpers below fail the test (t.Fatal) when their step fails, so that a page test reads as a list
// of steps. Each waits for what it needs through chromedp's own waits, never a sleep, and gives up after
// 30 seconds. ctx is a tab's context from Browser.Tab. A selector is a CSS selector.

// Navigate loads url in the tab, waits for its load event and returns the HTTP status of the document
// (0 for a URL without one, such as about:blank). It does not judge the status: a test of an error page
// expects its 404.
func Navigate(t testing.TB, ctx context.Context, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(url))
	if err != nil {
		stepFailed(t, "navigate to "+url, err)
	}
	if resp == nil {
		return 0
	}
	return int(resp.Status)
}

// ExpectNavigation runs do, a step that leads to another page (a click on a submit button or a link,
// Enter in a form), waits for that page's load event and returns its HTTP status; after a redirect, the
// status of the page redirected to. It listens before do runs, so a fast page is not missed, and it
// fails the test when no navigation follows. Steps after it see the new page, never the old one.
func ExpectNavigation(t testing.TB, ctx context.Context, do func()) int {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(wctx, chromedp.Func(func(context.Context, *chromedp.Target) error {
		do()
		return nil
	}))
	if err != nil {
		stepFailed(t, "wait for the page the step leads to", err)
	}
	if resp == nil {
		t.Fatalf("browser: the step led to no new document (an in-page navigation?)")
	}
	return int(resp.Status)
}

// Click clicks the first element that matches selector, once it is visible. It does not wait for a
// navigation: wrap it in ExpectNavigation when it leads to another page.
func Click(t testing.TB, ctx context.Context, selector string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(selector))); err != nil {
		stepFailed(t, fmt.Sprintf("click %q", selector), err)
	}
}

// ClickButton clicks the one visible button whose text is text, as a person would pick it: a <button>,
// an <input type=submit|button|reset> by its value, or an element with role=button, matched by its
// visible text with white space collapsed, or by its aria-label. It waits for the button to appear, and
// fails when two visible buttons match. It does not wait for a navigation (see ExpectNavigation).
func ClickButton(t testing.TB, ctx context.Context, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	sel := chromedp.JSPath(fmt.Sprintf(findButtonJS, jsString(text)))
	if err := chromedp.Do(ctx, chromedp.Click(sel, unique("buttons", text))); err != nil {
		stepFailed(t, fmt.Sprintf("click the button %q", text), err)
	}
}

// Fill types value into the one visible text field (an <input> that takes text, or a <textarea>)
// named by field: the text of its <label>, else its aria-label, else its name attribute. It empties the
// field first and types with key events, so the page's input handlers run as for a person. It waits for
// the field to appear, and fails when two visible fields match.
func Fill(t testing.TB, ctx context.Context, field, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	sel := chromedp.JSPath(fmt.Sprintf(findFieldJS, jsString(field)))
	err := chromedp.Do(ctx,
		chromedp.Query(sel, unique("fields", field), chromedp.NodeVisible, chromedp.After(clearValue)),
		chromedp.SendKeys(sel, value, unique("fields", field)),
	)
	if err != nil {
		stepFailed(t, fmt.Sprintf("fill the field %q", field), err)
	}
}

// Text returns the visible text (innerText) of the first element that matches selector, once it is
// visible.
func Text(t testing.TB, ctx context.Context, selector string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(selector), chromedp.NodeVisible))
	if err != nil {
		stepFailed(t, fmt.Sprintf("read the text of %q", selector), err)
	}
	return s
}

// WaitVisible waits until an element that matches selector is visible.
func WaitVisible(t testing.TB, ctx context.Context, selector string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(selector))); err != nil {
		stepFailed(t, fmt.Sprintf("wait for %q to be visible", selector), err)
	}
}

// Type sends keys to the element that has the focus, as key events: text, or the keys of
// github.com/chromedp/chromedp/kb such as kb.Enter, kb.Tab and kb.Escape. With TabTo, it fills and
// submits a form by keyboard alone.
func Type(t testing.TB, ctx context.Context, keys string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.KeyEvent(keys)); err != nil {
		stepFailed(t, fmt.Sprintf("type %q", keys), err)
	}
}

// TabTo presses Tab, as a keyboard user does, until the focused element (document.activeElement)
// matches selector, and returns an error naming the focused element when maxTabs presses did not get
// there: the element is missing, cannot take the focus, or comes later in the tab order than the test
// expected. It presses nothing when the element has the focus already. Focus moves from wherever it
// is; after a navigation, from the start of the page.
func TabTo(ctx context.Context, selector string, maxTabs int) error {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	check := chromedp.Evaluate[focusState](fmt.Sprintf(focusJS, jsString(selector)))
	for presses := 0; ; presses++ {
		st, err := chromedp.Run(ctx, check)
		if err != nil {
			return fmt.Errorf("browser: tab to %q: %w", selector, err)
		}
		if st.Match {
			return nil
		}
		if presses == maxTabs {
			return fmt.Errorf("browser: tab to %q: %d Tab presses did not focus it; the focus is on %s",
				selector, maxTabs, st.Focused)
		}
		if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Tab)); err != nil {
			return fmt.Errorf("browser: tab to %q: press Tab: %w", selector, err)
		}
	}
}

// KeyboardSubmit submits a form by keyboard alone: it tabs to selector (a submit button, or a field of
// a form that Enter submits) with TabTo, presses Enter, waits for the page that follows, and returns
// its HTTP status. A form that a mouse user can send but this cannot is a form a keyboard user cannot
// send.
func KeyboardSubmit(t testing.TB, ctx context.Context, selector string, maxTabs int) int {
	t.Helper()
	if err := TabTo(ctx, selector, maxTabs); err != nil {
		t.Fatal(err)
	}
	return ExpectNavigation(t, ctx, func() { Type(t, ctx, kb.Enter) })
}

// focusState is what focusJS reports: whether the focused element matches, and which it is.
type focusState struct {
	Match   bool   `json:"match"`
	Focused string `json:"focused"`
}

// focusJS is a JavaScript expression; %s is the selector as a JavaScript string.
const focusJS = `(() => {
	const el = document.activeElement;
	if (el === null || el === document.body || el === document.documentElement) {
		return {match: false, focused: "nothing (the page itself)"};
	}
	let d = "<" + el.localName;
	if (el.id) d += " id=" + JSON.stringify(el.id);
	if (el.name) d += " name=" + JSON.stringify(el.name);
	d += ">";
	const text = (el.innerText || el.value || "").replace(/\s+/g, " ").trim().slice(0, 40);
	if (text) d += " " + JSON.stringify(text);
	return {match: el.matches(%s), focused: d};
})()`

// shownJS is a JavaScript function telling whether an element is rendered and not visibility:hidden:
// what a person can see, at least once scrolled to.
const shownJS = `(el) => el.checkVisibility({visibilityProperty: true})`

// findButtonJS is a JavaScript expression giving the visible buttons named %s (a JavaScript string).
const findButtonJS = `(() => {
	const want = %s;
	const shown = ` + shownJS + `;
	const norm = (s) => (s || "").replace(/\s+/g, " ").trim();
	return [...document.querySelectorAll("button, input[type=submit], input[type=button], input[type=reset], [role=button]")]
		.filter((el) => shown(el) && (norm(el.localName === "input" ? el.value : el.innerText) === want ||
			el.getAttribute("aria-label") === want));
})()`

// findFieldJS is a JavaScript expression giving the visible text fields named %s (a JavaScript
// string): by their label's text, their aria-label, or their name.
const findFieldJS = `(() => {
	const want = %s;
	const shown = ` + shownJS + `;
	const norm = (s) => (s || "").replace(/\s+/g, " ").trim();
	const fields = "textarea, input:not([type=hidden]):not([type=submit]):not([type=button]):not([type=reset])" +
		":not([type=image]):not([type=checkbox]):not([type=radio]):not([type=file])";
	const found = new Set();
	for (const label of document.querySelectorAll("label")) {
		if (norm(label.innerText) === want && label.control && label.control.matches(fields)) found.add(label.control);
	}
	for (const el of document.querySelectorAll(fields)) {
		if (el.getAttribute("aria-label") === want || el.name === want) found.add(el);
	}
	return [...found].filter(shown);
})()`

// clearValue empties the value of the field in nodes[0] and fires its input event, as deleting its
// text would. (chromedp's SetJavascriptAttribute cannot do it: its empty string arrives in the page as
// undefined, which an input turns into the text "undefined".)
func clearValue(ctx context.Context, tg *chromedp.Target, nodes []*chromedp.Node) error {
	obj, err := cdp.Call(ctx, tg, dom.ResolveNode, dom.ResolveNodeParams{NodeID: nodes[0].NodeID})
	if err != nil {
		return err
	}
	defer func() {
		_, _ = cdp.Call(ctx, tg, runtime.ReleaseObject, runtime.ReleaseObjectParams{ObjectID: obj.Object.ObjectID})
	}()
	res, err := cdp.Call(ctx, tg, runtime.CallFunctionOn, runtime.CallFunctionOnParams{
		ObjectID:            obj.Object.ObjectID,
		FunctionDeclaration: `function () { this.value = ""; this.dispatchEvent(new Event("input", {bubbles: true})); }`,
	})
	if err != nil {
		return err
	}
	if res.ExceptionDetails != nil {
		return &chromedp.ExceptionError{ExceptionDetails: res.ExceptionDetails}
	}
	return nil
}

// unique is a query option failing the step when more than one element matches: a test that names a
// button or a field must name one.
func unique(kind, name string) chromedp.QueryOption {
	return chromedp.After(func(_ context.Context, _ *chromedp.Target, nodes []*chromedp.Node) error {
		if len(nodes) > 1 {
			return fmt.Errorf("%d visible %s match %q; want one", len(nodes), kind, name)
		}
		return nil
	})
}

// jsString returns s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}
