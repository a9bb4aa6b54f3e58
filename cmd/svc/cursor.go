package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// cursorFile is listen's position in an endpoint's stream, kept on disk: the last sequence the
// local URL answered 2xx for. It is replaced atomically (a temporary file, fsync, rename, fsync of
// the directory), so a crash leaves the old cursor or the new one, never a torn file; and it is
// locked while a listen runs, so two listens on one endpoint cannot both forward its events.
type cursorFile struct {
	path     string
	endpoint string
	baseURL  string
	seq      uint64
	exists   bool
	unlock   func()
}

// cursorState is the file's content.
type cursorState struct {
	Endpoint string    `json:"endpoint"`
	BaseURL  string    `json:"base_url"`
	Sequence uint64    `json:"sequence"`
	Updated  time.Time `json:"updated"`
}

// defaultCursorPath is where listen keeps an endpoint's cursor when --cursor does not say.
func defaultCursorPath(getenv func(string) string, endpoint string) (string, error) {
	dir := configDir(getenv)
	if dir == "" {
		return "", usagef("no configuration directory to keep the cursor in ($HOME is not set): pass --cursor FILE")
	}
	return filepath.Join(dir, "svc", "cursors", endpoint+".json"), nil
}

// openCursor locks and reads the cursor at path, creating its directory (0700) when needed. A cursor
// of another endpoint is refused: following it would skip or repeat events. So is one someone else
// could have planted — in a directory other users may write or own, a file another user owns, a
// symbolic link for the cursor or its lock — since a planted cursor makes listen skip events
// silently: the directory must be the user's (or root's) and writable by them alone, and the cursor,
// its lock and its temporary files are opened without following links.
func openCursor(path, endpoint, baseURL string, uid int) (*cursorFile, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, usagef("the cursor's directory: %v", err)
	}
	if err := checkCursorDir(dir, uid); err != nil {
		return nil, err
	}
	unlock, err := lockFile(path+".lock", uid)
	if err != nil {
		return nil, err
	}
	c := &cursorFile{path: path, endpoint: endpoint, baseURL: baseURL, unlock: unlock}
	data, err := readCursor(path, uid)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return c, nil
	case err != nil:
		unlock()
		return nil, err
	}
	var st cursorState
	if err := json.Unmarshal(data, &st); err != nil || st.Endpoint == "" {
		unlock()
		return nil, usagef("the cursor file %s is not one svc wrote (%v): move it away to start afresh", path, err)
	}
	if st.Endpoint != endpoint {
		unlock()
		return nil, usagef("the cursor file %s follows endpoint %s, not %s: pass --cursor with a file of its own", path, st.Endpoint, endpoint)
	}
	c.seq, c.exists = st.Sequence, true
	return c, nil
}

// checkCursorDir refuses a directory where another user could plant or replace a cursor.
func checkCursorDir(dir string, uid int) error {
	info, err := os.Stat(dir)
	if err != nil {
		return usagef("the cursor's directory: %v", err)
	}
	if !info.IsDir() {
		return usagef("the cursor's directory %s is not a directory", dir)
	}
	if err := checkOwner("the cursor's directory", dir, info, uid); err != nil {
		return usagef("%v (another user could plant a cursor there and make listen skip events)", err)
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 && permsMatter {
		return usagef("the cursor's directory %s is writable by other users (mode %v): one could plant a cursor there and make listen skip events; chmod 700 it, or pass --cursor with a file in a directory only you can write",
			dir, perm)
	}
	return nil
}

// maxCursorFile bounds what svc reads of a cursor file, a line of JSON.
const maxCursorFile = 64 << 10

// readCursor reads the cursor file without following a link, and only if it is the user's own.
func readCursor(path string, uid int) ([]byte, error) {
	f, err := openNoFollow("the cursor file", path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := checkOwnFile("the cursor file", path, f, uid); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxCursorFile+1))
	if err != nil {
		return nil, usagef("the cursor file %s: %v", path, err)
	}
	if len(data) > maxCursorFile {
		return nil, usagef("the cursor file %s is not one svc wrote (over %d bytes): move it away to start afresh", path, maxCursorFile)
	}
	return data, nil
}

// openNoFollow opens path without following a symbolic link; a link is refused with a message that
// says so. A path that does not exist is os.ErrNotExist, unwrapped.
func openNoFollow(what, path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|oNoFollow, perm)
	if err == nil {
		return f, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, os.ErrNotExist
	}
	if info, lerr := os.Lstat(path); lerr == nil && info.Mode()&os.ModeSymlink != 0 {
		return nil, usagef("%s %s is a symbolic link: svc does not follow one, since a link can point listen at a cursor it never wrote; remove it, or pass --cursor with the file itself",
			what, path)
	}
	return nil, usagef("%s: %v", what, err)
}

// checkOwnFile refuses an open file that is not a regular file of the user's.
func checkOwnFile(what, path string, f *os.File, uid int) error {
	info, err := f.Stat()
	if err != nil {
		return usagef("%s %s: %v", what, path, err)
	}
	if !info.Mode().IsRegular() {
		return usagef("%s %s is not a regular file", what, path)
	}
	if err := checkOwner(what, path, info, uid); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// save moves the cursor to seq, durably, before the next event is forwarded.
func (c *cursorFile) save(seq uint64) error {
	data, err := json.Marshal(cursorState{Endpoint: c.endpoint, BaseURL: c.baseURL, Sequence: seq, Updated: time.Now().UTC()})
	if err != nil {
		return err
	}
	dir := filepath.Dir(c.path)
	tmp, err := createTemp(c.path)
	if err != nil {
		return fmt.Errorf("saving the cursor: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("saving the cursor: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("saving the cursor: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("saving the cursor: %w", err)
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		return fmt.Errorf("saving the cursor: %w", err)
	}
	syncDir(dir)
	c.seq, c.exists = seq, true
	return nil
}

func (c *cursorFile) close() { c.unlock() }

// createTemp creates a new file beside path, for the user alone: O_EXCL and O_NOFOLLOW, so that it is
// never a file or a link that was there before.
func createTemp(path string) (*os.File, error) {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		f, err := os.OpenFile(path+".tmp-"+hex.EncodeToString(b[:]), os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
		if !errors.Is(err, os.ErrExist) {
			return f, err
		}
	}
}

// syncDir makes a rename in dir durable where the platform allows it; elsewhere the rename is as
// durable as the file system makes it.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
