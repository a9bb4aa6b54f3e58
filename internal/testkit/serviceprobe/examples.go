package serviceprobe

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// SkipExamplesUnset is for the TestMain of a package whose runnable Examples need a real server: when
// the variable env is unset, it adds "^Example" to -test.skip (the flag behind go test -skip), keeping
// whatever the command line skipped already, so that the Examples are left out as if skipped, and go
// test -v says so on one line. An Example cannot skip itself the way a test calls t.Skip. Call it
// after flag.Parse.
func SkipExamplesUnset(env, server string) {
	if os.Getenv(env) != "" {
		return
	}
	skip := flag.Lookup("test.skip")
	pattern := "^Example"
	if cur := skip.Value.String(); cur != "" {
		pattern = cur + "|" + pattern // a top-level | in a skip pattern is an alternation of whole patterns
	}
	if err := skip.Value.Set(pattern); err != nil {
		panic(err) // the flag is a string: Set cannot fail
	}
	if testing.Verbose() {
		fmt.Printf("=== SKIP Example*: %s is not set: skipping the Examples, which need a real %s\n", env, server)
	}
}
