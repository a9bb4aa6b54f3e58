package pgstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
)

// Every constructor refuses a nil DB with an error naming itself; none panics.
func TestConstructorsRefuseANilDB(t *testing.T) {
	tests := map[string]func() error{
		"NewIdempotencyStore": func() error { _, err := pgstore.NewIdempotencyStore(nil, nil); return err },
		"NewTransactor":       func() error { _, err := pgstore.NewTransactor(nil, nil); return err },
		"NewEventLog":         func() error { _, err := pgstore.NewEventLog(nil, nil); return err },
		"NewCursorStore":      func() error { _, err := pgstore.NewCursorStore(nil, nil); return err },
		"NewPinStore":         func() error { _, err := pgstore.NewPinStore(nil, nil); return err },
		"NewCredentialStore":  func() error { _, err := pgstore.NewCredentialStore(nil, nil); return err },
		"NewEndpointStore":    func() error { _, err := pgstore.NewEndpointStore(nil, nil); return err },
		"NewRequestLogStore":  func() error { _, err := pgstore.NewRequestLogStore(nil, nil); return err },
		"NewPortalStore":      func() error { _, err := pgstore.NewPortalStore(nil, nil); return err },
	}
	for name, call := range tests {
		t.Run(name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = call() })
			require.ErrorContains(t, err, "pgstore: "+name)
		})
	}
}
