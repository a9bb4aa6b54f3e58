package memstore_test

import (
	"testing"

	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/driver/drivertest"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

func TestMemoryLogConformance(t *testing.T) {
	drivertest.Run(t, func(*testing.T) driver.Log { return memstore.NewLog() })
}

func TestMemoryLogZeroValue(t *testing.T) {
	drivertest.Run(t, func(*testing.T) driver.Log { return &memstore.Log{} })
}

func TestDeferredMemoryLogConformance(t *testing.T) {
	drivertest.Run(t, func(*testing.T) driver.Log { return memstore.NewDeferredLog() })
}

func TestDeferredMemoryLogZeroValue(t *testing.T) {
	drivertest.Run(t, func(*testing.T) driver.Log { return &memstore.DeferredLog{} })
}

func TestMemoryLogStreamQuota(t *testing.T) {
	drivertest.RunStreamQuota(t, func(_ *testing.T, max int) driver.Log { return &memstore.Log{MaxStreamEvents: max} }, 0)
}

func TestDeferredMemoryLogStreamQuota(t *testing.T) {
	drivertest.RunStreamQuota(t, func(_ *testing.T, max int) driver.Log {
		l := memstore.NewDeferredLog()
		l.MaxStreamEvents = max
		return l
	}, 0)
}
