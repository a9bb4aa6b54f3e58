package browser

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The axe-core release the checks run, and the SHA-256 of its axe.min.js. scripts/test.sh reads both
// lines, so keep their form. To move to a new release: `npm view axe-core version`, then
// `npm pack axe-core@VERSION` and `tar -xOzf axe-core-VERSION.tgz package/axe.min.js | sha256sum`.
const (
	axeVersion = "4.14.1"
	axeSHA256  = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
)

// axeMaxSize bounds what is read of axe.min.js (650 KB in 4.14).
const axeMaxSize = 16 << 20

// A Violation is an accessibility rule of axe-core that a page breaks, with the elements that break it.
type Violation struct {
	// ID is the rule, such as "image-alt" or "label".
	ID string `json:"id"`
	// Impact is "minor", "moderate", "serious" or "critical".
	Impact string `json:"impact"`
	// Help says in a sentence what the rule asks for.
	Help string `json:"help"`
	// HelpURL is axe's page about the rule.
	HelpURL string `json:"helpUrl"`
	// Targets holds a CSS selector for each element that breaks the rule. An element inside a shadow
	// root or a frame has one selector per level, joined by " >>> ".
	Targets []string `json:"targets"`
}

// String gives the violation on one line, for test logs.
func (v Violation) String() string {
	return fmt.Sprintf("%s %s: %s (%s) at %s", v.Impact, v.ID, v.Help, v.HelpURL, strings.Join(v.Targets, ", "))
}

// Blocking reports whether v is serious or critical: what CheckAxe fails a test for.
func (v Violation) Blocking() bool { return v.Impact == "serious" || v.Impact == "critical" }

// Axe runs axe-core over the page in the tab and returns every violation it finds. It injects axe's
// script through the DevTools protocol (Runtime.evaluate), which a page's Content-Security-Policy does
// not govern: pages that allow no inline script and no eval are checked as they are served, without
// loosening their policy. The script is SVC_TEST_AXE_JS, else the pinned release from the user cache
// directory, else that release fetched with `npm pack` and cached; when it cannot be had, the test
// fails in CI and skips elsewhere.
func Axe(t testing.TB, ctx context.Context) []Violation {
	t.Helper()
	src := axeSource(t)
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	vs, err := runAxe(ctx, src)
	if err != nil {
		stepFailed(t, "run axe-core", err)
	}
	return vs
}

// CheckAxe runs Axe and fails the test (without stopping it) when a violation is serious or critical,
// listing them; it logs the minor and moderate ones. page names the page in the messages.
func CheckAxe(t testing.TB, ctx context.Context, page string) {
	t.Helper()
	var blocking, other []string
	for _, v := range Axe(t, ctx) {
		if v.Blocking() {
			blocking = append(blocking, v.String())
		} else {
			other = append(other, v.String())
		}
	}
	if len(other) > 0 {
		t.Logf("axe: %s: %d minor or moderate violation(s):\n\t%s", page, len(other), strings.Join(other, "\n\t"))
	}
	if len(blocking) > 0 {
		t.Errorf("axe: %s: %d serious or critical violation(s):\n\t%s", page, len(blocking), strings.Join(blocking, "\n\t"))
	}
}

// runAxe injects src into the page unless axe is there already (it stays until the next navigation),
// then runs it over the document.
func runAxe(ctx context.Context, src []byte) ([]Violation, error) {
	present, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`typeof window.axe === "object"`))
	if err != nil {
		return nil, err
	}
	if !present {
		// axe.min.js is a script that sets window.axe; the last line gives the evaluation a plain
		// result to return instead of whatever the script's last expression is.
		injected, err := chromedp.Run(ctx, chromedp.Evaluate[bool](string(src)+"\n;typeof window.axe === \"object\""))
		if err != nil {
			return nil, fmt.Errorf("inject axe-core: %w", err)
		}
		if !injected {
			return nil, errors.New("inject axe-core: the script ran but window.axe is not set")
		}
	}
	vs, err := chromedp.Run(ctx, chromedp.Evaluate[[]Violation](axeRunJS, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, fmt.Errorf("axe.run: %w", err)
	}
	return vs, nil
}

// axeRunJS runs axe over the whole document and keeps what Violation holds. Only violations are
// collected: passes and incomplete results cost time and are not reported.
const axeRunJS = `(async () => {
	const r = await axe.run(document, {resultTypes: ["violations"]});
	const path = (t) => Array.isArray(t) ? t.join(" >>> ") : String(t);
	return r.violations.map((v) => ({
		id: v.id, impact: v.impact || "", help: v.help, helpUrl: v.helpUrl,
		targets: v.nodes.map((n) => n.target.map(path).join(" >>> ")),
	}));
})()`

// axeSource returns axe.min.js: the file SVC_TEST_AXE_JS names, used as it is; else the copy of the
// pinned release in the user cache (os.UserCacheDir()/svc-conventions/axe-core@VERSION/axe.min.js),
// checked against its SHA-256; else the release fetched with `npm pack`, checked and cached.
// scripts/test.sh fills the same cache. When npm is missing or fails, the test fails in CI and skips
// elsewhere.
func axeSource(t testing.TB) []byte {
	t.Helper()
	if p := os.Getenv(EnvAxe); p != "" {
		src, err := readAxe(p)
		if err != nil {
			t.Fatalf("browser: %s=%s is set but cannot be read: %v", EnvAxe, p, err)
		}
		if !bytes.Contains(src[:min(len(src), 200)], []byte("axe v"+axeVersion)) {
			t.Logf("browser: %s=%s is not axe-core %s, the release pinned here; using it anyway", EnvAxe, p, axeVersion)
		}
		return src
	}
	cache := ""
	if dir, err := os.UserCacheDir(); err == nil {
		cache = filepath.Join(dir, "svc-conventions", "axe-core@"+axeVersion, "axe.min.js")
		if src, err := readAxe(cache); err == nil {
			if pinned(src) {
				return src
			}
			t.Logf("browser: %s does not have the SHA-256 of axe-core %s; fetching it again", cache, axeVersion)
		}
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		unavailable(t, "axe-core %s is not cached and npm is not installed: install Node.js and npm "+
			"(`apt-get install npm`), set %s to an axe.min.js, or run scripts/test.sh", axeVersion, EnvAxe)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src, err := npmPackAxe(ctx, npm, t.TempDir())
	if err != nil {
		unavailable(t, "fetch axe-core %s with npm: %v", axeVersion, err)
	}
	if !pinned(src) {
		sum := sha256.Sum256(src)
		t.Fatalf("browser: npm's axe-core %s has axe.min.js with SHA-256 %x, want %s", axeVersion, sum, axeSHA256)
	}
	if cache != "" {
		if err := writeFileAtomic(cache, src); err != nil {
			t.Logf("browser: cache axe-core in %s: %v (it will be fetched again)", cache, err)
		}
	}
	return src
}

func readAxe(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, axeMaxSize))
}

func pinned(src []byte) bool {
	sum := sha256.Sum256(src)
	return hex.EncodeToString(sum[:]) == axeSHA256
}

// npmPackAxe downloads the pinned axe-core package into dir with `npm pack` and returns its axe.min.js.
func npmPackAxe(ctx context.Context, npm, dir string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, npm, "pack", "axe-core@"+axeVersion, "--pack-destination", dir, "--silent")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("npm pack axe-core@%s: %w: %s", axeVersion, err, bytes.TrimSpace(out))
	}
	f, err := os.Open(filepath.Join(dir, "axe-core-"+axeVersion+".tgz"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return axeFromTarball(f)
}

// axeFromTarball returns package/axe.min.js from an npm package tarball.
func axeFromTarball(r io.Reader) ([]byte, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, errors.New("no package/axe.min.js in the tarball")
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg && h.Name == "package/axe.min.js" {
			if h.Size > axeMaxSize {
				return nil, fmt.Errorf("package/axe.min.js is %d bytes, more than the %d allowed", h.Size, axeMaxSize)
			}
			return io.ReadAll(tr)
		}
	}
}

// writeFileAtomic writes data to path through a temporary file and a rename, so that a test running
// at the same time (another package's test binary) reads either nothing or the whole file.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".axe-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename, there is nothing left to remove
	// CreateTemp's 0600 would keep other users of the machine from the cache.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
