package conventions_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/svcplatform/conventions/apierror"
)

// TestLibraryProblemDocsComplete keeps apierror.LibraryProblemDocs in step with the code: every
// problem or violation code the core module writes has an entry, and every entry names a code that
// something still writes. apierror cannot import the packages that write the codes (they import it),
// so the codes are found in their source, as a reader would find them:
//
//   - constants named Code… (or code… in package apierror's own unexported ones) whose value is a
//     string literal, in packages that import apierror and in the core module's packages they import
//     (webhook/producer's violations come from its internal/epcheck, its URL codes from ssrf);
//   - string literals given as the code of apierror.New, Body, Header, Query, Path, Unauthenticated,
//     Forbidden, NotFound, Conflict, Gone, Unprocessable and Unavailable, and as the Code of an
//     apierror.Error or apierror.Violation literal.
//
// Test files are not read, nor the test doubles of packages named …test (webhooktest's fake
// producer, sandboxtest): what they answer imitates the library for a consumer's tests and is not
// served by a product.
func TestLibraryProblemDocsComplete(t *testing.T) {
	written := writtenCodes(t)
	if len(written) < 50 {
		t.Fatalf("found only %d codes in the source: the scan is broken", len(written))
	}
	documented := make(map[string]bool)
	for _, d := range apierror.LibraryProblemDocs() {
		documented[d.Code] = true
	}
	for code, why := range notOnTheWire {
		switch {
		case written[code] == nil:
			t.Errorf("notOnTheWire lists %q, which the source no longer has: remove it from the list", code)
		case documented[code]:
			t.Errorf("notOnTheWire lists %q (%s), yet apierror.LibraryProblemDocs documents it: one of them is wrong", code, why)
		}
		delete(written, code)
	}
	for _, code := range slices.Sorted(maps.Keys(written)) {
		if !documented[code] {
			t.Errorf("code %q (%s) has no entry in apierror.LibraryProblemDocs", code, strings.Join(written[code], ", "))
		}
	}
	for _, code := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := written[code]; !ok {
			t.Errorf("apierror.LibraryProblemDocs documents %q, which nothing in the core module writes any more: remove the entry", code)
		}
	}
	if _, err := apierror.NewProblemDocs(apierror.LibraryProblemDocs()...); err != nil {
		t.Errorf("the library's entries do not build a registry: %v", err)
	}
}

// notOnTheWire are codes the scan finds that no response carries, each with the reason. The list is
// kept short and honest: an entry the source no longer has fails the test, as does one documented.
var notOnTheWire = map[string]string{
	// epcheck.Disabled is called only by driver.Endpoint.Validate, a store's own check, whose error
	// is a Go error (ErrInvalidEndpoint) and never a problem: the endpoints API sets the disabled state
	// through status, refused as invalid_setting.
	"invalid_disabled_state": "a store-side check of webhook/producer's epcheck, never written in a problem",
}

// scannedPackage is one directory of the core module, its non-test files parsed.
type scannedPackage struct {
	files   []*ast.File
	imports map[string]bool // import paths
}

const (
	modulePath   = "github.com/svcplatform/conventions"
	apierrorPath = modulePath + "/apierror"
)

// codeArg is where each apierror function takes its code (the argument's index).
var codeArg = map[string]int{
	"New": 1, "Body": 1, "Header": 1, "Query": 1, "Path": 1, "Unavailable": 1,
	"Unauthenticated": 0, "Forbidden": 0, "NotFound": 0, "Conflict": 0, "Gone": 0, "Unprocessable": 0,
}

// writtenCodes returns every code the core module writes, each with where it was found.
func writtenCodes(t *testing.T) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := parseCoreModule(t, fset)
	// The packages whose constants count: apierror, those that import it, and what they import from
	// the core module.
	counted := map[string]bool{"apierror": true}
	for dir, p := range pkgs {
		if p.imports[apierrorPath] {
			counted[dir] = true
			for imp := range p.imports {
				if rel, ok := strings.CutPrefix(imp, modulePath+"/"); ok {
					counted[rel] = true
				}
			}
		}
	}
	found := make(map[string][]string)
	add := func(lit *ast.BasicLit, what string) {
		if lit == nil || lit.Kind != token.STRING {
			return
		}
		code, err := strconv.Unquote(lit.Value)
		if err != nil || code == "" {
			return
		}
		pos := fset.Position(lit.Pos())
		where := filepath.ToSlash(pos.Filename) + ":" + strconv.Itoa(pos.Line) + " " + what
		found[code] = append(found[code], where)
	}
	for dir, p := range pkgs {
		for _, f := range p.files {
			apierrorName := ""
			for _, imp := range f.Imports {
				if ip, _ := strconv.Unquote(imp.Path.Value); ip == apierrorPath {
					apierrorName = "apierror"
					if imp.Name != nil {
						apierrorName = imp.Name.Name
					}
				}
			}
			// isAPIError reports whether the expression names an identifier of package apierror.
			isAPIError := func(e ast.Expr) (string, bool) {
				switch e := e.(type) {
				case *ast.Ident:
					return e.Name, dir == "apierror"
				case *ast.SelectorExpr:
					if x, ok := e.X.(*ast.Ident); ok && apierrorName != "" && x.Name == apierrorName {
						return e.Sel.Name, true
					}
				}
				return "", false
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.ValueSpec:
					if !counted[dir] {
						return true
					}
					for i, name := range n.Names {
						if !isCodeName(name.Name) || i >= len(n.Values) {
							continue
						}
						if lit, ok := n.Values[i].(*ast.BasicLit); ok {
							add(lit, "const "+name.Name)
						}
					}
				case *ast.CallExpr:
					fn, ok := isAPIError(n.Fun)
					if !ok {
						return true
					}
					if i, ok := codeArg[fn]; ok && i < len(n.Args) {
						if lit, ok := n.Args[i].(*ast.BasicLit); ok {
							add(lit, "apierror."+fn)
						}
					}
				case *ast.CompositeLit:
					typ := n.Type
					if u, ok := typ.(*ast.UnaryExpr); ok {
						typ = u.X
					}
					name, ok := isAPIError(typ)
					if !ok || name != "Error" && name != "Violation" {
						return true
					}
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Code" {
								if lit, ok := kv.Value.(*ast.BasicLit); ok {
									add(lit, "apierror."+name+" literal")
								}
							}
						}
					}
				}
				return true
			})
		}
	}
	return found
}

// isCodeName reports whether a constant's name marks it as a problem code: Code… (and code… for an
// unexported one), followed by an upper-case letter.
func isCodeName(name string) bool {
	rest, ok := strings.CutPrefix(name, "Code")
	if !ok {
		rest, ok = strings.CutPrefix(name, "code")
	}
	return ok && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z'
}

// parseCoreModule parses the non-test Go files of every package of the core module (the directory of
// this test, less nested modules, testdata and the test doubles of packages named …test).
// The map is keyed by directory, slash-separated and relative to the module root ("webhook/producer").
func parseCoreModule(t *testing.T, fset *token.FileSet) map[string]*scannedPackage {
	t.Helper()
	pkgs := make(map[string]*scannedPackage)
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			if p != "." {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // a nested module: pgstore, examples, tools, …
				}
			}
			if strings.HasSuffix(name, "test") && p != "." {
				return filepath.SkipDir // a test double: webhooktest, sandboxtest, storetest, …
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := path.Dir(filepath.ToSlash(p))
		pkg := pkgs[dir]
		if pkg == nil {
			pkg = &scannedPackage{imports: make(map[string]bool)}
			pkgs[dir] = pkg
		}
		pkg.files = append(pkg.files, f)
		for _, imp := range f.Imports {
			if ip, err := strconv.Unquote(imp.Path.Value); err == nil {
				pkg.imports[ip] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scanning the core module: %v", err)
	}
	return pkgs
}
