package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcplatform/conventions/tools/internal/repo"
)

// The committed record is the exported API of the working tree: a change to the public surface
// fails here until api/ is regenerated, so that the change shows in review as lines of api/*.txt.
func TestRecordIsCurrent(t *testing.T) {
	root, err := repo.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	r, err := repo.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(r)
	if err != nil {
		t.Fatal(err)
	}
	report, err := compare(root, want)
	if err != nil {
		t.Fatal(err)
	}
	if report != "" {
		t.Fatal("\n" + report)
	}
	for _, m := range r.Modules {
		if _, recorded := want[recordDir+"/"+fileName(m)]; recorded != (m.Published && !isInternal(m.Path)) {
			t.Errorf("module %s (published %v): recorded %v", m.Path, m.Published, recorded)
		}
	}
}

// Every kind of declaration, written as the command's doc says; and what it must leave out (a
// command, an internal package, a test file, testdata) left out.
func TestPackageLines(t *testing.T) {
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOOS="+recordGOOS, "GOARCH="+recordGOARCH)
	got, err := moduleLines(filepath.Join("testdata", "fixture"), env)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSpace(`
pkg example.com/fix, const High Level = 1
pkg example.com/fix, const Letter untyped rune = 97
pkg example.com/fix, const Low Level = 0
pkg example.com/fix, const Name = "x"
pkg example.com/fix, const On = true
pkg example.com/fix, const Ratio untyped float = 0.25
pkg example.com/fix, const Third untyped float = 1/3
pkg example.com/fix, const Typed Level = 2
pkg example.com/fix, const Untyped = 100
pkg example.com/fix, func F(context.Context, io.Reader, ...string) (int, error)
pkg example.com/fix, func Map[K comparable, V any](map[K]V, func(K) V) []V
pkg example.com/fix, func Sum[T ~int | ~float64](...T) T
pkg example.com/fix, func Take(example.com/fix/sub.Thing, <-chan int, chan<- []byte, chan (<-chan int)) *example.com/fix/sub.Thing
pkg example.com/fix, method (*Inner) Reset()
pkg example.com/fix, method (*List[E]) Push(E)
pkg example.com/fix, method (*Options) Pointer(io.Writer) error
pkg example.com/fix, method (Handler) ServeHTTP(net/http.ResponseWriter, *net/http.Request)
pkg example.com/fix, method (List[T]) Len() int
pkg example.com/fix, method (Options) Promoted() string
pkg example.com/fix, method (Options) Reset()
pkg example.com/fix, method (Options) Value() int
pkg example.com/fix, type Alias = example.com/fix/sub.Thing
pkg example.com/fix, type Empty interface {}
pkg example.com/fix, type Fn func(func(int) bool) error
pkg example.com/fix, type Handler func(net/http.ResponseWriter, *net/http.Request)
pkg example.com/fix, type Iface = interface{ M(int) string }
pkg example.com/fix, type Inner struct
pkg example.com/fix, type Inner struct, X int
pkg example.com/fix, type Level int
pkg example.com/fix, type List[T any] struct
pkg example.com/fix, type List[T any] struct, Items []T
pkg example.com/fix, type Number interface { ~int | ~float64 }
pkg example.com/fix, type Options struct
pkg example.com/fix, type Options struct, Anon struct{ A int `+"`json:\"a\"`"+`; b string }
pkg example.com/fix, type Options struct, Name string
pkg example.com/fix, type Options struct, Tags map[string][]string
pkg example.com/fix, type Options struct, embedded *Inner
pkg example.com/fix, type Options struct, embedded example.com/fix/sub.Thing
pkg example.com/fix, type Pair [2]example.com/fix/sub.Thing
pkg example.com/fix, type Reader interface { Peek, Read }
pkg example.com/fix, type Reader interface, Peek(int) ([]byte, error)
pkg example.com/fix, type Reader interface, Read([]byte) (int, error)
pkg example.com/fix, type Sealed interface { Public, unexported methods }
pkg example.com/fix, type Sealed interface, Public()
pkg example.com/fix, type Set[T comparable] = map[T]struct{}
pkg example.com/fix, type Stringish interface { ~string; String() string }
pkg example.com/fix, type Stringish interface, String() string
pkg example.com/fix, var Default Level
pkg example.com/fix, var ErrX error
pkg example.com/fix, var V unexportedType
pkg example.com/fix/sub, method (Thing) Name() string
pkg example.com/fix/sub, type Thing struct
pkg example.com/fix/sub, type Thing struct, ID string
`), "\n")
	if diff := diffLines(joinLines(want), joinLines(got)); !bytes.Equal(joinLines(got), joinLines(want)) {
		t.Errorf("the fixture's lines differ (+ got, - want):\n%s", diff)
	}
}

// -check names each stale file with its added and removed lines and the command that regenerates
// it; writing brings the directory back, removing the file of a module no longer recorded.
func TestCompareAndWrite(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, recordDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"a.txt":     "pkg a, func Kept()\npkg a, func Removed()\n",
		"gone.txt":  "pkg gone, func F()\n",
		"order.txt": "pkg o, func B()\npkg o, func A()\n",
		"README.md": "not a record file\n",
	} {
		if err := os.WriteFile(filepath.Join(root, recordDir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]byte{
		"api/a.txt":     []byte("pkg a, func Added(int)\npkg a, func Kept()\n"),
		"api/new.txt":   []byte("pkg n, var V int\n"),
		"api/order.txt": []byte("pkg o, func A()\npkg o, func B()\n"),
	}
	report, err := compare(root, want)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"api/a.txt is stale", "\t+pkg a, func Added(int)\n\t-pkg a, func Removed()\n",
		"api/gone.txt: no published module records there any more",
		"api/new.txt: missing; it would have 1 lines",
		"api/order.txt is stale", "out of order",
		"\t" + regenerate + "\n", "CHANGELOG.md",
	} {
		if !strings.Contains(report, s) {
			t.Errorf("the report lacks %q:\n%s", s, report)
		}
	}
	if strings.Contains(report, "Kept") || strings.Contains(report, "README") {
		t.Errorf("the report names what did not change:\n%s", report)
	}

	written, err := write(root, want)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(written, "; "); got != "api/a.txt; api/gone.txt (removed: no module records there); api/new.txt; api/order.txt" {
		t.Errorf("write did: %s", got)
	}
	if report, err := compare(root, want); err != nil || report != "" {
		t.Errorf("after write, compare: %q, %v", report, err)
	}
	if _, err := os.Stat(filepath.Join(root, recordDir, "README.md")); err != nil {
		t.Errorf("write removed a file that is not a record: %v", err)
	}
	if written, err := write(root, want); err != nil || len(written) != 0 {
		t.Errorf("a second write did %v, %v; want nothing", written, err)
	}
}

func TestRunRefusesAWrongCommandLine(t *testing.T) {
	for _, args := range [][]string{{"-write"}, {"check"}, {"-check", "extra"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "usage: apirecord") {
			t.Errorf("apirecord %v: exit %d, stderr %q; want 2 and the usage", args, code, stderr.String())
		}
	}
}
