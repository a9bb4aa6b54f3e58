package pgstore_test

import (
	"testing"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/storetest"
)

// TestIdempotencyConformance runs the Store contract against a real PostgreSQL: one schema for the
// whole suite, shared by its parallel subtests as replicas share one database.
func TestIdempotencyConformance(t *testing.T) {
	s, _, _ := newIdemStore(t)
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}

func BenchmarkIdempotencyStore(b *testing.B) {
	storetest.RunBenchmarks(b, func(b *testing.B) driver.Store {
		s, _, _ := newIdemStore(b)
		return s
	})
}
