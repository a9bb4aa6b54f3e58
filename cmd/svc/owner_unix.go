//go:build unix

package main

import (
	"os"
	"syscall"
)

// oNoFollow makes an open fail on a symbolic link: svc's cursor, lock and temporary files are opened
// only as the files they are, never through a link someone else may have planted.
const oNoFollow = syscall.O_NOFOLLOW

// fileOwner is the user ID owning the file info describes.
func fileOwner(info os.FileInfo) (int, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
