//go:build unix

package idempotency_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) the process has used, for benchmarks on a shared
// machine, where wall time per operation says as much about the neighbours as about the code.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
