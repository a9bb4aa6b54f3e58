package main

import (
	"encoding/json"
	"errors"
	"fmt"
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

// openCursor locks and reads the cursor at path, creating its directory when needed. A cursor of
// another endpoint is refused: following it would skip or repeat events.
func openCursor(path, endpoint, baseURL string) (*cursorFile, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, usagef("the cursor's directory: %v", err)
	}
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, err
	}
	c := &cursorFile{path: path, endpoint: endpoint, baseURL: baseURL, unlock: unlock}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return c, nil
	case err != nil:
		unlock()
		return nil, usagef("the cursor: %v", err)
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

// save moves the cursor to seq, durably, before the next event is forwarded.
func (c *cursorFile) save(seq uint64) error {
	data, err := json.Marshal(cursorState{Endpoint: c.endpoint, BaseURL: c.baseURL, Sequence: seq, Updated: time.Now().UTC()})
	if err != nil {
		return err
	}
	dir := filepath.Dir(c.path)
	tmp, err := os.CreateTemp(dir, filepath.Base(c.path)+".tmp-*")
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

// syncDir makes a rename in dir durable where the platform allows it; elsewhere the rename is as
// durable as the file system makes it.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
