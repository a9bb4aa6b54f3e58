package main

import (
	"os"
	"path/filepath"
	"strings"
)

// writeEnvFile writes vars to path as POSIX shell assignments, one a line, each value single-quoted,
// so that `. path` sets them whatever they contain. The file holds keys: it is created with mode 0600
// and replaces any old one by a rename, so a reader sees either the old file or the whole new one.
func writeEnvFile(path string, vars [][2]string) error {
	var b strings.Builder
	b.WriteString("# Written by orderserver at start; `. " + filepath.Base(path) + "` in a shell sets these.\n")
	for _, v := range vars {
		b.WriteString(v[0] + "=" + shellQuote(v[1]) + "\n")
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }() // a no-op once renamed
	if _, err := f.WriteString(b.String()); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// shellQuote quotes s for a POSIX shell: inside single quotes only the single quote itself needs care.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
