package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestComposeFile keeps examples/compose.yaml and the Dockerfile in step with this command without a
// YAML parser (none is a dependency, and Docker is not needed for the tests): every flag the compose
// file passes exists, every SVC_ variable it sets is one the server reads, the Dockerfile it names
// exists and builds this package with a Go at least as new as the workspace's, and the health check
// probes the port the server listens on. `docker compose -f examples/compose.yaml config` checks the
// rest where Docker is installed.
func TestComposeFile(t *testing.T) {
	compose, err := os.ReadFile(filepath.Join("..", "compose.yaml"))
	require.NoError(t, err)
	text := string(compose)
	server := text[strings.Index(text, "\n  orderserver:\n"):]
	if i := strings.Index(server, "\nvolumes:"); i >= 0 {
		server = server[:i]
	}

	var usage bytes.Buffer
	require.ErrorContains(t, run([]string{"-h"}, &bytes.Buffer{}, &usage), "help requested")
	flags := regexp.MustCompile(`(?m)^\s+- -([a-z-]+)=(\S*)$`).FindAllStringSubmatch(server, -1)
	require.NotEmpty(t, flags, "the orderserver service's command passes flags as - -name=value")
	addr := ""
	for _, f := range flags {
		require.Contains(t, usage.String(), "\n  -"+f[1]+" ", "compose.yaml passes -%s, which orderserver does not define", f[1])
		if f[1] == "addr" {
			addr = f[2]
		}
	}
	require.NotEmpty(t, addr, "compose.yaml sets -addr: the default listens on loopback, unreachable from outside the container")

	vars := regexp.MustCompile(`(?m)^\s+(SVC_[A-Z_]+):`).FindAllStringSubmatch(server, -1)
	require.NotEmpty(t, vars)
	for _, v := range vars {
		require.Contains(t, []string{EnvWebhookAllow, EnvSealKeys, EnvPostgresDSN, EnvRedisURL, EnvAdminToken}, v[1],
			"compose.yaml sets %s, which orderserver does not read", v[1])
	}

	port := addr[strings.LastIndex(addr, ":")+1:]
	require.Contains(t, server, "/dev/tcp/127.0.0.1/"+port+`"]`, "the health check probes the port -addr listens on")
	require.Contains(t, server, ":"+port+`"`, "the published port maps to the port -addr listens on")

	m := regexp.MustCompile(`(?m)^\s+context: (\S+)\n\s+dockerfile: (\S+)$`).FindStringSubmatch(server)
	require.NotNil(t, m, "the orderserver service is built from a context and a Dockerfile")
	root := filepath.Join("..", m[1]) // relative to examples/, where compose.yaml is
	dockerfile, err := os.ReadFile(filepath.Join(root, m[2]))
	require.NoError(t, err)
	require.Contains(t, string(dockerfile), "go build -trimpath -o /out/orderserver ./examples/orderserver")
	_, err = os.Stat(filepath.Join(root, "go.work"))
	require.NoError(t, err, "the build context is the workspace's root")

	image := regexp.MustCompile(`(?m)^FROM golang:(\d+)\.(\d+)\S* AS build$`).FindSubmatch(dockerfile)
	require.NotNil(t, image, "the Dockerfile builds in a golang:<major>.<minor> image")
	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	require.NoError(t, err)
	want := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindSubmatch(work)
	require.NotNil(t, want)
	require.GreaterOrEqual(t, atoi(t, image[1])*1000+atoi(t, image[2]), atoi(t, want[1])*1000+atoi(t, want[2]),
		"the image's Go is older than go.work's go %s.%s", want[1], want[2])
}

func atoi(t *testing.T, b []byte) int {
	t.Helper()
	n, err := strconv.Atoi(string(b))
	require.NoError(t, err)
	return n
}
