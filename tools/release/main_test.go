package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/svcplatform/conventions/tools/internal/repo"
)

func TestRun(t *testing.T) {
	root, err := repo.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	r, err := repo.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	v, err := r.Version() // what the go.mod files say, so that the test holds at every release
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args   []string
		code   int
		stdout []string // lines it must print, in order
		stderr string
	}{
		{nil, 2, nil, "usage:"},
		{[]string{"publish"}, 2, nil, "usage:"},
		{[]string{"version"}, 2, nil, "usage:"},
		{[]string{"version", "v0.0.0"}, 2, nil, "names no release"},
		{[]string{"version", "0.2.0"}, 2, nil, "not a canonical semantic version"},
		{[]string{"check"}, 0, []string{"release " + v + " of 6 published modules, go " + r.GoVersion()}, ""},
		{[]string{"tags"}, 0, []string{v, "examples/" + v, "internal/testkit/" + v, "otelconv/" + v,
			"pgstore/" + v, "redisstore/" + v}, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := run(c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("release %v: exit %d, stderr %q; want %d and %q", c.args, code, stderr.String(), c.code, c.stderr)
		}
		if c.stdout != nil && stdout.String() != strings.Join(c.stdout, "\n")+"\n" {
			t.Errorf("release %v printed:\n%s\nwant:\n%s", c.args, stdout.String(), strings.Join(c.stdout, "\n"))
		}
	}
}
