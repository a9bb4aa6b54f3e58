package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEnvFile: the file is private, replaces an old one, and a shell that sources it gets every value
// back byte for byte, whatever it contains.
func TestEnvFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.env")
	require.NoError(t, os.WriteFile(path, []byte("BASE=old\n"), 0o644))
	vars := [][2]string{{"BASE", "http://127.0.0.1:8080"}, {"KEY", "sk_sandbox_abc"},
		{"ADMIN", `it's $HOME "quoted" \ and ` + "`cmd`"}}
	require.NoError(t, writeEnvFile(path, vars))

	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the file holds keys")
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left behind")

	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to source the file with")
	}
	out, err := exec.Command(sh, "-c", `. "$1" && printf '%s\n%s\n%s' "$BASE" "$KEY" "$ADMIN"`, "sh", path).Output()
	require.NoError(t, err)
	require.Equal(t, vars[0][1]+"\n"+vars[1][1]+"\n"+vars[2][1], string(out))
}
