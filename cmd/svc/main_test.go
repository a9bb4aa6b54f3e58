package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/svcplatform/conventions/internal/syncbuf"
)

// result is what one run of svc did.
type result struct {
	code           int
	stdout, stderr string
}

// testEnv is svc's environment in a test: vars only (never the test process's own environment, so
// a developer's SVC_API_KEY cannot leak in), a configuration directory of the test's own.
func testEnv(t testing.TB, vars map[string]string, stdin string) (env, *syncbuf.Buffer, *syncbuf.Buffer) {
	t.Helper()
	all := map[string]string{"XDG_CONFIG_HOME": t.TempDir()}
	for k, v := range vars {
		all[k] = v
	}
	out, errb := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	return env{getenv: func(k string) string { return all[k] }, stdin: strings.NewReader(stdin), stdout: out, stderr: errb,
		uid: os.Geteuid(), interrupts: make(chan os.Signal)}, out, errb
}

func runSvc(t *testing.T, vars map[string]string, stdin string, args ...string) result {
	t.Helper()
	e, out, errb := testEnv(t, vars, stdin)
	code := run(args, e)
	return result{code, out.String(), errb.String()}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"help"}, {"--help"}, {"-h"}, {"listen", "--help"}, {"trigger", "-h"}, {"events", "--help"}, {"verify", "--help"},
		{"endpoints", "--help"}, {"endpoints", "create", "--help"}, {"endpoints", "list", "--help"},
		{"endpoints", "get", "--help"}, {"endpoints", "update", "--help"}, {"endpoints", "disable", "--help"},
		{"endpoints", "enable", "--help"}, {"endpoints", "delete", "--help"}, {"endpoints", "roll-secret", "--help"},
		{"event-types", "--help"}, {"keys", "--help"}, {"keys", "list", "--help"}, {"keys", "create", "--help"},
		{"keys", "get", "--help"}, {"keys", "revoke", "--help"}, {"keys", "roll", "--help"},
		{"requests", "--help"}, {"requests", "list", "--help"}, {"requests", "get", "--help"},
		{"version-pin", "--help"}, {"version-pin", "show", "--help"}, {"version-pin", "upgrade", "--help"},
		{"version-pin", "rollback", "--help"}, {"changelog", "--help"}, {"help", "requests"}, {"portal", "--help"},
		{"orders", "create", "--help"}, {"faults", "set", "--help"}, {"faults", "clear", "--help"},
		{"credentials", "new", "--help"}, {"version", "--help"}, {"help", "listen"}, {"help", "faults"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := runSvc(t, nil, "", args...)
			require.Equal(t, exitOK, r.code, r.stderr)
			require.Contains(t, r.stdout, "Usage: svc")
			require.Empty(t, r.stderr)
		})
	}
	t.Run("a group's help says what it needs beyond its commands", func(t *testing.T) {
		r := runSvc(t, nil, "", "requests", "--help")
		for _, want := range []string{"Usage: svc requests <command> [flags]", "list ", "get ", "X-Request-Id header",
			"problem in its request_id member"} {
			require.Contains(t, r.stdout, want)
		}
	})
	t.Run("the overview lists every command, the environment and the exit codes", func(t *testing.T) {
		r := runSvc(t, nil, "", "help")
		for _, want := range []string{"listen", "trigger", "events", "verify", "endpoints create", "endpoints list",
			"endpoints get", "endpoints update", "endpoints disable", "endpoints enable", "endpoints delete",
			"endpoints roll-secret", "event-types", "keys list", "keys roll", "requests list", "requests get",
			"version-pin show", "version-pin upgrade", "version-pin rollback", "changelog", "portal", "version ",
			"orders create", "faults set", "faults clear", "credentials new", "SVC_API_KEY", "SVC_BASE_URL",
			"SVC_WEBHOOK_SECRET", "Exit codes:"} {
			require.Contains(t, r.stdout, want)
		}
	})
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "Usage: svc"},
		{"unknown command", []string{"lisen"}, `unknown command "svc lisen"`},
		{"unknown subcommand", []string{"faults", "reset"}, `unknown command "svc faults reset"`},
		{"a group alone", []string{"faults"}, "Usage: svc faults"},
		{"unknown flag", []string{"events", "--frm", "1"}, "flag provided but not defined: -frm"},
		{"an argument too many", []string{"events", "--from", "1", "extra"}, `unexpected argument "extra"`},
		{"events without --from", []string{"events", "--endpoint", "we_1"}, "--from is required"},
		{"events backwards", []string{"events", "--from", "5", "--to", "4"}, "--to 4 is before --from 5"},
		{"listen without --forward-to", []string{"listen", "--endpoint", "we_1"}, "--forward-to is required"},
		{"listen to a relative URL", []string{"listen", "--forward-to", "localhost:3000"}, "must be an absolute http or https URL"},
		{"an endpoint ID that is not one", []string{"faults", "clear", "--endpoint", "../../v1/orders"}, "is not a webhook endpoint ID"},
		{"no API key", []string{"endpoints", "list"}, "set SVC_API_KEY"},
		{"a bad base URL", []string{"endpoints", "list", "--base-url", "ftp://x"}, "must be an absolute http or https URL"},
		{"a bad version", []string{"endpoints", "list", "--api-version", "latest"}, `API version "latest"`},
		{"verify without the signature", []string{"verify"}, "--signature is required"},
		{"credentials without the admin token", []string{"credentials", "new"}, "set SVC_ADMIN_TOKEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runSvc(t, nil, "", tc.args...)
			require.Equal(t, exitUsage, r.code)
			require.Contains(t, r.stderr, tc.want)
		})
	}
}

// A secret on the command line shows in ps: svc has no flag for one, and says where it goes instead.
func TestSecretFlagsRefused(t *testing.T) {
	for flag, env := range map[string]string{"--api-key": envAPIKey, "-secret": envSecret, "--webhook-secret=whsec_x": envSecret,
		"--admin-token": envAdminToken} {
		t.Run(flag, func(t *testing.T) {
			r := runSvc(t, nil, "", "events", "--from", "1", flag, "sk_sandbox_x")
			require.Equal(t, exitUsage, r.code)
			require.Contains(t, r.stderr, "visible to every user of the machine")
			require.Contains(t, r.stderr, env)
			require.NotContains(t, r.stderr, "sk_sandbox_x")
		})
	}
}

func TestConfigFile(t *testing.T) {
	write := func(t *testing.T, content string, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), "config")
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	load := func(t *testing.T, vars map[string]string, c common) (*config, string, error) {
		e, _, errb := testEnv(t, vars, "")
		cfg, err := loadConfig(e, c)
		return cfg, errb.String(), err
	}
	t.Run("values come from the file, the environment wins, and a flag wins over both", func(t *testing.T) {
		p := write(t, "# svc\napi_key = sk_sandbox_file\nbase_url = http://file.example:1/\nwebhook_secret = whsec_a, whsec_b\napi_version = v2\n", 0o600)
		cfg, warn, err := load(t, map[string]string{envConfig: p}, common{})
		require.NoError(t, err)
		require.Empty(t, warn)
		require.Equal(t, "sk_sandbox_file", cfg.APIKey)
		require.Equal(t, "http://file.example:1", cfg.BaseURL)
		require.Equal(t, []string{"whsec_a", "whsec_b"}, cfg.Secrets)
		require.Equal(t, "v2", cfg.APIVersion)

		cfg, _, err = load(t, map[string]string{envConfig: p, envAPIKey: "sk_sandbox_env", envBaseURL: "http://env.example"}, common{})
		require.NoError(t, err)
		require.Equal(t, "sk_sandbox_env", cfg.APIKey)
		require.Equal(t, "http://env.example", cfg.BaseURL)

		cfg, _, err = load(t, map[string]string{envConfig: p, envBaseURL: "http://env.example"},
			common{baseURL: "https://flag.example", apiVersion: "v3"})
		require.NoError(t, err)
		require.Equal(t, "https://flag.example", cfg.BaseURL)
		require.Equal(t, "v3", cfg.APIVersion)
	})
	t.Run("the default file is read from the configuration directory", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "svc"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "svc", "config"), []byte("api_key=sk_sandbox_default\n"), 0o600))
		cfg, _, err := load(t, map[string]string{"XDG_CONFIG_HOME": dir}, common{})
		require.NoError(t, err)
		require.Equal(t, "sk_sandbox_default", cfg.APIKey)
		require.Equal(t, defaultBaseURL, cfg.BaseURL)
		require.Equal(t, defaultAPIVersion, cfg.APIVersion)
	})
	if !permsMatter {
		return
	}
	t.Run("a file others may write is refused: they could send the key elsewhere", func(t *testing.T) {
		p := write(t, "api_key = sk_sandbox_x\n", 0o622)
		_, _, err := load(t, map[string]string{envConfig: p}, common{})
		require.ErrorContains(t, err, "writable by other users")
	})
	t.Run("a file another user owns is refused, whatever its mode: its base_url would receive the key", func(t *testing.T) {
		p := write(t, "api_key = sk_sandbox_x\nbase_url = http://attacker.example\n", 0o644)
		vars := map[string]string{envConfig: p}
		e, _, _ := testEnv(t, vars, "")
		owner := os.Geteuid()
		if owner == 0 {
			owner = 4242
			require.NoError(t, os.Chown(p, owner, owner)) // a real file of another user
		} else {
			e.uid = owner + 1 // without root no file can be given away: svc is told it runs as another user
		}
		_, err := loadConfig(e, common{})
		require.ErrorContains(t, err, fmt.Sprintf("config file %s is owned by user %d", p, owner))
		require.ErrorContains(t, err, "chown")
		if os.Geteuid() == 0 {
			r := runSvc(t, vars, "", "endpoints", "list")
			require.Equal(t, exitUsage, r.code)
			require.Contains(t, r.stderr, p)
			require.NotContains(t, r.stderr, "attacker.example")
		}
	})
	t.Run("a file others may read is used, with a warning", func(t *testing.T) {
		p := write(t, "api_key = sk_sandbox_x\n", 0o644)
		cfg, warn, err := load(t, map[string]string{envConfig: p}, common{})
		require.NoError(t, err)
		require.Equal(t, "sk_sandbox_x", cfg.APIKey)
		require.Contains(t, warn, "readable by other users")
	})
	for name, content := range map[string]string{
		"an unknown name":        "api_kye = x\n",
		"a line without a value": "api_key\n",
		"a name set twice":       "api_key = a\napi_key = b\n",
	} {
		t.Run(name+" is refused with its line", func(t *testing.T) {
			p := write(t, "# comment\n"+content, 0o600)
			_, _, err := load(t, map[string]string{envConfig: p}, common{})
			require.ErrorContains(t, err, p+":")
		})
	}
	t.Run("a named file that does not exist is an error; the default one may be absent", func(t *testing.T) {
		_, _, err := load(t, map[string]string{envConfig: filepath.Join(t.TempDir(), "none")}, common{})
		require.Error(t, err)
		_, _, err = load(t, nil, common{})
		require.NoError(t, err)
	})
}

// The package documentation (go doc) repeats what "svc help" prints about the environment and the
// exit codes; this keeps the two from drifting apart.
func TestDocMatchesHelp(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	var text strings.Builder
	for _, line := range strings.Split(string(doc), "\n") {
		text.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "//"), "\t") + "\n")
	}
	got := norm(text.String())
	for _, help := range []string{exitCodesHelp, configHelp} {
		for _, line := range strings.Split(strings.TrimSpace(help), "\n") {
			if strings.HasSuffix(line, ":") || strings.HasPrefix(line, "The config file") || strings.HasPrefix(line, "and svc") ||
				strings.HasPrefix(line, "visible to") {
				continue // headings and the prose, which doc.go words at more length
			}
			require.Contains(t, got, norm(line))
		}
	}
	for _, c := range commands {
		require.Contains(t, got, "svc "+c.name, "doc.go names every command")
	}
}
