package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Paths of the binaries TestMain builds, shared by every test.
var (
	orderserverBin string
	consumerBin    string
	svcBin         string
)

// TestMain builds the programs — the order server, the consumer and svc — once for the whole run,
// into a temporary directory removed at the end: building per test would cost more than the tests.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		args := []string{"build", "-o", dir + string(filepath.Separator)}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "github.com/svcplatform/conventions/examples/orderserver",
			"github.com/svcplatform/conventions/examples/consumer", "github.com/svcplatform/conventions/cmd/svc")
		cmd := exec.Command("go", args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: building the binaries:", err)
			return 1
		}
		orderserverBin = filepath.Join(dir, "orderserver")
		consumerBin = filepath.Join(dir, "consumer")
		svcBin = filepath.Join(dir, "svc")
		code := m.Run()
		// The contract's coverage spans the whole run, so it is judged once every test has ended.
		return max(code, reportContract(os.Stdout))
	}())
}
