// Package repo reads and edits the modules of this repository as one release: which modules there
// are (go.work's use list), which of them are published, the version at which they require each
// other, and the invariants that let a user outside the repository `go get` any of them.
//
// The development arrangement is the one large multi-module Go repositories use: every module
// requires the others at the release version (v0.1.0, not v0.0.0, which no tag will ever name) and
// keeps a replace directive to the other's directory, so that `go mod tidy` with GOWORK=off and
// `go build` inside the repository use the working tree. A dependency's replace directives are
// ignored by the go command, so for a user the requirement resolves to the tag.
package repo

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// Unpublished are the modules, by directory, that are not released: nothing outside the repository
// requires them, so they get no tag, and no published module may require them.
var Unpublished = map[string]string{
	"benchmarks": "side-by-side measurements against peer libraries, run from a clone",
	"tools":      "this release tooling, run from a clone",
}

// Module is one module of the repository.
type Module struct {
	// Dir is the module's directory relative to the repository root, with slashes: "." for the root
	// module, "pgstore", "internal/testkit".
	Dir string
	// Path is the module path its go.mod declares.
	Path string
	// Published reports whether the module is released (tagged) and may be required from outside.
	Published bool

	file *modfile.File
	raw  []byte
}

// Repo is the repository's set of modules.
type Repo struct {
	// Root is the directory holding go.work.
	Root string
	// Modules are go.work's modules, in its order.
	Modules []*Module

	work *modfile.WorkFile
}

// FindRoot walks up from the working directory to the one holding go.work.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work in the working directory or above it: run it inside the repository")
		}
		dir = parent
	}
}

// Load reads go.work at root and the go.mod of every module it uses.
func Load(root string) (*Repo, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, fmt.Errorf("repo: %w", err)
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, fmt.Errorf("repo: %w", err)
	}
	r := &Repo{Root: root, work: work}
	for _, u := range work.Use {
		dir := path.Clean(filepath.ToSlash(u.Path))
		if strings.HasPrefix(dir, "../") || path.IsAbs(dir) {
			return nil, fmt.Errorf("repo: go.work uses %s, outside the repository", u.Path)
		}
		name := filepath.Join(root, filepath.FromSlash(dir), "go.mod")
		raw, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("repo: %w", err)
		}
		f, err := modfile.Parse(name, raw, nil)
		if err != nil {
			return nil, fmt.Errorf("repo: %w", err)
		}
		if f.Module == nil {
			return nil, fmt.Errorf("repo: %s declares no module", name)
		}
		_, unpublished := Unpublished[dir]
		r.Modules = append(r.Modules, &Module{Dir: dir, Path: f.Module.Mod.Path, Published: !unpublished, file: f, raw: raw})
	}
	if r.byDir(".") == nil {
		return nil, errors.New("repo: go.work does not use the root module (.)")
	}
	return r, nil
}

func (r *Repo) byDir(dir string) *Module {
	for _, m := range r.Modules {
		if m.Dir == dir {
			return m
		}
	}
	return nil
}

func (r *Repo) byPath(modPath string) *Module {
	for _, m := range r.Modules {
		if m.Path == modPath {
			return m
		}
	}
	return nil
}

// Published returns the published modules, root first.
func (r *Repo) Published() []*Module {
	var out []*Module
	for _, m := range r.Modules {
		if m.Published {
			out = append(out, m)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Dir == "." && out[j].Dir != "." })
	return out
}

// Tag is the tag that releases m at version: "v0.1.0" for the root module, "pgstore/v0.1.0" for
// the module in directory pgstore (the go command's convention for a module in a subdirectory).
func (m *Module) Tag(version string) string {
	if m.Dir == "." {
		return version
	}
	return m.Dir + "/" + version
}

// relDir is the path from module from's directory to module to's, as a replace directive names it.
func relDir(from, to *Module) string {
	rel, err := filepath.Rel(filepath.FromSlash(from.Dir), filepath.FromSlash(to.Dir))
	if err != nil { // both are relative to the same root: cannot happen
		panic(err)
	}
	rel = filepath.ToSlash(rel)
	switch {
	case rel == ".." || strings.HasSuffix(rel, "/.."):
		rel += "/" // "../", as go.mod files usually write a parent
	case !strings.HasPrefix(rel, "../"):
		rel = "./" + rel
	}
	return rel
}

// CheckVersion reports whether v can be the release version: a canonical semantic version without
// build metadata, above v0.0.0, of major version 0 or 1 (a v2 needs /v2 module paths).
func CheckVersion(v string) error {
	if !semver.IsValid(v) || semver.Canonical(v) != v || semver.Build(v) != "" {
		return fmt.Errorf("repo: %q is not a canonical semantic version such as v0.1.0", v)
	}
	if v == "v0.0.0" {
		return fmt.Errorf("repo: %s names no release: a user's go command would look it up and find nothing", v)
	}
	if major := semver.Major(v); major != "v0" && major != "v1" {
		return fmt.Errorf("repo: %s is major version %s, which needs /%s module paths", v, major, major)
	}
	return nil
}

// Version returns the release version: the one version at which the modules require each other.
func (r *Repo) Version() (string, error) {
	versions := map[string][]string{}
	for _, m := range r.Modules {
		for _, req := range m.file.Require {
			if r.byPath(req.Mod.Path) != nil {
				versions[req.Mod.Version] = append(versions[req.Mod.Version], m.Dir+" requires "+req.Mod.Path)
			}
		}
	}
	switch len(versions) {
	case 0:
		return "", errors.New("repo: no module requires another one: the release version is named nowhere")
	case 1:
		for v := range versions {
			return v, CheckVersion(v)
		}
	}
	var lines []string
	for v, who := range versions {
		lines = append(lines, fmt.Sprintf("%s (%s)", v, strings.Join(who, ", ")))
	}
	sort.Strings(lines)
	return "", fmt.Errorf("repo: the modules require each other at several versions: %s", strings.Join(lines, "; "))
}

// Check returns every way the repository's modules break the release arrangement: go lines that
// differ, requirements between modules at other than one version or without their replace
// directive, stale replace directives, a replace directive in the root module (which would stop `go
// install github.com/svcplatform/conventions/cmd/svc@version`), and published modules that require
// unpublished ones.
func (r *Repo) Check() []error {
	var errs []error
	if _, err := r.Version(); err != nil {
		errs = append(errs, err)
	}
	goLines := map[string][]string{}
	if r.work.Go != nil {
		goLines[r.work.Go.Version] = append(goLines[r.work.Go.Version], "go.work")
	}
	for _, m := range r.Modules {
		gomod := path.Join(m.Dir, "go.mod")
		if m.file.Go == nil {
			errs = append(errs, fmt.Errorf("%s: no go line", gomod))
		} else {
			goLines[m.file.Go.Version] = append(goLines[m.file.Go.Version], gomod)
		}
		if m.file.Toolchain != nil {
			errs = append(errs, fmt.Errorf("%s: a toolchain line (%s) raises the floor for everyone who builds it", gomod, m.file.Toolchain.Name))
		}
		if m.Dir == "." && len(m.file.Replace) > 0 {
			errs = append(errs, fmt.Errorf("%s: the root module has a replace directive, so `go install …/cmd/svc@version` would refuse it", gomod))
		}
		required := map[string]bool{}
		for _, req := range m.file.Require {
			dep := r.byPath(req.Mod.Path)
			if dep == nil {
				continue
			}
			required[dep.Path] = true
			if m.Published && !dep.Published {
				errs = append(errs, fmt.Errorf("%s: published module %s requires %s, which is not published", gomod, m.Path, dep.Path))
			}
			if !r.hasReplace(m, dep) {
				errs = append(errs, fmt.Errorf("%s: requires %s but has no `replace %s => %s`", gomod, dep.Path, dep.Path, relDir(m, dep)))
			}
		}
		for _, rep := range m.file.Replace {
			dep := r.byPath(rep.Old.Path)
			if dep == nil {
				errs = append(errs, fmt.Errorf("%s: replaces %s, which is not a module of this repository: a user would not get that replacement", gomod, rep.Old.Path))
				continue
			}
			if !required[dep.Path] {
				errs = append(errs, fmt.Errorf("%s: replaces %s, which it does not require", gomod, dep.Path))
			}
		}
	}
	if len(goLines) > 1 {
		var lines []string
		for v, who := range goLines {
			lines = append(lines, fmt.Sprintf("go %s (%s)", v, strings.Join(who, ", ")))
		}
		sort.Strings(lines)
		errs = append(errs, fmt.Errorf("the modules declare several Go floors: %s", strings.Join(lines, "; ")))
	}
	return errs
}

// hasReplace reports whether m replaces dep, at every version, by dep's directory.
func (r *Repo) hasReplace(m, dep *Module) bool {
	for _, rep := range m.file.Replace {
		if rep.Old.Path == dep.Path && rep.Old.Version == "" && rep.New.Version == "" &&
			path.Clean(rep.New.Path) == path.Clean(relDir(m, dep)) {
			return true
		}
	}
	return false
}

// GoVersion returns the go line of the root module.
func (r *Repo) GoVersion() string {
	if f := r.byDir(".").file; f.Go != nil {
		return f.Go.Version
	}
	return ""
}

// SetVersion makes every requirement between the repository's modules name version, adding the
// replace directive to the required module's directory where it is missing, and writes the go.mod
// files that change. It returns the go.mod files it wrote.
func (r *Repo) SetVersion(version string) ([]string, error) {
	if err := CheckVersion(version); err != nil {
		return nil, err
	}
	var written []string
	for _, m := range r.Modules {
		for _, req := range slices.Clone(m.file.Require) {
			dep := r.byPath(req.Mod.Path)
			if dep == nil {
				continue
			}
			if req.Mod.Version != version {
				if err := m.file.AddRequire(dep.Path, version); err != nil {
					return written, fmt.Errorf("repo: %s/go.mod: %w", m.Dir, err)
				}
			}
			if m.Dir != "." && !r.hasReplace(m, dep) {
				if err := m.file.AddReplace(dep.Path, "", relDir(m, dep), ""); err != nil {
					return written, fmt.Errorf("repo: %s/go.mod: %w", m.Dir, err)
				}
			}
		}
		m.file.Cleanup()
		out, err := m.file.Format()
		if err != nil {
			return written, fmt.Errorf("repo: %s/go.mod: %w", m.Dir, err)
		}
		if bytes.Equal(out, m.raw) {
			continue
		}
		name := filepath.Join(r.Root, filepath.FromSlash(m.Dir), "go.mod")
		if err := os.WriteFile(name, out, 0o644); err != nil {
			return written, fmt.Errorf("repo: %w", err)
		}
		m.raw = out
		written = append(written, path.Join(m.Dir, "go.mod"))
	}
	return written, nil
}
