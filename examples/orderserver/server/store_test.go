package server_test

import (
	"testing"

	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/examples/orderserver/server/storetest"
)

// TestMemoryStore runs the Store conformance suite on the in-memory default; pgserver runs it on
// PostgreSQL, so the two agree.
func TestMemoryStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) server.Store { return server.NewMemoryStore() }, nil)
}
