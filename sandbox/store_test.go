package sandbox_test

import (
	"testing"

	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/sandbox/credentialtest"
)

func TestMemoryCredentialStore(t *testing.T) {
	t.Run("New", func(t *testing.T) {
		credentialtest.Run(t, func(t *testing.T) sandbox.CredentialStore { return sandbox.NewMemoryCredentialStore() })
	})
	t.Run("ZeroValue", func(t *testing.T) {
		credentialtest.Run(t, func(t *testing.T) sandbox.CredentialStore { return &sandbox.MemoryCredentialStore{} })
	})
}
