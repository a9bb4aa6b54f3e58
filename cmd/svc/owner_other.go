//go:build !unix

package main

import "os"

// oNoFollow is 0 where the platform has no O_NOFOLLOW.
const oNoFollow = 0

// fileOwner knows no owner where files have no Unix owner.
func fileOwner(os.FileInfo) (int, bool) { return 0, false }
