package storetest_test

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"testing"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/memstore"
	"github.com/svcplatform/conventions/idempotency/storetest"
)

// The suite runs on the reference implementation here, so that a change to the suite is checked
// against a store known to be right before the adapters' suites run it.
func TestRunOnMemoryStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) driver.Store { return memstore.New(nil) })
}

func TestRunOnSharedStore(t *testing.T) {
	// One store for every subtest, as adapters on a shared server do: the tests' keys must not meet.
	s := memstore.New(nil)
	storetest.Run(t, func(*testing.T) driver.Store { return s })
}

func TestRunQuotaOnMemoryStore(t *testing.T) {
	storetest.RunQuota(t, 5, func(*testing.T) driver.Store {
		return memstore.New(&memstore.Options{MaxRecordsPerScope: 5})
	})
}

func BenchmarkRunOnMemoryStore(b *testing.B) {
	// The write benchmarks keep about 20,000 records of one scope: above the default quota.
	storetest.RunBenchmarks(b, func(*testing.B) driver.Store {
		return memstore.New(&memstore.Options{MaxRecordsPerScope: 50_000})
	})
}

func TestRunRacingClaimsOnMemoryStore(t *testing.T) {
	storetest.RunRacingClaims(t, memstore.New(nil))
}

// failingStore is a store whose backend cannot be reached.
type failingStore struct{ driver.Store }

func (failingStore) Claim(context.Context, driver.Key, driver.Fingerprint, time.Time, time.Time, time.Time) (driver.Claim, error) {
	return driver.Claim{}, errors.New("connection refused")
}

// The replica harness on replicas that share one memstore.Store, so that a change to the harness is
// checked without a server.
func TestRunReplicasOnSharedMemoryStore(t *testing.T) {
	storetest.RunReplicas(t, storetest.ReplicaConfig{Modes: []storetest.ReplicaMode{{
		Name: "memory",
		Setup: func(*testing.T) storetest.ReplicaBackend {
			s := memstore.New(nil)
			return storetest.ReplicaBackend{Options: func() *idempotency.Options { return &idempotency.Options{Store: s} }, Store: s}
		},
		Unreachable: func(*testing.T) *idempotency.Options {
			return &idempotency.Options{Store: failingStore{memstore.New(nil)}}
		},
	}}})
}

// outageMemory breaks a memstore.Store the way a proxy breaks a server: every call fails while cut,
// and waits for its context while stalled.
type outageMemory struct {
	driver.Store
	cut, stalled atomic.Bool
}

func (o *outageMemory) fail(ctx context.Context) error {
	if o.stalled.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if o.cut.Load() {
		return errors.New("connection reset")
	}
	return nil
}

func (o *outageMemory) Claim(ctx context.Context, k driver.Key, fp driver.Fingerprint, now, lu, exp time.Time) (driver.Claim, error) {
	if err := o.fail(ctx); err != nil {
		return driver.Claim{}, err
	}
	return o.Store.Claim(ctx, k, fp, now, lu, exp)
}

func (o *outageMemory) Renew(ctx context.Context, k driver.Key, tok uint64, lu time.Time) error {
	if err := o.fail(ctx); err != nil {
		return err
	}
	return o.Store.Renew(ctx, k, tok, lu)
}

func (o *outageMemory) Complete(ctx context.Context, k driver.Key, tok uint64, resp driver.Response, exp time.Time) error {
	if err := o.fail(ctx); err != nil {
		return err
	}
	return o.Store.Complete(ctx, k, tok, resp, exp)
}

// The outage harness on a wrapped memstore.Store, so that a change to the harness is checked without a
// server.
func TestRunOutageOnMemoryStore(t *testing.T) {
	storetest.RunOutage(t, func(*testing.T) storetest.OutageBackend {
		o := &outageMemory{Store: memstore.New(nil)}
		return storetest.OutageBackend{Store: o,
			Cut:     func() { o.cut.Store(true) },
			Stall:   func() { o.stalled.Store(true) },
			Restore: func() { o.cut.Store(false); o.stalled.Store(false) }}
	})
}
