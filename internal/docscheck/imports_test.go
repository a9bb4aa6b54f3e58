package docscheck

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoTestifyOutsideTests: testify is for this repository's own _test.go files. A non-test file
// that imports it makes it a dependency of everyone who imports the package — the conformance suites
// (idempotency/storetest, webhook/cursortest, versioning/pintest, sandbox/credentialtest,
// webhook/producer/logtest) are imported by third-party store authors' tests, and pgstore and
// redisstore by applications. Every module of the workspace is checked, nested ones included.
func TestNoTestifyOutsideTests(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	checked := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || (strings.HasPrefix(name, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
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
		"sandbox/credentialtest/credentialtest.go",
		"webhook/producer/logtest/logtest.go",
		"pgstore/idempotency.go",
		"redisstore/idempotency.go",
	} {
		if !checked[want] {
			t.Errorf("the walk from %s did not check %s", root, want)
		}
	}
}
