package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Secrets never come from the command line, which every local user can read (/proc/<pid>/cmdline,
// ps): the flags that would carry one are refused, naming where the value goes instead.
func TestSecretFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"-admin-token", []string{"-admin-token", "adm_secret_value"}},
		{"--admin-token=", []string{"--admin-token=adm_secret_value"}},
		{"-postgres after another flag", []string{"-addr", "127.0.0.1:0", "-postgres", "postgres://u:pw_secret_value@h/db"}},
		{"-redis=", []string{"-redis=redis://:pw_secret_value@h:6379/0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			// A bad -log-level after it: the server as it was stops there instead of serving.
			err := run(append(tc.args, "-log-level", "bogus"), &bytes.Buffer{}, &stderr)
			require.Error(t, err)
			require.ErrorContains(t, err, "visible to every user of the machine")
			require.NotContains(t, err.Error(), "secret_value", "the value is never echoed")
		})
	}
	err := run([]string{"-postgres", "x", "-log-level", "bogus"}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, EnvPostgresDSN)
	err = run([]string{"-redis", "x", "-log-level", "bogus"}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, EnvRedisURL)
	err = run([]string{"-admin-token", "x", "-log-level", "bogus"}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, EnvAdminToken)
	require.ErrorContains(t, err, "-admin-token-file")
}

func TestSecretsFromEnvironmentOrFile(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	s, err := readSecrets(env(map[string]string{EnvAdminToken: " adm_env\n", EnvPostgresDSN: "postgres://h/db", EnvRedisURL: "redis://h/0"}), "")
	require.NoError(t, err)
	require.Equal(t, secrets{adminToken: "adm_env", postgresDSN: "postgres://h/db", redisURL: "redis://h/0"}, s)

	file := filepath.Join(t.TempDir(), "admin-token")
	require.NoError(t, os.WriteFile(file, []byte("adm_file\n"), 0o600))
	s, err = readSecrets(env(nil), file)
	require.NoError(t, err)
	require.Equal(t, "adm_file", s.adminToken, "the file's content, without its final newline")

	_, err = readSecrets(env(map[string]string{EnvAdminToken: "adm_env"}), file)
	require.ErrorContains(t, err, "not both")
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	_, err = readSecrets(env(nil), empty)
	require.ErrorContains(t, err, "-admin-token-file "+empty+" is empty")
	_, err = readSecrets(env(nil), filepath.Join(t.TempDir(), "none"))
	require.ErrorContains(t, err, "-admin-token-file")

	s, err = readSecrets(env(nil), "")
	require.NoError(t, err)
	require.Equal(t, secrets{}, s, "nothing set: a fresh admin token, everything in memory")
}
