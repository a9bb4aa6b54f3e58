package apikey_test

import (
	"testing"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/apikey/credentialtest"
)

func TestMemoryCredentialStore(t *testing.T) {
	t.Run("New", func(t *testing.T) {
		credentialtest.Run(t, func(t *testing.T) apikey.CredentialStore { return apikey.NewMemoryCredentialStore() })
	})
	t.Run("ZeroValue", func(t *testing.T) {
		credentialtest.Run(t, func(t *testing.T) apikey.CredentialStore { return &apikey.MemoryCredentialStore{} })
	})
}
