package producer_test

import (
	"testing"

	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/logtest"
)

func TestMemoryLogConformance(t *testing.T) {
	logtest.Run(t, func(*testing.T) producer.Log { return producer.NewMemoryLog() })
}

func TestMemoryLogZeroValue(t *testing.T) {
	logtest.Run(t, func(*testing.T) producer.Log { return &producer.MemoryLog{} })
}

func TestDeferredMemoryLogConformance(t *testing.T) {
	logtest.Run(t, func(*testing.T) producer.Log { return producer.NewDeferredMemoryLog() })
}

func TestMemoryLogStreamQuota(t *testing.T) {
	logtest.RunStreamQuota(t, func(_ *testing.T, max int) producer.Log { return &producer.MemoryLog{MaxStreamEvents: max} }, 0)
}

func TestDeferredMemoryLogStreamQuota(t *testing.T) {
	logtest.RunStreamQuota(t, func(_ *testing.T, max int) producer.Log {
		l := producer.NewDeferredMemoryLog()
		l.MaxStreamEvents = max
		return l
	}, 0)
}
