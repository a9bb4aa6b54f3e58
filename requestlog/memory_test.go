package requestlog_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/requestlog"
	"github.com/svcplatform/conventions/requestlog/requestlogtest"
)

func TestMemoryStoreConformance(t *testing.T) {
	requestlogtest.Run(t, func(t *testing.T) requestlog.Store {
		s, err := requestlog.NewMemoryStore(nil)
		require.NoError(t, err)
		return s
	})
}
