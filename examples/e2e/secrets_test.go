package e2e

import (
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/internal/testenv"
)

// TestSecretsNotOnCommandLine: the order server takes its DSNs and admin token from its environment,
// which only its user can read, and none of them is in its command line, which every user of the
// machine can (/proc/<pid>/cmdline, ps).
func TestSecretsNotOnCommandLine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/<pid>/cmdline")
	}
	dsn := testenv.PostgresDSN(t)
	redisURL, prefix := testenv.Redis(t)
	admin := "adm_" + newKey()
	srv := startOrderServerEnv(t, "orderserver", []string{loopbackAllow, postgresEnv(dsn), redisEnv(redisURL), adminTokenEnv(admin)},
		"-redis-prefix", prefix)

	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(srv.cmd.Process.Pid) + "/cmdline")
	require.NoError(t, err)
	args := strings.ReplaceAll(string(cmdline), "\x00", " ")
	require.Contains(t, args, "-redis-prefix", "the command line is the server's")
	for _, secret := range []string{dsn, redisURL, admin} {
		require.NotContains(t, args, secret)
	}

	// The server runs on what the environment said: the admin token, PostgreSQL and Redis.
	require.Equal(t, admin, srv.AdminToken)
	request{Method: "POST", URL: srv.URL + "/v1/sandbox/credentials", Auth: bearer(admin), Key: newKey()}.do(t).
		expectJSON(t, http.StatusCreated)
	eventually(t, startTimeout, func() bool {
		for _, l := range srv.stderr.Lines() {
			if strings.Contains(l, "orderserver started") && strings.Contains(l, "storage=postgres+redis") {
				return true
			}
		}
		return false
	}, "the server never logged that it uses PostgreSQL and Redis")
}
