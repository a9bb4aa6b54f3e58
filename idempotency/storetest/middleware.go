package storetest

import (
	"testing"

	"github.com/svcplatform/conventions/idempotency"
)

// newMiddleware is idempotency.New for a configuration the suite wrote itself: a refusal is the
// suite's own bug, reported as such.
func newMiddleware(t testing.TB, o *idempotency.Options) *idempotency.Middleware {
	t.Helper()
	m, err := idempotency.New(o)
	if err != nil {
		t.Fatalf("storetest: the suite's own middleware configuration was refused: %v", err)
	}
	return m
}
