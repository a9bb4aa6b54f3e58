package repo

import (
	"archive/zip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fixture writes a repository of three modules — the root, store, and benchmarks, which Unpublished
// names — with files overriding or (when empty) removing the defaults, and returns its root.
func fixture(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	base := map[string]string{
		"go.work": "go 1.25.0\n\nuse (\n\t.\n\t./store\n\t./benchmarks\n)\n",
		"go.mod":  "module example.com/lib\n\ngo 1.25.0\n\nrequire github.com/google/uuid v1.6.0\n",
		"lib.go":  "package lib\n",
		"LICENSE": "license text\n",
		"store/go.mod": "module example.com/lib/store\n\ngo 1.25.0\n\n" +
			"require (\n\texample.com/lib v0.0.0\n\tgithub.com/jackc/pgx/v5 v5.12.0\n)\n\nreplace example.com/lib => ../\n",
		"store/store.go":      "package store\n",
		"store/internal/x.go": "package internal\n",
		"benchmarks/go.mod": "module example.com/lib/benchmarks\n\ngo 1.25.0\n\n" +
			"require (\n\texample.com/lib v0.0.0\n\texample.com/lib/store v0.0.0\n)\n\n" +
			"replace (\n\texample.com/lib => ../\n\texample.com/lib/store => ../store\n)\n",
		"benchmarks/b.go": "package benchmarks\n",
	}
	for name, content := range files {
		if content == "" {
			delete(base, name)
			continue
		}
		base[name] = content
	}
	for name, content := range base {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func load(t *testing.T, root string) *Repo {
	t.Helper()
	r, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func errorTexts(errs []error) string {
	var s []string
	for _, err := range errs {
		s = append(s, err.Error())
	}
	return strings.Join(s, "\n")
}

func TestSetVersionRewritesEveryRequirementAndKeepsTheRest(t *testing.T) {
	root := fixture(t, nil)
	r := load(t, root)
	if errs := r.Check(); !strings.Contains(errorTexts(errs), "v0.0.0 names no release") {
		t.Fatalf("Check before: want the v0.0.0 refusal, got %v", errs)
	}
	written, err := r.SetVersion("v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"store/go.mod", "benchmarks/go.mod"}; !slices.Equal(written, want) {
		t.Fatalf("written %v, want %v", written, want)
	}
	store, _ := os.ReadFile(filepath.Join(root, "store", "go.mod"))
	want := "module example.com/lib/store\n\ngo 1.25.0\n\n" +
		"require (\n\texample.com/lib v0.1.0\n\tgithub.com/jackc/pgx/v5 v5.12.0\n)\n\nreplace example.com/lib => ../\n"
	if string(store) != want {
		t.Fatalf("store/go.mod:\n%s\nwant:\n%s", store, want)
	}

	r = load(t, root) // as read back from disk
	if errs := r.Check(); len(errs) > 0 {
		t.Fatalf("Check after: %v", errs)
	}
	if v, err := r.Version(); v != "v0.1.0" || err != nil {
		t.Fatalf("Version = %q, %v", v, err)
	}
	var tags []string
	for _, m := range r.Published() {
		tags = append(tags, m.Tag("v0.1.0"))
	}
	if want := []string{"v0.1.0", "store/v0.1.0"}; !slices.Equal(tags, want) {
		t.Fatalf("tags %v, want %v", tags, want)
	}
	if written, err := r.SetVersion("v0.1.0"); err != nil || len(written) != 0 {
		t.Fatalf("setting the same version again wrote %v, %v", written, err)
	}
}

func TestSetVersionAddsAMissingReplace(t *testing.T) {
	root := fixture(t, map[string]string{
		"store/go.mod": "module example.com/lib/store\n\ngo 1.25.0\n\nrequire example.com/lib v0.0.0\n",
	})
	if _, err := load(t, root).SetVersion("v0.2.0"); err != nil {
		t.Fatal(err)
	}
	store, _ := os.ReadFile(filepath.Join(root, "store", "go.mod"))
	if !strings.Contains(string(store), "replace example.com/lib => ../") {
		t.Fatalf("no replace added:\n%s", store)
	}
	if errs := load(t, root).Check(); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestCheckVersionRefuses(t *testing.T) {
	for _, v := range []string{"", "0.1.0", "v0.1", "v0.0.0", "v2.0.0", "v0.1.0+build", "v01.0.0"} {
		if err := CheckVersion(v); err == nil {
			t.Errorf("CheckVersion(%q) = nil", v)
		}
	}
	for _, v := range []string{"v0.1.0", "v0.10.3", "v1.0.0", "v0.2.0-rc.1"} {
		if err := CheckVersion(v); err != nil {
			t.Errorf("CheckVersion(%q) = %v", v, err)
		}
	}
}

func TestCheckFindsEveryBrokenRule(t *testing.T) {
	good := map[string]string{
		"store/go.mod": "module example.com/lib/store\n\ngo 1.25.0\n\nrequire example.com/lib v0.1.0\n\nreplace example.com/lib => ../\n",
		"benchmarks/go.mod": "module example.com/lib/benchmarks\n\ngo 1.25.0\n\n" +
			"require (\n\texample.com/lib v0.1.0\n\texample.com/lib/store v0.1.0\n)\n\n" +
			"replace (\n\texample.com/lib => ../\n\texample.com/lib/store => ../store\n)\n",
	}
	if errs := load(t, fixture(t, good)).Check(); len(errs) > 0 {
		t.Fatalf("the good fixture: %v", errs)
	}
	cases := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"two go lines", map[string]string{"go.mod": "module example.com/lib\n\ngo 1.26.0\n"}, "several Go floors"},
		{"go.work's go line", map[string]string{"go.work": "go 1.26.0\n\nuse (\n\t.\n\t./store\n\t./benchmarks\n)\n"}, "several Go floors"},
		{"a toolchain line", map[string]string{"go.mod": "module example.com/lib\n\ngo 1.25.0\n\ntoolchain go1.26.1\n"}, "toolchain line"},
		{"two versions", map[string]string{"store/go.mod": "module example.com/lib/store\n\ngo 1.25.0\n\nrequire example.com/lib v0.2.0\n\nreplace example.com/lib => ../\n"}, "several versions"},
		{"no replace", map[string]string{"store/go.mod": "module example.com/lib/store\n\ngo 1.25.0\n\nrequire example.com/lib v0.1.0\n"}, "has no `replace example.com/lib => ../`"},
		{"a replace elsewhere", map[string]string{"store/go.mod": "module example.com/lib/store\n\ngo 1.25.0\n\nrequire example.com/lib v0.1.0\n\nreplace example.com/lib => ../../lib\n"}, "has no `replace"},
		{"a replace in the root", map[string]string{"go.mod": "module example.com/lib\n\ngo 1.25.0\n\nreplace github.com/google/uuid => ../uuid\n"}, "the root module has a replace directive"},
		{"a replace of another module", map[string]string{"store/go.mod": "module example.com/lib/store\n\ngo 1.25.0\n\nrequire example.com/lib v0.1.0\n\nreplace (\n\texample.com/lib => ../\n\tgithub.com/jackc/pgx/v5 => ../pgx\n)\n"}, "not a module of this repository"},
		{"a stale replace", map[string]string{
			"store/go.mod": "module example.com/lib/store\n\ngo 1.25.0\n\nrequire example.com/lib v0.1.0\n\nreplace example.com/lib => ../\n",
			"benchmarks/go.mod": "module example.com/lib/benchmarks\n\ngo 1.25.0\n\nrequire example.com/lib v0.1.0\n\n" +
				"replace (\n\texample.com/lib => ../\n\texample.com/lib/store => ../store\n)\n"}, "which it does not require"},
		{"published requires unpublished", map[string]string{"store/go.mod": "module example.com/lib/store\n\ngo 1.25.0\n\n" +
			"require (\n\texample.com/lib v0.1.0\n\texample.com/lib/benchmarks v0.1.0\n)\n\n" +
			"replace (\n\texample.com/lib => ../\n\texample.com/lib/benchmarks => ../benchmarks\n)\n"}, "which is not published"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{}
			for k, v := range good {
				files[k] = v
			}
			for k, v := range c.files {
				files[k] = v
			}
			errs := load(t, fixture(t, files)).Check()
			if !strings.Contains(errorTexts(errs), c.want) {
				t.Fatalf("want an error containing %q, got:\n%s", c.want, errorTexts(errs))
			}
		})
	}
}

// The proxy holds each published module's tracked and untracked-but-not-ignored files, not the
// files of nested modules nor ignored ones, and the repository's LICENSE in a nested module's zip.
func TestWriteProxy(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root := fixture(t, map[string]string{
		".gitignore":   "/store/store-binary\n",
		"store/go.mod": "module example.com/lib/store\n\ngo 1.25.0\n\nrequire example.com/lib v0.1.0\n\nreplace example.com/lib => ../\n",
		"benchmarks/go.mod": "module example.com/lib/benchmarks\n\ngo 1.25.0\n\n" +
			"require (\n\texample.com/lib v0.1.0\n\texample.com/lib/store v0.1.0\n)\n\n" +
			"replace (\n\texample.com/lib => ../\n\texample.com/lib/store => ../store\n)\n",
		"store/store-binary": "\x7fELF",
	})
	for _, args := range [][]string{{"init", "-q"}, {"add", "go.work", "go.mod", "lib.go", "LICENSE", "store"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "store", "new.go"), []byte("package store\n"), 0o644); err != nil {
		t.Fatal(err) // untracked, not ignored: what the next commit would hold
	}
	proxy := t.TempDir()
	stamp := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	if err := load(t, root).WriteProxy(proxy, "v0.1.0", stamp); err != nil {
		t.Fatal(err)
	}
	zipped := func(dir string) []string {
		zr, err := zip.OpenReader(filepath.Join(proxy, dir, "@v", "v0.1.0.zip"))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		var names []string
		for _, f := range zr.File {
			names = append(names, f.Name)
		}
		slices.Sort(names)
		return names
	}
	if got, want := zipped("example.com/lib"), []string{
		"example.com/lib@v0.1.0/.gitignore", "example.com/lib@v0.1.0/LICENSE", "example.com/lib@v0.1.0/go.mod",
		"example.com/lib@v0.1.0/go.work", "example.com/lib@v0.1.0/lib.go",
	}; !slices.Equal(got, want) {
		t.Errorf("root zip %v, want %v", got, want)
	}
	if got, want := zipped("example.com/lib/store"), []string{
		"example.com/lib/store@v0.1.0/LICENSE", "example.com/lib/store@v0.1.0/go.mod",
		"example.com/lib/store@v0.1.0/internal/x.go", "example.com/lib/store@v0.1.0/new.go",
		"example.com/lib/store@v0.1.0/store.go",
	}; !slices.Equal(got, want) {
		t.Errorf("store zip %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(proxy, "example.com", "lib", "benchmarks")); !os.IsNotExist(err) {
		t.Errorf("the unpublished module is in the proxy: %v", err)
	}
	info, _ := os.ReadFile(filepath.Join(proxy, "example.com", "lib", "store", "@v", "v0.1.0.info"))
	if want := `{"Version":"v0.1.0","Time":"2026-11-28T00:00:00Z"}`; string(info) != want {
		t.Errorf(".info %s, want %s", info, want)
	}
	mod, _ := os.ReadFile(filepath.Join(proxy, "example.com", "lib", "store", "@v", "v0.1.0.mod"))
	if !strings.Contains(string(mod), "require example.com/lib v0.1.0") {
		t.Errorf(".mod is not the module's go.mod:\n%s", mod)
	}
}

// This repository itself follows every rule, so that a user outside it can `go get` each module.
func TestRepositoryFollowsTheRules(t *testing.T) {
	root, err := FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	r := load(t, root)
	if errs := r.Check(); len(errs) > 0 {
		t.Fatalf("go run ./tools/release check:\n%s", errorTexts(errs))
	}
	for _, m := range r.Modules {
		if _, listed := Unpublished[m.Dir]; !listed && !m.Published {
			t.Errorf("%s: neither published nor listed as unpublished", m.Dir)
		}
	}
}
