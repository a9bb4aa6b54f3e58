//go:build !unix

package main

// lockFile does not lock where flock is not available: two listens on one endpoint and one cursor
// would both forward its events. Run one at a time there.
func lockFile(string, int) (func(), error) { return func() {}, nil }
