package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// panicExempt are the packages whose constructors panic on purpose: test helpers in the manner of
// net/http/httptest, whose NewRequest and NewServer panic so that a broken test line is pointed at.
var panicExempt = map[string]bool{
	"webhook/webhooktest": true,
}

// The library's constructor rule (see the root package doc): a New… whose configuration can be
// invalid returns an error and never panics. This finds every exported New… function of the root,
// pgstore and redisstore modules whose own body calls panic, and every Must… outside the one place
// the rule allows it.
func TestConstructorsDoNotPanic(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case strings.HasPrefix(d.Name(), ".") && rel != ".", d.Name() == "testdata",
				rel == "examples", rel == "benchmarks", strings.Contains(rel+"/", "/internal/"), strings.HasPrefix(rel, "internal"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || panicExempt[filepath.ToSlash(filepath.Dir(rel))] {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Body == nil || !fd.Name.IsExported() {
				continue
			}
			name := fd.Name.Name
			if strings.HasPrefix(name, "Must") && rel != "ids/ids.go" {
				t.Errorf("%s: %s: a Must… exists only where the standard library would have one (ids.MustPrefix)", fset.Position(fd.Pos()), name)
			}
			if !strings.HasPrefix(name, "New") {
				continue
			}
			checked++
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "panic" {
						t.Errorf("%s: %s panics: return an error for a configuration it cannot honour", fset.Position(call.Pos()), name)
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 40 {
		t.Fatalf("checked only %d constructors: the walk missed the packages", checked)
	}
}
