package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestNoDatabaseDriverLinked: the demo runs everything in memory, and so does a program that embeds
// the reference server without PostgreSQL, so neither may build or link a database driver — the
// PostgreSQL wiring lives in package pgserver, which only the orderserver command imports. The check
// asks the go command itself (go test puts its own GOROOT/bin first on PATH, so this is the same
// toolchain) for the packages each one links.
func TestNoDatabaseDriverLinked(t *testing.T) {
	forbidden := []string{
		"github.com/jackc/",                             // pgx
		"github.com/redis/",                             // go-redis
		"github.com/svcplatform/conventions/pgstore",    // the PostgreSQL adapters
		"github.com/svcplatform/conventions/redisstore", // the Redis adapters
		"github.com/svcplatform/conventions/examples/orderserver/server/pgserver",
	}
	for _, pkg := range []string{
		"github.com/svcplatform/conventions/examples/demo",
		"github.com/svcplatform/conventions/examples/orderserver/server",
		"github.com/svcplatform/conventions/examples/consumer/consumer",
	} {
		t.Run(pkg[strings.Index(pkg, "examples/"):], func(t *testing.T) {
			for _, dep := range listDeps(t, pkg) {
				for _, f := range forbidden {
					if strings.HasPrefix(dep, f) {
						t.Errorf("%s links %s", pkg, dep)
					}
				}
			}
		})
	}
	// The control: the command that offers -postgres does link pgx, and the check sees it.
	t.Run("control: examples/orderserver links pgx", func(t *testing.T) {
		if !slices.Contains(listDeps(t, "github.com/svcplatform/conventions/examples/orderserver"), "github.com/jackc/pgx/v5") {
			t.Fatal("go list -deps ./orderserver does not list github.com/jackc/pgx/v5: the check above would see nothing either")
		}
	})
}

// listDeps returns what go list -deps prints for pkg: every package it links, itself last.
func listDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != pkg {
		t.Fatalf("go list -deps %s printed %q: not a dependency list", pkg, out)
	}
	return deps
}
