package browser

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Screenshot writes a PNG of the tab's viewport (Width*Scale by Height*Scale pixels) as
// <dir>/<test name>-<name>.png and returns its absolute path, which it also logs. dir is
// SVC_TEST_SCREENSHOTS when set, else "screenshots" in the test's package directory, which the
// repository's .gitignore keeps out of git (examples/**/screenshots/). A later run overwrites it.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		dir = "screenshots"
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatalf("browser: screenshot directory: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("browser: screenshot directory: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	if err != nil {
		stepFailed(t, "take a screenshot", err)
	}
	path := filepath.Join(dir, fileName(t.Name())+"-"+fileName(name)+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("browser: write screenshot: %v", err)
	}
	t.Logf("browser: screenshot %s", path)
	return path
}

// fileName makes s safe as a file name on every system: letters, digits, '.', '-' and '_' stay, the
// rest (the '/' of subtest names among them) become '_'.
func fileName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}
