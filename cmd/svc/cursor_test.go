package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook/webhooktest"
)

// plantCursor writes, at path, a cursor of testEP at seq, as someone other than listen would.
func plantCursor(t *testing.T, path string, seq uint64) {
	t.Helper()
	data, err := json.Marshal(cursorState{Endpoint: testEP, Sequence: seq, Updated: time.Now()})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

// A cursor lives where only its user can write, and is opened only as the file it is: a link or a
// file another user planted would make listen skip (or repeat) events without a word.
func TestCursorRefusesWhatOthersCouldPlant(t *testing.T) {
	if !permsMatter {
		t.Skip("no Unix permissions here")
	}
	src := webhooktest.NewSource(testSecret, testKey, nil)
	for range 5 {
		src.Emit(testEP, "order.created", nil)
	}
	api := httptest.NewServer(src)
	defer api.Close()
	rcv := newReceiver(t, 0)
	local := httptest.NewServer(rcv)
	defer local.Close()
	vars := map[string]string{envAPIKey: testKey, envSecret: testSecret, envBaseURL: api.URL, envEndpoint: testEP}
	listen := func(t *testing.T, cursor string) result {
		t.Helper()
		l := startListen(t, vars, "--forward-to", local.URL, "--cursor", cursor, "--poll", "1ms")
		code := l.wait(t) // a listen that follows what was planted would not stop
		return result{code, l.stdout.String(), l.stderr.String()}
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string) // dir is the cursor's directory, 0700 and the test's own
		want  string
	}{
		{"a cursor that is a symbolic link", func(t *testing.T, dir string) {
			planted := filepath.Join(t.TempDir(), "planted.json")
			plantCursor(t, planted, 1_000_000)
			require.NoError(t, os.Symlink(planted, filepath.Join(dir, "c.json")))
		}, "c.json is a symbolic link"},
		{"a lock that is a symbolic link", func(t *testing.T, dir string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			require.NoError(t, os.Symlink(target, filepath.Join(dir, "c.json.lock")))
		}, "c.json.lock is a symbolic link"},
		{"a directory others may write", func(t *testing.T, dir string) {
			require.NoError(t, os.Chmod(dir, 0o777|os.ModeSticky)) // as /tmp is
		}, "is writable by other users"},
		{"a directory another user owns", func(t *testing.T, dir string) {
			if os.Geteuid() != 0 {
				t.Skip("only root can give a directory away")
			}
			require.NoError(t, os.Chown(dir, 4242, 4242))
		}, "is owned by user 4242"},
		{"a cursor another user owns", func(t *testing.T, dir string) {
			if os.Geteuid() != 0 {
				t.Skip("only root can give a file away")
			}
			plantCursor(t, filepath.Join(dir, "c.json"), 1_000_000)
			require.NoError(t, os.Chown(filepath.Join(dir, "c.json"), 4242, 4242))
		}, "is owned by user 4242"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cursors")
			require.NoError(t, os.Mkdir(dir, 0o700))
			tc.setup(t, dir)
			r := listen(t, filepath.Join(dir, "c.json"))
			require.Equal(t, exitUsage, r.code, r.stderr)
			require.Contains(t, r.stderr, tc.want)
			got, _ := rcv.snapshot()
			require.Empty(t, got, "nothing is forwarded")
		})
	}
	t.Run("the link's target is left alone", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(t.TempDir(), "elsewhere")
		require.NoError(t, os.Symlink(target, filepath.Join(dir, "c.json.lock")))
		listen(t, filepath.Join(dir, "c.json"))
		_, err := os.Lstat(target)
		require.ErrorIs(t, err, os.ErrNotExist, "no file was created through the link")
	})
	t.Run("the default cursor directory is created for the user alone", func(t *testing.T) {
		cfg := t.TempDir()
		path, err := defaultCursorPath(func(k string) string { return map[string]string{"XDG_CONFIG_HOME": cfg}[k] }, testEP)
		require.NoError(t, err)
		c, err := openCursor(path, testEP, api.URL, os.Geteuid())
		require.NoError(t, err)
		require.NoError(t, c.save(3))
		c.close()
		for _, d := range []string{filepath.Join(cfg, "svc"), filepath.Dir(path)} {
			info, err := os.Stat(d)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o700), info.Mode().Perm(), d)
		}
		info, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	})
}

// A cursor ahead of the stream's newest event (another server's, or planted) would make listen wait
// for sequences it then skips: it is refused, and nothing is forwarded or skipped.
func TestListenRefusesACursorAheadOfTheStream(t *testing.T) {
	fastTiming(t)
	src := webhooktest.NewSource(testSecret, testKey, nil)
	for range 5 {
		src.Emit(testEP, "order.created", nil)
	}
	api := httptest.NewServer(src)
	defer api.Close()
	rcv := newReceiver(t, 0)
	local := httptest.NewServer(rcv)
	defer local.Close()
	vars := map[string]string{envAPIKey: testKey, envSecret: testSecret, envBaseURL: api.URL, envEndpoint: testEP}

	cursor := filepath.Join(t.TempDir(), "c.json")
	plantCursor(t, cursor, 1_000_000)
	l := startListen(t, vars, "--forward-to", local.URL, "--cursor", cursor, "--poll", "1ms")
	r := result{l.wait(t), l.stdout.String(), l.stderr.String()}
	require.Equal(t, exitLost, r.code, r.stderr)
	require.Contains(t, r.stderr, "the cursor "+cursor+" is at sequence 1000000, but the newest event of we_listen is before it")
	got, _ := rcv.snapshot()
	require.Empty(t, got)
	var st cursorState
	data, err := os.ReadFile(cursor)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &st))
	require.Equal(t, uint64(1_000_000), st.Sequence, "the cursor is left as it was")

	t.Run("a cursor at the newest event is not ahead: listen waits for the next", func(t *testing.T) {
		cursor := filepath.Join(t.TempDir(), "c.json")
		plantCursor(t, cursor, 5)
		l := startListen(t, vars, "--forward-to", local.URL, "--cursor", cursor, "--poll", "1ms")
		waitFor(t, "a few polls", func() bool { return src.Fetches() > 20 })
		src.Emit(testEP, "order.created", nil)
		waitFor(t, "event 6", func() bool { got, _ := rcv.snapshot(); return len(got) == 1 })
		l.interrupts <- os.Interrupt
		require.Equal(t, exitOK, l.wait(t), l.stderr.String())
		got, _ := rcv.snapshot()
		require.Equal(t, []uint64{6}, got)
		require.False(t, strings.Contains(l.stderr.String(), "ahead"))
	})
}
