package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/importer"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/svcplatform/conventions/tools/internal/repo"
)

// recordDir is the directory, relative to the repository root, that holds the record files.
const recordDir = "api"

// The platform the record is of. go list picks a package's files by its build constraints, so an
// identifier declared only in a file for some other platform would come and go with the machine that
// regenerates the record; fixing the platform makes the record the same everywhere. None of the
// recorded packages has a platform-specific file today.
const (
	recordGOOS   = "linux"
	recordGOARCH = "amd64"
)

// fileName is the name of m's record file in recordDir: the last element of the module path for the root
// module (conventions.txt), the module's directory for the others, with - for / (pgstore.txt).
func fileName(m *repo.Module) string {
	if m.Dir == "." {
		return path.Base(m.Path) + ".txt"
	}
	return strings.ReplaceAll(m.Dir, "/", "-") + ".txt"
}

// recorded reports whether m gets a record: it is published, and its path has no internal element
// (internal/testkit), which would make every package of it importable only from inside this
// repository.
func recorded(m *repo.Module) bool {
	return m.Published && !isInternal(m.Path)
}

// isInternal reports whether an import path has an internal element, which the go command lets only
// the tree above that element import.
func isInternal(importPath string) bool {
	return slices.Contains(strings.Split(importPath, "/"), "internal")
}

// generate returns the record files of r's modules, by their path relative to the root with
// slashes (api/pgstore.txt), as they should be: one line per exported identifier of each package
// outside internal/ that is not a command, sorted.
func generate(r *repo.Repo) (map[string][]byte, error) {
	files := map[string][]byte{}
	owner := map[string]string{}
	for _, m := range r.Modules {
		if !recorded(m) {
			continue
		}
		name := path.Join(recordDir, fileName(m))
		if other, taken := owner[name]; taken {
			return nil, fmt.Errorf("apirecord: modules %s and %s would both be recorded in %s", other, m.Path, name)
		}
		owner[name] = m.Path
		lines, err := moduleLines(filepath.Join(r.Root, filepath.FromSlash(m.Dir)), goEnv(r.Root))
		if err != nil {
			return nil, fmt.Errorf("apirecord: module %s: %w", m.Path, err)
		}
		files[name] = joinLines(lines)
	}
	return files, nil
}

// goEnv is the environment of the go commands generate runs: the repository's go.work whatever
// GOWORK says, the record's platform, and no GOFLAGS, whose -tags would change which files count.
func goEnv(root string) []string {
	return append(os.Environ(),
		"GOWORK="+filepath.Join(root, "go.work"),
		"GOOS="+recordGOOS,
		"GOARCH="+recordGOARCH,
		"GOFLAGS=",
	)
}

// listed is what go list says of one package.
type listed struct {
	ImportPath string
	Name       string
	Export     string // the compiler's export data, in the build cache
	DepOnly    bool   // a dependency, not matched by ./...
}

// moduleLines returns the sorted record lines of the packages of the module in dir.
//
// The types come from the compiler's export data, which go list -export builds (or finds in the
// build cache) for every package and its dependencies, read by the standard library's importer:
// export data holds every exported declaration with its exact type and constant value, already
// resolved across packages and modules, so nothing here depends on where the module cache or the
// repository is.
func moduleLines(dir string, env []string) ([]string, error) {
	pkgs, err := goList(dir, env)
	if err != nil {
		return nil, err
	}
	exports := map[string]string{}
	for _, p := range pkgs {
		exports[p.ImportPath] = p.Export
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(importPath string) (io.ReadCloser, error) {
		file := exports[importPath]
		if file == "" {
			return nil, fmt.Errorf("go list gave no export data for %s", importPath)
		}
		return os.Open(file)
	})
	var lines []string
	for _, p := range pkgs {
		if p.DepOnly || p.Name == "main" || isInternal(p.ImportPath) {
			continue
		}
		pkg, err := imp.Import(p.ImportPath)
		if err != nil {
			return nil, fmt.Errorf("reading the export data of %s: %w (is the go command the one that built this program?)", p.ImportPath, err)
		}
		lines = append(lines, packageLines(pkg)...)
	}
	slices.Sort(lines)
	return slices.Compact(lines), nil
}

// goList lists the packages of the module in dir (./..., which stops at nested modules and skips
// testdata) and their dependencies, with export data.
func goList(dir string, env []string) ([]listed, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Name,Export,DepOnly", "./...")
	cmd.Dir = dir
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export ./... in %s: %w\n%s", dir, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading go list's output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

func joinLines(lines []string) []byte {
	if len(lines) == 0 {
		return nil
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}
