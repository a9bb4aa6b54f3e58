//go:build unix

package main

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on path, held until the returned function is called or the
// process ends (the kernel releases it even after a crash, so a killed listen leaves no stale lock).
// The lock file is opened without following a link, and must be the user's: a link would make svc
// create or lock a file elsewhere.
func lockFile(path string, uid int) (func(), error) {
	f, err := openNoFollow("the cursor's lock", path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := checkOwnFile("the cursor's lock", path, f, uid); err != nil {
		f.Close()
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, usagef("another svc listen is following this endpoint with the cursor %s: two would both forward its events; stop it, or pass --cursor with a file of its own", path[:len(path)-len(".lock")])
		}
		return nil, usagef("the cursor's lock %s: %v", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
