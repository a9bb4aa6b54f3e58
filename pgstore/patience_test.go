package pgstore_test

import (
	"testing"
	"time"
)

// patience is how long a test may wait for something to happen when it asserts what happened, not
// how fast: most of what is left before the test binary's -timeout (an hour without one), so that a
// busy machine makes such a test slower, never red, and its own message still comes before go test's
// timeout panic.
func patience(t *testing.T) time.Duration {
	if deadline, ok := t.Deadline(); ok {
		return max(time.Until(deadline)*9/10, time.Second)
	}
	return time.Hour
}
