// Command installcheck proves that a team outside this repository can install every public module
// at the release version and run the README's first service. It is a step of scripts/test.sh.
//
//  1. It writes a module proxy (GOPROXY=file://…) of every published module at the release version
//     (tools/release proxy), from the working tree.
//  2. In a temporary module outside the repository, with GOWORK=off, GOFLAGS=-mod=mod, an empty
//     module cache of its own, and GOPROXY set to that proxy, then the machine's module cache and the
//     machine's proxy for third-party modules (GONOSUMDB for this repository's modules only, which
//     the checksum database has not seen), it runs `go get` on every public module at that version,
//     checks that each one arrived with a LICENSE, and builds every package of them.
//  3. It installs cmd/svc with `go install …/cmd/svc@version`, as the README says, and runs it.
//  4. It copies the README's first service (the ```go block after the `first service` marker) into
//     the module, with a probe program (testdata/probe), runs `go mod tidy`, `go vet` and `go build`,
//     starts the service on a free loopback port against the test script's PostgreSQL (a schema of
//     its own, dropped at the end) and lets the probe check it from outside: idempotent replays,
//     located problems, the version router, and the order.created events on the account's webhook
//     endpoint, exactly once each; then idempotency on Redis observed by otelconv.
//
// It needs SVC_TEST_POSTGRES_DSN and SVC_TEST_REDIS_URL, as scripts/test.sh exports them, and exits
// non-zero, saying which step failed, when anything fails.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/svcplatform/conventions/tools/internal/repo"
)

//go:embed testdata/probe/main.go
var probeSource []byte

// marker precedes the README's first service: the ```go block after it is what the check runs.
const marker = "<!-- first service:"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "installcheck: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("installcheck: ok")
}

func run() error {
	for _, env := range []string{"SVC_TEST_POSTGRES_DSN", "SVC_TEST_REDIS_URL"} {
		if os.Getenv(env) == "" {
			return fmt.Errorf("%s is not set: the first service runs against the real PostgreSQL and Redis (scripts/test.sh sets both)", env)
		}
	}
	root, err := repo.FindRoot()
	if err != nil {
		return err
	}
	r, err := repo.Load(root)
	if err != nil {
		return err
	}
	if errs := r.Check(); len(errs) > 0 {
		return fmt.Errorf("the modules break the release rules (go run ./tools/release check):\n%w", errors.Join(errs...))
	}
	version, err := r.Version()
	if err != nil {
		return err
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		return err
	}
	service, err := firstService(readme)
	if err != nil {
		return err
	}

	tmp, err := os.MkdirTemp("", "svc-installcheck-")
	if err != nil {
		return err
	}
	modcache := filepath.Join(tmp, "modcache")
	defer func() {
		// The module cache is read-only, as the go command leaves it.
		_ = filepath.WalkDir(modcache, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o755)
			}
			return nil
		})
		_ = os.RemoveAll(tmp)
	}()

	step("module proxy of %d published modules at %s, from the working tree", len(r.Published()), version)
	proxy := filepath.Join(tmp, "proxy")
	if err := r.WriteProxy(proxy, version, time.Now()); err != nil {
		return err
	}

	machineProxy, machineCache, err := machineGoEnv()
	if err != nil {
		return err
	}
	module := filepath.Join(tmp, "firstservice")
	if err := os.MkdirAll(filepath.Join(module, "probe"), 0o755); err != nil {
		return err
	}
	goEnv := append(cleanEnv(),
		"GOWORK=off",
		"GOFLAGS=-mod=mod",
		"GOMODCACHE="+modcache,
		"GOPROXY="+strings.Join([]string{fileURL(proxy), fileURL(filepath.Join(machineCache, "cache", "download")), machineProxy}, ","),
		"GONOSUMDB=github.com/svcplatform/conventions",
		"GOPRIVATE=", "GONOPROXY=", "GOINSECURE=",
		"GOTOOLCHAIN=local",
		"GOBIN="+filepath.Join(tmp, "bin"),
	)
	goCmd := func(args ...string) error { return command(module, goEnv, "go", args...) }

	step("go get every public module at %s, outside the repository", version)
	floor := r.GoVersion()
	gomod := fmt.Sprintf("module example.com/firstservice\n\ngo %s\n", floor)
	if err := os.WriteFile(filepath.Join(module, "go.mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	var public []*repo.Module
	get := []string{"get"}
	for _, m := range r.Published() {
		if !isInternal(m.Path) {
			public = append(public, m)
			get = append(get, m.Path+"@"+version)
		}
	}
	if err := goCmd(get...); err != nil {
		return err
	}
	for _, m := range r.Published() { // testkit too: the public modules' requirements fetched it
		dir, err := output(module, goEnv, "go", "list", "-m", "-f", "{{.Dir}}", m.Path+"@"+version)
		if err != nil {
			return err
		}
		if dir == "" {
			continue // in the graph but not downloaded: only its go.mod was needed
		}
		if _, err := os.Stat(filepath.Join(dir, "LICENSE")); err != nil {
			return fmt.Errorf("%s@%s has no LICENSE in its module zip", m.Path, version)
		}
	}

	step("build every package of the public modules")
	build := []string{"build"}
	for _, m := range public {
		build = append(build, m.Path+"/...")
	}
	if err := goCmd(build...); err != nil {
		return err
	}

	step("go install github.com/svcplatform/conventions/cmd/svc@%s", version)
	if err := goCmd("install", "github.com/svcplatform/conventions/cmd/svc@"+version); err != nil {
		return err
	}
	if err := command(module, goEnv, filepath.Join(tmp, "bin", "svc"), "help"); err != nil {
		return err
	}

	step("the README's first service: go mod tidy, go vet, go build")
	if err := os.WriteFile(filepath.Join(module, "main.go"), service, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(module, "probe", "main.go"), probeSource, 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"vet", "./..."}, {"build", "-o", "bin/", "./..."}} {
		if err := goCmd(args...); err != nil {
			return err
		}
	}

	step("run it on PostgreSQL and probe it from outside; Redis and OpenTelemetry through the probe")
	if err := runFirstService(module, goEnv); err != nil {
		return err
	}
	step("done")
	return nil
}

// runFirstService starts the built service on a free loopback port, in a schema of its own, waits
// until it answers, runs the probe and stops the service.
func runFirstService(module string, env []string) (err error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "installcheck_" + hex.EncodeToString(b[:])
	probe := filepath.Join(module, "bin", "probe")
	if err := command(module, env, probe, "schema", "create", schema); err != nil {
		return err
	}
	defer func() {
		if derr := command(module, env, probe, "schema", "drop", schema); derr != nil && err == nil {
			err = derr
		}
	}()
	dsn, err := withSearchPath(os.Getenv("SVC_TEST_POSTGRES_DSN"), schema)
	if err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	var logs bytes.Buffer
	svc := exec.Command(filepath.Join(module, "bin", "firstservice"))
	svc.Dir = module
	svc.Env = append(env, "SVC_POSTGRES_DSN="+dsn, "ADDR="+addr)
	svc.Stdout, svc.Stderr = &logs, &logs
	if err := svc.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- svc.Wait() }()
	defer func() {
		_ = svc.Process.Signal(syscall.SIGTERM)
		<-exited
		if err != nil && logs.Len() > 0 {
			err = fmt.Errorf("%w\nthe first service's log:\n%s", err, logs.String())
		}
	}()
	base := "http://" + addr
	if err := waitAnswers(base, exited); err != nil {
		return err
	}
	return command(module, env, probe, "check", base, schema)
}

// waitAnswers polls base until the service answers HTTP (it listens once its tables exist), for at
// most a minute, or until it exits.
func waitAnswers(base string, exited <-chan error) error {
	client := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		select {
		case err := <-exited:
			return fmt.Errorf("the first service exited before answering: %v", err)
		default:
		}
		if resp, err := client.Get(base + "/v1/orders"); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("the first service did not answer within a minute")
}

// firstService returns the Go source of the README's first service: the ```go block that follows
// the marker.
func firstService(readme []byte) ([]byte, error) {
	i := bytes.Index(readme, []byte(marker))
	if i < 0 {
		return nil, fmt.Errorf("README.md has no %q marker before the first service", marker+" … -->")
	}
	m := regexp.MustCompile("(?s)\\A[^\\n]*-->\\s*```go\\n(.*?)\\n```").FindSubmatch(readme[i:])
	if m == nil {
		return nil, errors.New("README.md: the first-service marker is not followed by a ```go block")
	}
	return append(m[1], '\n'), nil
}

// withSearchPath returns dsn with its search_path set to schema, in either form pgx accepts.
func withSearchPath(dsn, schema string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", errors.New("SVC_TEST_POSTGRES_DSN does not parse as a URL") // never echo: it may hold a password
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return dsn + " search_path=" + schema, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// machineGoEnv returns the proxy and module cache the go command uses on this machine outside the
// check.
func machineGoEnv() (proxy, modcache string, err error) {
	out, err := output("", os.Environ(), "go", "env", "GOPROXY", "GOMODCACHE")
	if err != nil {
		return "", "", err
	}
	lines := strings.Split(out, "\n")
	if len(lines) != 2 || lines[0] == "" || lines[0] == "off" {
		return "", "", fmt.Errorf("go env GOPROXY GOMODCACHE: %q: third-party modules need a proxy", out)
	}
	return lines[0], lines[1], nil
}

// cleanEnv is the environment without the go command's settings that the check sets itself.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GOWORK", "GOFLAGS", "GOMODCACHE", "GOPROXY", "GONOSUMDB", "GONOSUMCHECK", "GOPRIVATE",
			"GONOPROXY", "GOINSECURE", "GOTOOLCHAIN", "GOBIN", "GOENV":
			continue
		}
		env = append(env, kv)
	}
	// The user's go env file could set any of them again.
	return append(env, "GOENV=off")
}

func fileURL(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

func isInternal(modPath string) bool {
	return strings.Contains("/"+modPath+"/", "/internal/")
}

// started is when the check began: each step says how far in it starts.
var started = time.Now()

func step(format string, args ...any) {
	fmt.Printf("installcheck: [%3.0fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
}

// command runs name with args in dir, its output going to ours, and names it in the error.
func command(dir string, env []string, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", filepath.Base(name), strings.Join(args, " "), err)
	}
	return nil
}

func output(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
