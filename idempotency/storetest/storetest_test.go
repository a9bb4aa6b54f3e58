package storetest_test

import (
	"testing"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/storetest"
)

// The suite runs on the reference implementation here, so that a change to the suite is checked
// against a store known to be right before the adapters' suites run it.
func TestRunOnMemoryStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) idempotency.Store { return idempotency.NewMemoryStore(nil) })
}

func TestRunOnSharedStore(t *testing.T) {
	// One store for every subtest, as adapters on a shared server do: the tests' keys must not meet.
	s := idempotency.NewMemoryStore(nil)
	storetest.Run(t, func(*testing.T) idempotency.Store { return s })
}

func BenchmarkRunOnMemoryStore(b *testing.B) {
	storetest.RunBenchmarks(b, func(*testing.B) idempotency.Store { return idempotency.NewMemoryStore(nil) })
}
