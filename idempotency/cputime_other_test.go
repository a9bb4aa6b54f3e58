//go:build !unix

package idempotency_test

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
