package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// zeroValueModules are the modules whose exported types must document their zero value: the ones
// users import. examples and benchmarks are programs and measurements, not API.
var zeroValueModules = []string{".", "pgstore", "redisstore", "otelconv"}

// mentionsZeroValue is the whole matcher, deliberately simple: the doc comment says "zero value",
// "the zero …" (the zero Signer, the zero Key) or "zero <TypeName>", in any case, with any spacing
// (a comment may wrap between the two words). It checks that the sentence is there, not that it is
// true; review does that.
func mentionsZeroValue(doc, typeName string) bool {
	re := regexp.MustCompile(`(?i)\bzero\s+value\b|\bthe\s+zero\b|\bzero\s+` + regexp.QuoteMeta(typeName) + `\b`)
	return re.MatchString(doc)
}

// zeroValueType reports whether a type's zero value is something a user can hold and call: every
// struct, and a named map, slice, func, chan or pointer type that has methods (a nil one is a valid
// receiver). Interfaces, basic types and aliases are left out.
func zeroValueType(spec *ast.TypeSpec, hasMethods bool) bool {
	if spec.Assign.IsValid() {
		return false
	}
	switch spec.Type.(type) {
	case *ast.StructType:
		return true
	case *ast.MapType, *ast.ArrayType, *ast.FuncType, *ast.ChanType, *ast.StarExpr:
		return hasMethods
	}
	return false
}

// undocumentedZero is one exported type whose doc comment does not mention its zero value.
type undocumentedZero struct {
	pos  string // file:line, relative to the repository root
	name string
}

// findUndocumentedZeroValues parses the non-test .go files under dir (a module root), skipping
// internal/, testdata and nested modules, and returns the exported types that fail the matcher,
// with the number of types checked.
func findUndocumentedZeroValues(t *testing.T, root, dir string) ([]undocumentedZero, int) {
	t.Helper()
	fset := token.NewFileSet()
	// Methods are collected per package directory, since a type's methods may live in another file.
	type candidate struct {
		dir  string
		spec *ast.TypeSpec
		doc  string
	}
	var candidates []candidate
	methods := map[string]bool{} // dir + "." + receiver type name
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != dir {
				if name == "internal" || name == "testdata" || strings.HasPrefix(name, ".") {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // a nested module is checked on its own, or not at all
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkgDir := filepath.Dir(path)
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv != nil && len(decl.Recv.List) == 1 {
					methods[pkgDir+"."+receiverName(decl.Recv.List[0].Type)] = true
				}
			case *ast.GenDecl:
				if decl.Tok != token.TYPE {
					continue
				}
				for _, s := range decl.Specs {
					spec := s.(*ast.TypeSpec)
					if !spec.Name.IsExported() {
						continue
					}
					doc := spec.Doc
					if doc == nil && !decl.Lparen.IsValid() {
						doc = decl.Doc // `// Doc.` above `type X struct` belongs to the GenDecl
					}
					candidates = append(candidates, candidate{dir: pkgDir, spec: spec, doc: doc.Text()})
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []undocumentedZero
	checked := 0
	for _, c := range candidates {
		if !zeroValueType(c.spec, methods[c.dir+"."+c.spec.Name.Name]) {
			continue
		}
		checked++
		if mentionsZeroValue(c.doc, c.spec.Name.Name) {
			continue
		}
		p := fset.Position(c.spec.Pos())
		rel, _ := filepath.Rel(root, p.Filename)
		out = append(out, undocumentedZero{pos: filepath.ToSlash(rel) + ":" + itoa(p.Line), name: c.spec.Name.Name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pos < out[j].pos })
	return out, checked
}

// receiverName is the type name of a method receiver: T, *T, T[K], *T[K].
func receiverName(expr ast.Expr) string {
	for {
		switch e := expr.(type) {
		case *ast.StarExpr:
			expr = e.X
		case *ast.IndexExpr:
			expr = e.X
		case *ast.IndexListExpr:
			expr = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}

// TestExportedTypesDocumentTheirZeroValue: every exported struct type (and every exported map, slice,
// func, chan or pointer type with methods) of the modules users import says in its doc comment what
// its zero value does — ready to use, the defaults, or not usable and which error its methods return.
// Issue 16: a reader must never have to find out by calling a method on one.
func TestExportedTypesDocumentTheirZeroValue(t *testing.T) {
	root := repoRoot(t)
	total := 0
	for _, mod := range zeroValueModules {
		missing, checked := findUndocumentedZeroValues(t, root, filepath.Join(root, mod))
		if checked == 0 {
			t.Errorf("module %s: no exported type checked", mod)
		}
		t.Logf("module %s: %d exported types checked", mod, checked)
		total += checked
		for _, m := range missing {
			t.Errorf("%s: type %s: doc comment does not say what its zero value does (say \"The zero value …\")", m.pos, m.name)
		}
	}
	if total < 100 {
		t.Errorf("only %d exported types checked: the walk missed packages", total)
	}
	t.Logf("%d exported types checked", total)
}

func TestMentionsZeroValue(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want bool
	}{
		{"A Foo does things. The zero value is ready to use.", true},
		{"A Foo does things. Its zero value is not usable: build one with NewFoo.", true},
		{"Build one with NewFoo; the zero Foo has no secret.", true},
		{"THE ZERO VALUE means the defaults.", true},
		{"A zero Foo is refused.", true},
		{"a plain value, whose zero\nvalue is empty", true},
		{"A Foo does things. It is safe for concurrent use.", false},
		{"Zero-length bodies are allowed.", false},
		{"A zero Bar is refused.", false},
		{"", false},
	} {
		if got := mentionsZeroValue(tc.doc, "Foo"); got != tc.want {
			t.Errorf("mentionsZeroValue(%q) = %v, want %v", tc.doc, got, tc.want)
		}
	}
}
