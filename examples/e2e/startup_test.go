package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEnvFileAndBaseURL: -env-file holds exactly what the server printed, as shell assignments, with
// BASE being -base-url when one is given (a server in a container listens on 0.0.0.0 but is reached
// at the published address); credentials issued later carry that URL too.
func TestEnvFileAndBaseURL(t *testing.T) {
	envFile := filepath.Join(t.TempDir(), "svc.env")
	const public = "http://orders.example.test:8080"
	srv := startOrderServer(t, "orderserver", "-base-url", public+"/", "-env-file", envFile)

	raw, err := os.ReadFile(envFile)
	require.NoError(t, err, "the file is written before the first line is printed")
	vars := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		name, value, ok := strings.Cut(l, "=")
		require.True(t, ok, l)
		vars[name] = strings.Trim(value, "'")
	}
	require.Equal(t, map[string]string{"BASE": public, "KEY": srv.SandboxKey, "LIVE": srv.LiveKey,
		"ADMIN": srv.AdminToken}, vars)
	require.True(t, strings.HasPrefix(srv.URL, "http://127.0.0.1:"), "listening on says where it listens: %s", srv.URL)

	r := request{Method: "POST", URL: srv.URL + "/v1/sandbox/credentials", Auth: bearer(srv.AdminToken), Key: newKey()}.do(t)
	require.Equal(t, public, r.expectJSON(t, http.StatusCreated)["base_url"])
}

// TestBadBaseURL: a -base-url that is not an absolute http(s) URL stops the server at start.
func TestBadBaseURL(t *testing.T) {
	for _, u := range []string{"127.0.0.1:8080", "ftp://host/", "http://", "http://host/?q=1"} {
		out, err := exec.Command(orderserverBin, "-addr", "127.0.0.1:0", "-base-url", u).CombinedOutput()
		require.Error(t, err, u)
		require.Contains(t, string(out), "-base-url: want an absolute http or https URL", u)
	}
}
