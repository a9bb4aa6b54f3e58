package webhook_test

import (
	"testing"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/cursortest"
)

func TestMemoryCursorStore(t *testing.T) {
	cursortest.Run(t, func(*testing.T) webhook.CursorStore { return &webhook.MemoryCursorStore{} })
}
