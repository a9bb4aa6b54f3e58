package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func env(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

// The secrets never come from flags: the old ones fail, saying what to do instead.
func TestSecretFlagsAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"-secret", "whsec_x", "-endpoint", "we_1"},
		{"--api-key=sk_sandbox_x", "-endpoint", "we_1"},
	} {
		var stderr bytes.Buffer
		err := runEnv(args, env(nil), &bytes.Buffer{}, &stderr)
		require.ErrorContains(t, err, "no longer accepted")
		require.ErrorContains(t, err, EnvSecret)
		require.NotContains(t, stderr.String(), "whsec_x")
		require.NotContains(t, stderr.String(), "sk_sandbox_x")
	}
	// A DSN may hold a password (issue 30): it comes from the environment, and the flag is refused
	// without repeating it.
	for _, args := range [][]string{
		{"-endpoint", "we_1", "-postgres", "postgres://u:pw_secret_value@h/db"},
		{"--postgres=postgres://u:pw_secret_value@h/db", "-endpoint", "we_1"},
	} {
		var stderr bytes.Buffer
		err := runEnv(args, env(nil), &bytes.Buffer{}, &stderr)
		require.ErrorContains(t, err, "no longer accepted")
		require.ErrorContains(t, err, EnvPostgres)
		require.NotContains(t, err.Error(), "pw_secret_value")
		require.NotContains(t, stderr.String(), "pw_secret_value")
	}
}

func TestSecretsFromEnvironmentOrFile(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secretFile, []byte("whsec_fromfile\n"), 0o600))
	openFile := filepath.Join(dir, "open")
	require.NoError(t, os.WriteFile(openFile, []byte("sk_sandbox_open"), 0o644))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))

	var stderr bytes.Buffer
	v, err := readSecret("the signing secret", EnvSecret, secretFile, env(map[string]string{EnvSecret: "whsec_env"}), &stderr)
	require.NoError(t, err)
	require.Equal(t, "whsec_fromfile", v, "a named file wins, its trailing newline dropped")
	require.Empty(t, stderr.String())

	v, err = readSecret("the signing secret", EnvSecret, "", env(map[string]string{EnvSecret: " whsec_env "}), &stderr)
	require.NoError(t, err)
	require.Equal(t, "whsec_env", v)

	v, err = readSecret("the API key", EnvAPIKey, openFile, env(nil), &stderr)
	require.NoError(t, err)
	require.Equal(t, "sk_sandbox_open", v)
	require.Contains(t, stderr.String(), "readable by other users")
	require.NotContains(t, stderr.String(), "sk_sandbox_open")

	_, err = readSecret("the API key", EnvAPIKey, "", env(nil), &stderr)
	require.ErrorContains(t, err, EnvAPIKey)
	require.ErrorContains(t, err, "-api-key-file")
	_, err = readSecret("the API key", EnvAPIKey, empty, env(nil), &stderr)
	require.ErrorContains(t, err, "is empty")
	_, err = readSecret("the API key", EnvAPIKey, filepath.Join(dir, "missing"), env(nil), &stderr)
	require.Error(t, err)

	// Through the command: without a secret anywhere it stops before listening.
	err = runEnv([]string{"-endpoint", "we_1", "-addr", "127.0.0.1:0"}, env(map[string]string{EnvAPIKey: "k"}), &bytes.Buffer{}, &stderr)
	require.ErrorContains(t, err, EnvSecret)
}
