package repo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// WriteProxy writes, under dir, a module proxy (the layout GOPROXY=file://dir serves) holding every
// published module at version, made from the working tree: the files git tracks or would track (not
// what .gitignore leaves out, such as built binaries), as they are on disk. Like the go command for a
// module in a subdirectory of a repository, it adds the repository's LICENSE to a module that has
// none of its own. stamp is the version's time in the .info files.
func (r *Repo) WriteProxy(dir, version string, stamp time.Time) error {
	if err := CheckVersion(version); err != nil {
		return err
	}
	files, err := r.workingFiles()
	if err != nil {
		return err
	}
	for _, m := range r.Published() {
		mv := module.Version{Path: m.Path, Version: version}
		escaped, err := module.EscapePath(m.Path)
		if err != nil {
			return fmt.Errorf("repo: %w", err)
		}
		vdir := filepath.Join(dir, filepath.FromSlash(escaped), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return fmt.Errorf("repo: %w", err)
		}
		info, err := json.Marshal(struct {
			Version string
			Time    time.Time
		}{version, stamp.UTC()})
		if err != nil {
			return fmt.Errorf("repo: %w", err)
		}
		if err := os.WriteFile(filepath.Join(vdir, version+".info"), info, 0o644); err != nil {
			return fmt.Errorf("repo: %w", err)
		}
		if err := os.WriteFile(filepath.Join(vdir, version+".mod"), m.raw, 0o644); err != nil {
			return fmt.Errorf("repo: %w", err)
		}
		if err := os.WriteFile(filepath.Join(vdir, "list"), []byte(version+"\n"), 0o644); err != nil {
			return fmt.Errorf("repo: %w", err)
		}
		var zipped bytes.Buffer
		if err := zip.Create(&zipped, mv, r.moduleFiles(m, files)); err != nil {
			return fmt.Errorf("repo: zipping %s: %w", mv, err)
		}
		if err := os.WriteFile(filepath.Join(vdir, version+".zip"), zipped.Bytes(), 0o644); err != nil {
			return fmt.Errorf("repo: %w", err)
		}
	}
	return nil
}

// workingFiles lists, relative to the root with slashes, the regular files of the working tree that
// git tracks or would track.
func (r *Repo) workingFiles() ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = r.Root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("repo: git ls-files: %w", err)
	}
	var files []string
	seen := map[string]bool{}
	for _, name := range strings.Split(string(out), "\x00") {
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		fi, err := os.Lstat(filepath.Join(r.Root, filepath.FromSlash(name)))
		if err != nil || !fi.Mode().IsRegular() { // deleted in the working tree, a link, a submodule
			continue
		}
		files = append(files, name)
	}
	return files, nil
}

// moduleFiles picks m's files out of the repository's: those below its directory and not below
// another module's, plus the repository's LICENSE when m has none.
func (r *Repo) moduleFiles(m *Module, files []string) []zip.File {
	owner := func(name string) *Module { // the module with the longest directory that holds name
		var best *Module
		for _, o := range r.Modules {
			if (o.Dir == "." || strings.HasPrefix(name, o.Dir+"/")) && (best == nil || len(o.Dir) > len(best.Dir)) {
				best = o
			}
		}
		return best
	}
	var out []zip.File
	hasLicense := false
	for _, name := range files {
		if owner(name) != m {
			continue
		}
		rel := name
		if m.Dir != "." {
			rel = strings.TrimPrefix(name, m.Dir+"/")
		}
		if rel == "LICENSE" {
			hasLicense = true
		}
		out = append(out, diskFile{zipPath: rel, disk: filepath.Join(r.Root, filepath.FromSlash(name))})
	}
	if !hasLicense {
		if _, err := os.Stat(filepath.Join(r.Root, "LICENSE")); err == nil {
			out = append(out, diskFile{zipPath: "LICENSE", disk: filepath.Join(r.Root, "LICENSE")})
		}
	}
	return out
}

// diskFile is a file of the working tree under the path it has in a module zip.
type diskFile struct {
	zipPath string
	disk    string
}

func (f diskFile) Path() string                 { return path.Clean(f.zipPath) }
func (f diskFile) Lstat() (fs.FileInfo, error)  { return os.Lstat(f.disk) }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.disk) }
