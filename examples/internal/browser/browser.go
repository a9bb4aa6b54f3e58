package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// The variables that configure the harness. scripts/test.sh exports the first two.
const (
	// EnvChromium names the Chromium (or Chrome) executable; when unset, Start looks on PATH.
	EnvChromium = "SVC_TEST_CHROMIUM"
	// EnvAxe names a file holding axe-core's axe.min.js; when unset, Axe uses its cache or npm.
	EnvAxe = "SVC_TEST_AXE_JS"
	// EnvScreenshots names the directory Screenshot writes to; when unset, "screenshots" in the
	// test's package directory, which .gitignore keeps out of git.
	EnvScreenshots = "SVC_TEST_SCREENSHOTS"
)

const (
	// startTimeout bounds Chromium's start: a browser that has not answered by then is stopped.
	startTimeout = 60 * time.Second
	// stepTimeout bounds each helper of this package, waits included, so that a page that never
	// shows what a test waits for fails that test with the step's name instead of hanging until
	// go test's -timeout. Generous: a loaded two-core machine runs the race detector too.
	stepTimeout = 30 * time.Second
	// outputTail is how much of Chromium's own output is kept, to be logged when a test fails.
	outputTail = 32 << 10
)

// A Browser is a headless Chromium started by Start for one test and stopped when that test ends.
// Its methods are safe for concurrent use, so parallel subtests can each open tabs in it. There is no
// zero value: use Start.
type Browser struct {
	ctx context.Context // the context of the browser's first tab; Tab opens its siblings
}

// Start launches a headless Chromium with a fresh profile in a temporary directory and stops it when
// the test ends. It finds the browser through SVC_TEST_CHROMIUM, else as chromium, chromium-browser or
// google-chrome on PATH. When there is none it fails the test if CI=true, since CI must not skip, and
// skips it otherwise, saying how to install one. As root, Chromium runs with --no-sandbox, without
// which it refuses to start; as any other user it keeps its sandbox.
//
// Call Start once per test and open a tab for each page or subtest with Tab: a browser takes about half
// a second to start, a tab about a tenth.
func Start(t testing.TB) *Browser {
	t.Helper()
	path := findChromium(t)

	out := &tail{max: outputTail}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("no-sandbox", os.Geteuid() == 0),
		chromedp.CombinedOutput(out),
		// The machines this runs on reach no network but the package registries: nothing in the
		// browser may try to call home (component updates, pings, field trials, translation).
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("disable-field-trial-config", true),
		chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,MediaRouter,OptimizationHints,AutofillServerCommunication,CertificateTransparencyComponentUpdater"),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	logs := &testLog{t: t}
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithLogf(logs.logf), chromedp.WithErrorf(logs.logf))
	t.Cleanup(func() {
		cancel()      // closes the browser
		cancelAlloc() // and waits for its process to exit, so that t.TempDir can be removed
		logs.stop()
		if t.Failed() && out.Len() > 0 {
			t.Logf("browser: Chromium's output (last %d KiB):\n%s", outputTail>>10, out)
		}
	})

	// The first Do starts the browser and ties it to ctx for good, so it cannot run under a context
	// with a deadline; a timer stops a browser that does not come up instead.
	watchdog := time.AfterFunc(startTimeout, cancel)
	err := chromedp.Do(ctx)
	fired := !watchdog.Stop()
	if err != nil {
		if fired {
			err = fmt.Errorf("no answer within %v: %w", startTimeout, err)
		}
		t.Fatalf("browser: start %s: %v\n%s", path, err, out)
	}
	vctx, vcancel := context.WithTimeout(ctx, stepTimeout)
	defer vcancel()
	if v, err := chromedp.CallBrowser(vctx, cdpbrowser.GetVersion, cdp.Empty{}); err == nil {
		t.Logf("browser: %s (%s)", v.Product, path)
	}
	return &Browser{ctx: ctx}
}

// findChromium returns the browser to start, or ends the test: with a failure when SVC_TEST_CHROMIUM
// names nothing runnable or CI=true, with a skip otherwise.
func findChromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvChromium); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			t.Fatalf("browser: %s=%s is set but is not an executable: %v", EnvChromium, p, err)
		}
		return path
	}
	names := []string{"chromium", "chromium-browser", "google-chrome"}
	for _, name := range names {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	unavailable(t, "no Chromium found (%s unset, none of %s on PATH): install it with "+
		"`apt-get install chromium` (Debian), or run scripts/test.sh, which installs it",
		EnvChromium, strings.Join(names, ", "))
	return ""
}

// unavailable ends a test whose prerequisite is missing: CI=true fails it, since CI must run every
// test, and anywhere else it skips.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("browser: %s; CI=true, so this fails instead of skipping", msg)
	}
	t.Skipf("browser: %s; skipping", msg)
}

// A Viewport is the size of a tab's layout viewport in CSS pixels, with its device scale factor. It is
// a plain value; Laptop and Phone are the two the portal's pages are checked at.
type Viewport struct {
	// Width and Height are in CSS pixels.
	Width, Height int
	// Scale is the device pixel ratio; screenshots are Width*Scale by Height*Scale pixels. Zero means 1.
	Scale float64
	// Mobile lays the page out as a phone does: Chromium honours <meta name="viewport"> and, for a
	// page without one, lays it out 980 pixels wide and shrinks it to fit. Touch emulation stays off.
	Mobile bool
	// Dark asks for the dark colour scheme: the tab's pages see prefers-color-scheme: dark, so that
	// axe checks, and a screenshot shows, the colours a reader with a dark system setting gets.
	Dark bool
}

// Laptop is the 1280×800 viewport of a laptop's browser window, at scale 1.
func Laptop() Viewport { return Viewport{Width: 1280, Height: 800, Scale: 1} }

// Phone is the 390×844 viewport of a current phone in portrait, at scale 3, with mobile emulation.
func Phone() Viewport { return Viewport{Width: 390, Height: 844, Scale: 3, Mobile: true} }

// Tab opens a new tab with the viewport vp and returns its context, which the helpers of this package
// and chromedp's own actions take. The tab is closed when t ends. Each tab has its own focus (focus
// emulation is on), so keyboard helpers work in tabs of parallel subtests. The context has no deadline:
// each helper bounds its own wait.
func (b *Browser) Tab(t testing.TB, vp Viewport) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	scale := vp.Scale
	if scale == 0 {
		scale = 1
	}
	emulate := []chromedp.EmulateViewportOption{chromedp.EmulateScale(scale)}
	if vp.Height > vp.Width {
		emulate = append(emulate, chromedp.EmulatePortrait) // chromedp's default is landscape
	}
	if vp.Mobile {
		emulate = append(emulate, chromedp.EmulateMobile)
	}
	// The first Do opens the tab and ties it to ctx, so it runs without a deadline (see Start); the
	// later steps of this package each run under stepTimeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("browser: open tab: %v", err)
	}
	sctx, scancel := context.WithTimeout(ctx, stepTimeout)
	defer scancel()
	err := chromedp.Do(sctx,
		chromedp.EmulateViewport(int64(vp.Width), int64(vp.Height), emulate...),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true})
			if err != nil || !vp.Dark {
				return err
			}
			_, err = cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
			return err
		}),
	)
	if err != nil {
		t.Fatalf("browser: set viewport %dx%d: %v", vp.Width, vp.Height, err)
	}
	return ctx
}

// testLog hands chromedp's log lines to t.Logf until the test's cleanup stops it: chromedp's goroutines
// can log after the test returned, when t.Logf would panic.
type testLog struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (l *testLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.t.Logf("chromedp: "+format, args...)
	}
}

func (l *testLog) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
}

// tail keeps the last max bytes written to it: Chromium's output, for the log of a failed test.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tail) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.buf)
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// stepFailed fails the test for a helper's step, saying when it was the step's wait that ran out.
func stepFailed(t testing.TB, step string, err error) {
	t.Helper()
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("browser: %s: nothing after %v: %v", step, stepTimeout, err)
	}
	t.Fatalf("browser: %s: %v", step, err)
}
