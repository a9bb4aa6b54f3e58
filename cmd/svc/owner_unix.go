//go:build unix

package main

import (
	"os"
	"syscall"
)

// fileOwner is the user ID owning the file info describes.
func fileOwner(info os.FileInfo) (int, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
