package versioning_test

import (
	"testing"

	"github.com/svcplatform/conventions/versioning"
	"github.com/svcplatform/conventions/versioning/pintest"
)

func TestMemoryPinStoreConformance(t *testing.T) {
	pintest.Run(t, func(t *testing.T) versioning.PinStore { return versioning.NewMemoryPinStore() })
}

func TestMemoryPinStoreZeroValue(t *testing.T) {
	var s versioning.MemoryPinStore
	pintest.Run(t, func(t *testing.T) versioning.PinStore { return &s })
}
