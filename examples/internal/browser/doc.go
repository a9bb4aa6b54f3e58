// Package browser drives a real headless Chromium from Go tests, for the pages of a server-rendered
// portal: it loads them, checks them with axe-core, works them by mouse and by keyboard alone, and
// writes screenshots. It is test support: only _test.go files import it.
//
// Start launches one Chromium per test (through github.com/chromedp/chromedp, over a pipe, with a
// fresh profile) and Browser.Tab opens a tab at a Viewport, Laptop (1280×800) or Phone (390×844 at
// scale 3). The helpers take the test and the tab's context, fail the test when their step fails, and
// wait through chromedp's waits, never sleeps, for at most 30 seconds a step.
//
// Where nothing is installed, the tests skip and say how to install Chromium (apt-get install
// chromium) or npm (for axe-core); with CI=true they fail instead, since CI must run them.
// scripts/test.sh installs both and exports the variables below, so they run.
//
//   - SVC_TEST_CHROMIUM: the browser executable; else chromium, chromium-browser or google-chrome on PATH.
//   - SVC_TEST_AXE_JS: axe-core's axe.min.js; else the pinned release from the user cache directory
//     (svc-conventions/axe-core@VERSION), fetched there with `npm pack` the first time.
//   - SVC_TEST_SCREENSHOTS: where Screenshot writes; else ./screenshots, which .gitignore ignores.
//
// Axe is injected with the DevTools protocol's Runtime.evaluate, which a page's Content-Security-Policy
// does not govern: pages served with "script-src 'self'" and no eval are checked as served, with their
// policy in force (the package's tests check both).
//
// A test of a portal's page, at both viewports:
//
//	func TestKeysPage(t *testing.T) {
//		srv := httptest.NewServer(portal.Handler())
//		defer srv.Close()
//		b := browser.Start(t)
//		for _, vp := range []browser.Viewport{browser.Laptop(), browser.Phone()} {
//			t.Run(fmt.Sprintf("%dx%d", vp.Width, vp.Height), func(t *testing.T) {
//				ctx := b.Tab(t, vp)
//				require.Equal(t, 200, browser.Navigate(t, ctx, srv.URL+"/keys"))
//				browser.CheckAxe(t, ctx, "keys")
//				browser.Screenshot(t, ctx, "keys")
//
//				// By keyboard alone: tab to the field, type, tab to the button, press Enter.
//				require.NoError(t, browser.TabTo(ctx, "#key-name", 10))
//				browser.Type(t, ctx, "deploy bot")
//				require.Equal(t, 200, browser.KeyboardSubmit(t, ctx, "button[type=submit]", 5))
//				require.Contains(t, browser.Text(t, ctx, "[role=status]"), "deploy bot")
//
//				// By mouse: fill by label, click by the button's text, follow the page it leads to.
//				browser.Navigate(t, ctx, srv.URL+"/keys")
//				browser.Fill(t, ctx, "Key name", "billing")
//				status := browser.ExpectNavigation(t, ctx, func() { browser.ClickButton(t, ctx, "Create key") })
//				require.Equal(t, 200, status)
//				browser.CheckAxe(t, ctx, "key created")
//			})
//		}
//	}
//
// The tab's context is a chromedp context, so chromedp's own actions run in it too.
package browser
