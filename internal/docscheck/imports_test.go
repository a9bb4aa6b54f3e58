package docscheck

import (
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoTestifyOutsideTests: testify is for this repository's own _test.go files. A non-test file
// that imports it makes it a dependency of everyone who imports the package — the conformance suites
// (idempotency/storetest, webhook/cursortest, versioning/pintest, apikey/credentialtest,
// webhook/producer/driver/drivertest, portal/portaltest) are imported by third-party store authors' tests, and pgstore and
// redisstore by applications. Every module of the workspace is checked, nested ones included.
func TestNoTestifyOutsideTests(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	checked := map[string]bool{}
	err := walkFiles(root, func(path string) error {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		checked[filepath.ToSlash(rel)] = true
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if p == "github.com/stretchr/testify" || strings.HasPrefix(p, "github.com/stretchr/testify/") {
				t.Errorf("%s imports %s: only _test.go files may use testify", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk must have seen the suites, or the check proves nothing.
	for _, want := range []string{
		"idempotency/storetest/storetest.go",
		"webhook/cursortest/cursortest.go",
		"versioning/pintest/pintest.go",
		"apikey/credentialtest/credentialtest.go",
		"webhook/producer/driver/drivertest/log.go",
		"portal/portaltest/portaltest.go",
		"pgstore/idempotency.go",
		"redisstore/idempotency.go",
	} {
		if !checked[want] {
			t.Errorf("the walk from %s did not check %s", root, want)
		}
	}
}

// walkFiles calls fn with every file below root, in every module of the workspace, leaving out
// testdata and hidden directories (.git).
func walkFiles(root string, fn func(file string) error) error {
	return filepath.WalkDir(root, func(file string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || (strings.HasPrefix(name, ".") && file != root) {
				return filepath.SkipDir
			}
			return nil
		}
		return fn(file)
	})
}

// rootModule is the root module's path: its internal/ packages are the ones no nested module imports.
const rootModule = "github.com/svcplatform/conventions"

// modulePath reads the module line of a go.mod file.
func modulePath(t *testing.T, gomod string) string {
	t.Helper()
	data, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	t.Fatalf("%s has no module line", gomod)
	return ""
}

// TestNestedModulesDoNotImportRootInternal: no .go file of a nested module, test files included,
// imports a package of the root module's internal/. Go allows it (every module path of this
// repository starts with the root's), but a nested module released at v0.1.0 that did would be tied
// to one commit of the root module: the next change to that internal package, which the root module
// is free to make, breaks it. Test infrastructure the nested modules share lives in the module
// internal/testkit, which is versioned on its own; a module's own internal/ (pgstore/internal/pgtest)
// is its own business. Every module of the repository is found by its go.mod, so that a new one is
// checked without being listed here.
func TestNestedModulesDoNotImportRootInternal(t *testing.T) {
	root := repoRoot(t)
	// The modules, by directory relative to root ("." for the root module) and by module path.
	modDirs := map[string]string{}
	err := walkFiles(root, func(file string) error {
		if filepath.Base(file) == "go.mod" {
			rel, _ := filepath.Rel(root, filepath.Dir(file))
			modDirs[filepath.ToSlash(rel)] = modulePath(t, file)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if modDirs["."] != rootModule {
		t.Fatalf("the root go.mod declares %q, want %q", modDirs["."], rootModule)
	}
	// dirOfFile returns the module directory that holds a file: the nearest one up with a go.mod.
	dirOfFile := func(rel string) string {
		dir := path.Dir(rel)
		for modDirs[dir] == "" {
			dir = path.Dir(dir) // ends at ".", the root module
		}
		return dir
	}
	// dirOfImport returns the directory of the module that holds a package: the longest module path
	// that is the import path or a prefix of it at a slash.
	dirOfImport := func(imp string) string {
		best := "."
		for dir, mod := range modDirs {
			if (imp == mod || strings.HasPrefix(imp, mod+"/")) && len(mod) > len(modDirs[best]) {
				best = dir
			}
		}
		return best
	}

	fset := token.NewFileSet()
	checked := map[string]int{}   // module directory -> files checked
	exempted := map[string]bool{} // the imports of other modules' packages under internal/ that the rule lets through
	err = walkFiles(root, func(file string) error {
		if !strings.HasSuffix(file, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, file)
		rel = filepath.ToSlash(rel)
		mod := dirOfFile(rel)
		if mod == "." {
			return nil // the root module may use its own internal/
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked[mod]++
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if p != rootModule+"/internal" && !strings.HasPrefix(p, rootModule+"/internal/") {
				continue
			}
			if owner := dirOfImport(p); owner != "." {
				if owner != mod {
					exempted[p] = true // a module of its own, such as internal/testkit
				}
				continue
			}
			t.Errorf("%s (module %s) imports %s, a package of the root module's internal/: move what it needs into internal/testkit or into the module itself",
				rel, modDirs[mod], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk must have seen the nested modules, and let a testkit import through, or the check
	// proves nothing.
	for _, want := range []string{"pgstore", "redisstore", "otelconv", "examples", "benchmarks", "internal/testkit"} {
		if checked[want] == 0 {
			t.Errorf("the walk from %s checked no file of the module %s", root, want)
		}
	}
	if !exempted[rootModule+"/internal/testkit/serviceprobe"] {
		t.Errorf("no nested module's import of %s/internal/testkit/serviceprobe was seen: the walk missed the test helpers", rootModule)
	}
	t.Logf("files checked per module: %v", checked)
}
