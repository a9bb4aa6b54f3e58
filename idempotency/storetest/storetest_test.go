package storetest_test

import (
	"context"
	"errors"
	"time"

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

func TestRunQuotaOnMemoryStore(t *testing.T) {
	storetest.RunQuota(t, 5, func(*testing.T) idempotency.Store {
		return idempotency.NewMemoryStore(&idempotency.MemoryOptions{MaxRecordsPerScope: 5})
	})
}

func BenchmarkRunOnMemoryStore(b *testing.B) {
	storetest.RunBenchmarks(b, func(*testing.B) idempotency.Store { return idempotency.NewMemoryStore(nil) })
}

func TestRunRacingClaimsOnMemoryStore(t *testing.T) {
	storetest.RunRacingClaims(t, idempotency.NewMemoryStore(nil))
}

// failingStore is a store whose backend cannot be reached.
type failingStore struct{ idempotency.Store }

func (failingStore) Claim(context.Context, idempotency.Key, idempotency.Fingerprint, time.Time, time.Time, time.Time) (idempotency.Claim, error) {
	return idempotency.Claim{}, errors.New("connection refused")
}

// The replica harness on replicas that share one MemoryStore, so that a change to the harness is
// checked without a server.
func TestRunReplicasOnSharedMemoryStore(t *testing.T) {
	storetest.RunReplicas(t, storetest.ReplicaConfig{Modes: []storetest.ReplicaMode{{
		Name: "memory",
		Setup: func(*testing.T) storetest.ReplicaBackend {
			s := idempotency.NewMemoryStore(nil)
			return storetest.ReplicaBackend{Options: func() *idempotency.Options { return &idempotency.Options{Store: s} }, Store: s}
		},
		Unreachable: func(*testing.T) *idempotency.Options {
			return &idempotency.Options{Store: failingStore{idempotency.NewMemoryStore(nil)}}
		},
	}}})
}
