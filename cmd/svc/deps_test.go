package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// svc links the standard library and this library alone (whose one dependency is google/uuid), so
// that go install fetches nothing else and the root module stays light.
func TestLinksOnlyTheStandardLibraryAndThisLibrary(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	require.NoError(t, err, string(out))
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/svcplatform/conventions/webhook", "the check sees the library's packages")
	for _, p := range deps {
		const root = "github.com/svcplatform/conventions" // its root package is CallerFunc's
		if p != root && !strings.HasPrefix(p, root+"/") && p != "github.com/google/uuid" {
			t.Errorf("svc links %s", p)
		}
		require.NotContains(t, p, "/examples", "svc links no example")
	}
}
