package browser

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB that records failures and skips instead of reporting them, so that a test
// can check how a helper fails. Fatal and Skip end the goroutine, as the testing package's do.
type recorder struct {
	testing.TB
	mu      sync.Mutex
	msgs    []string
	failed  bool
	skipped bool
}

// record runs f with a recorder on a goroutine of its own, which Fatal and Skip may end.
func record(t testing.TB, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func (r *recorder) note(fail, skip bool, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msg)
	r.failed = r.failed || fail
	r.skipped = r.skipped || skip
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}

func (r *recorder) Helper() {}
func (r *recorder) Logf(format string, args ...any) {
	r.note(false, false, fmt.Sprintf(format, args...))
}
func (r *recorder) Errorf(format string, args ...any) {
	r.note(true, false, fmt.Sprintf(format, args...))
}
func (r *recorder) Error(args ...any)                 { r.note(true, false, fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) Skipf(format string, args ...any) {
	r.note(false, true, fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// Without a Chromium, a developer's run skips and says how to get one; CI fails, since nothing may
// skip there; and a SVC_TEST_CHROMIUM that names nothing fails everywhere.
func TestStartWithoutChromium(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		name, ci, env string
		fail, skip    bool
		says          string
	}{
		{name: "developer", ci: "", fail: false, skip: true, says: "apt-get install chromium"},
		{name: "CI", ci: "true", fail: true, skip: false, says: "CI=true, so this fails instead of skipping"},
		{name: "variable names nothing", ci: "", env: filepath.Join(empty, "chromium"), fail: true, says: EnvChromium + "="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", empty)
			t.Setenv("CI", tc.ci)
			t.Setenv(EnvChromium, tc.env)
			rec := record(t, func(tb testing.TB) { Start(tb) })
			require.Equal(t, tc.fail, rec.failed, rec.String())
			require.Equal(t, tc.skip, rec.skipped, rec.String())
			require.Contains(t, rec.String(), tc.says)
		})
	}
}

// Without npm and without a cached axe-core, a developer's run skips and CI fails.
func TestAxeWithoutNPM(t *testing.T) {
	for _, tc := range []struct {
		name, ci   string
		fail, skip bool
	}{
		{"developer", "", false, true},
		{"CI", "true", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", t.TempDir())
			t.Setenv("CI", tc.ci)
			t.Setenv(EnvAxe, "")
			t.Setenv("XDG_CACHE_HOME", t.TempDir()) // an empty cache
			rec := record(t, func(tb testing.TB) { axeSource(tb) })
			require.Equal(t, tc.fail, rec.failed, rec.String())
			require.Equal(t, tc.skip, rec.skipped, rec.String())
			require.Contains(t, rec.String(), "npm is not installed")
		})
	}
}

// SVC_TEST_AXE_JS is used as it is, whatever its release; the cache is used only when it holds the
// pinned file.
func TestAxeSource(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no npm: nothing may be fetched
	t.Setenv("CI", "")

	own := filepath.Join(t.TempDir(), "axe.min.js")
	require.NoError(t, os.WriteFile(own, []byte("/*! axe v9.9.9 */ window.axe = {};"), 0o644))
	t.Setenv(EnvAxe, own)
	require.Equal(t, "/*! axe v9.9.9 */ window.axe = {};", string(axeSource(t)))

	t.Setenv(EnvAxe, "")
	cacheHome := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cacheHome)
	cached := filepath.Join(cacheHome, "svc-conventions", "axe-core@"+axeVersion, "axe.min.js")
	require.NoError(t, writeFileAtomic(cached, []byte("not axe")))
	rec := record(t, func(tb testing.TB) { axeSource(tb) })
	require.True(t, rec.skipped, "a cached file of another hash is not used: %s", rec)
	require.Contains(t, rec.String(), "does not have the SHA-256")
}

func TestAxeFromTarball(t *testing.T) {
	tgz := func(files map[string]string) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		for name, body := range files {
			require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}))
			_, err := tw.Write([]byte(body))
			require.NoError(t, err)
		}
		require.NoError(t, tw.Close())
		require.NoError(t, zw.Close())
		return buf.Bytes()
	}
	got, err := axeFromTarball(bytes.NewReader(tgz(map[string]string{
		"package/package.json": "{}",
		"package/axe.js":       "full",
		"package/axe.min.js":   "minified",
	})))
	require.NoError(t, err)
	require.Equal(t, "minified", string(got))

	_, err = axeFromTarball(bytes.NewReader(tgz(map[string]string{"package/axe.js": "full"})))
	require.ErrorContains(t, err, "no package/axe.min.js")

	_, err = axeFromTarball(strings.NewReader("not gzip"))
	require.Error(t, err)
}

func TestFileName(t *testing.T) {
	require.Equal(t, "TestPortal_keys_phone-home_page.png", fileName("TestPortal/keys phone")+"-"+fileName("home page")+".png")
}
